"""The deployment's mem0: the only module that imports mem0 and builds ``mem0.Memory``.

Only commands that write through mem0 (reconcile, forget, prune) come here; check, doctor and
snapshots never do. ``MEM0_DIR`` is set before the import, because importing mem0 writes
``$MEM0_DIR/config.json`` (mem0ai 2.2.1); ``plugins`` are imported first so custom providers
register themselves; secrets are resolved only here.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from memsync.config import Config, resolve_secrets
from memsync.errors import ConfigError, LockedError, UnavailableError
from memsync.stores import local_qdrant, locks
from memsync.stores.sqlite_files import roll_back_hot_journal

PROBE_TEXT = "memsync embedder probe"


def prepare_for_writing(config: Config) -> None:
    """Roll back hot journals a crashed writer (the app or memsync) left, before capturing.

    Only commands that write call this: read-only copies cannot roll a journal back.
    """
    paths = [config.history_db_path, *sorted(config.qdrant_path.glob("collection/*/storage.sqlite"))]
    for path in paths:
        if path.is_file():
            roll_back_hot_journal(path)


def require_store_free(config: Config, what: str) -> None:
    """Raise LockedError (exit 12) when another process holds the embedded Qdrant store.

    Reads /proc/locks and open files; never takes the lock itself.
    """
    holder = locks.find_holder(config.qdrant_path / local_qdrant.LOCK_FILE, config.qdrant_path)
    if holder is not None and holder.pid != os.getpid():
        raise LockedError(
            f"{what}: the embedded Qdrant store {config.qdrant_path} is held by {holder.describe()}",
            "stop that process (the app) first; embedded Qdrant allows one process at a time",
        )


@contextmanager
def open_memory(config: Config) -> Iterator[Any]:
    """Build ``mem0.Memory`` from the deployment's config; close it (and its lock) on exit.

    Raises:
        ConfigError: a plugin cannot be imported, a secret is missing, mem0 rejects the config,
            or the embedder fails its probe (the message names the embedder).
        LockedError: the embedded store is held by another process.
    """
    require_store_free(config, "writing through mem0")
    os.environ["MEM0_DIR"] = str(config.mem0_dir)
    # A maintenance tool sends nothing anywhere, and must not open mem0's second embedded
    # Qdrant (migrations_qdrant) that telemetry keeps (mem0ai 2.2.1).
    os.environ["MEM0_TELEMETRY"] = "False"
    for plugin in config.plugins:
        try:
            importlib.import_module(plugin)
        except Exception as error:  # noqa: BLE001 - any plugin failure is a config problem
            raise ConfigError(config.source, [f"plugins: cannot import {plugin!r}: {error}"]) from error
    settings = resolve_secrets(config.mem0, os.environ)
    from mem0 import Memory

    mem0_logger = logging.getLogger("mem0")
    level = mem0_logger.level
    mem0_logger.setLevel(logging.CRITICAL)  # mem0 logs validation errors with the input (secrets)
    try:
        memory = Memory.from_config(settings)
    except RuntimeError as error:
        if "already accessed" in str(error):
            raise LockedError(
                f"the embedded Qdrant store {config.qdrant_path} was taken by another process just now",
                "another memsync command or the app started; try again when it is done",
            ) from error
        raise ConfigError(config.source, [f"mem0: Memory.from_config failed: {error}"]) from error
    except ValueError as error:
        if hasattr(error, "errors"):  # pydantic: name the keys, never the values (secrets)
            where = "; ".join(f"mem0.{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                              for e in error.errors())
            raise ConfigError(config.source, [where or "mem0 rejected the configuration"]) from None
        if "inhomogeneous" in str(error):
            raise UnavailableError(
                f"the collection in {config.qdrant_path} holds vectors of different sizes: qdrant-client "
                "cannot open it, so nothing can be written through mem0",
                "memsync check names the points (dimension-mismatch); restore a snapshot",
            ) from error
        raise ConfigError(config.source, [f"mem0: Memory.from_config failed: {error}"]) from error
    except Exception as error:  # noqa: BLE001 - mem0 raises many kinds on a bad config
        raise ConfigError(config.source, [f"mem0: Memory.from_config failed ({type(error).__name__})"]) from None
    finally:
        mem0_logger.setLevel(level)
    try:
        yield memory
    finally:
        with suppress(Exception):
            memory.close()
        with suppress(Exception):
            memory.vector_store.client.close()


def probe_embedder(memory: Any, config: Config) -> None:
    """Embed one probe text before any action that needs the embedder.

    Raises:
        ConfigError: (exit 10, naming the embedder) it fails or returns the wrong size.
    """
    provider = (config.mem0.get("embedder") or {}).get("provider", "openai")
    try:
        vector = memory.embedding_model.embed(PROBE_TEXT, "add")
    except Exception as error:  # noqa: BLE001 - network, auth, model errors alike
        raise ConfigError(config.source, [f"mem0.embedder ({provider}): probe embedding failed: {error}"]) from error
    expected = config.expected_dims[0][1] if config.expected_dims else None
    if expected is not None and len(vector) != expected:
        raise ConfigError(
            config.source,
            [f"mem0.embedder ({provider}): probe embedding has {len(vector)} dimensions, "
             f"the collection expects {expected}"],
        )


def touch_entity_store(memory: Any) -> None:
    """Initialise mem0's entity store, so deletes through this Memory clean entity links too.

    mem0ai 2.2.1 skips that cleanup in a process that never touched its entity store.
    """
    with suppress(Exception):
        _ = memory.entity_store
