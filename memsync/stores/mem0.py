"""The deployment's mem0: the only module that imports mem0, builds ``mem0.Memory`` and calls it.

Only commands that write (reconcile, forget, prune, confirm) come here; check, doctor and
snapshots never do. ``open_memory`` yields a ``Mem0Writer``: the few typed writes memsync makes
(delete, update, put a point back, entity links, the history rows it records), so operations
never reach into mem0's internals. ``MEM0_DIR`` is set before the import, because importing mem0
writes ``$MEM0_DIR/config.json`` (mem0ai 2.2.1); ``plugins`` are imported first so custom
providers register themselves; secrets are resolved only here.
"""

from __future__ import annotations

import importlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from memsync.config import Config, resolve_secrets
from memsync.errors import ConfigError, LockedError, UnavailableError
from memsync.model import HistoryEvent, payload_hash
from memsync.stores import history
from memsync.stores.sqlite_files import roll_back_hot_journal
from memsync.stores.vector_store import vector_store_for
from memsync.stores.writer import Route

PROBE_TEXT = "memsync embedder probe"


def prepare_for_writing(config: Config) -> None:
    """Roll back hot journals a crashed writer (the app or memsync) left, before capturing.

    history.db first, then the vector store's (``VectorStore.prepare_for_writing``). Only
    commands that write call this: read-only copies cannot roll a journal back. Idempotent.

    Raises:
        TryLaterError: a file is busy; UnavailableError: a file is unreadable.
    """
    if config.history_db_path.is_file():
        roll_back_hot_journal(config.history_db_path)
    vector_store_for(config).prepare_for_writing()


def require_store_free(config: Config, what: str) -> None:
    """Raise LockedError (exit 12) when another process holds the vector store.

    Reads /proc/locks and open files; never takes the lock itself (``VectorStore.require_free``).
    """
    vector_store_for(config).require_free(what)


@contextmanager
def open_memory(config: Config, route: Route = "direct") -> Iterator[Mem0Writer]:
    """Build ``mem0.Memory`` from the deployment's config; yield its writer; close it (and its lock) on exit.

    A pgvector store is reached once first (``VectorStore.read_collections``, a 10 s connect
    timeout): mem0ai 2.2.1 opens its pool without waiting and connects at its first use, so
    an unreachable server would otherwise fail each read and write after the pool's 30 s.

    Raises:
        UnavailableError: qdrant-client cannot open the embedded store (a point row does not
            load), or PostgreSQL cannot be reached (the message names the store, never a
            password, and the likely cause).
        ConfigError: a plugin cannot be imported, a secret is missing, mem0 rejects the config,
            or the embedder fails its probe (the message names the embedder).
        LockedError: the embedded store is held by another process.
    """
    require_store_free(config, "writing through mem0")
    store = vector_store_for(config)
    if store.location is None:  # a server: reachable before mem0's pool waits on it
        store.read_collections()
    _import_plugins(config)
    memory = _build_memory(config)
    try:
        yield Mem0Writer(memory, config, route)
    finally:
        with suppress(Exception):
            memory.close()
        with suppress(Exception):
            memory.vector_store.client.close()


def open_embedder(config: Config) -> Callable[[str], list[float]]:
    """The config's embedder alone, as ``embed(text) -> vector``, opening no store.

    Built as ``mem0.Memory`` builds it (``EmbedderFactory`` with the parsed config), so a
    migration can ask its size before mem0 creates the target. Calling it embeds (mem0's
    ``embed(text, "add")``); its exceptions propagate unchanged.

    Raises:
        ConfigError: a plugin cannot be imported, a secret is missing, or mem0 rejects the
            config or cannot build the embedder (the message names the type, never a value).
    """
    _import_plugins(config)
    settings = resolve_secrets(config.mem0, os.environ)
    from mem0.configs.base import MemoryConfig
    from mem0.utils.factory import EmbedderFactory

    try:
        parsed = MemoryConfig(**settings)
        model = EmbedderFactory.create(
            parsed.embedder.provider, parsed.embedder.config, parsed.vector_store.config
        )
    except Exception as error:  # noqa: BLE001 - pydantic and providers raise many kinds
        raise ConfigError(config.source, _embedder_problems(error)) from None
    return lambda text: [float(x) for x in model.embed(text, "add")]


def _embedder_problems(error: Exception) -> list[str]:
    """What mem0 said about its config, key by key, never a value (pydantic's ``input`` is left out).

    mem0ai 2.2.1 rejects a provider of its own registry given a ``config`` key with "Unsupported
    embedding provider" (memsync's offline providers take none).
    """
    if hasattr(error, "errors"):
        return [
            f"mem0.{'.'.join(str(part) for part in item.get('loc', ())) or 'embedder'}: "
            f"{item.get('msg')}"
            for item in error.errors()
        ] or ["mem0.embedder: mem0 rejected the configuration"]
    return [f"mem0.embedder: cannot be built ({type(error).__name__})"]


class _OptionalExtras(logging.Filter):
    """Drops mem0's warnings that an optional package is missing.

    mem0ai 2.2.1 warns when fastembed (BM25 keyword search) or a spaCy model (lemmas) is
    absent: it concerns the app's own search, not memsync's writes.
    """

    PREFIXES = ("fastembed not installed", "Failed to load spaCy")

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        return not str(record.msg).startswith(self.PREFIXES)


_EXTRAS = _OptionalExtras()


def _import_plugins(config: Config) -> None:
    """Set mem0's environment and import the config's plugins (they register providers)."""
    # qdrant-client 1.20 warns on stderr whenever mem0 asks an embedded store for payload
    # indexes (opening the memory collection, and lazily the entity store): not memsync's news.
    warnings.filterwarnings("ignore", message="Payload indexes have no effect")
    for name in ("mem0.vector_stores.qdrant", "mem0.utils.spacy_models"):
        if _EXTRAS not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(_EXTRAS)
    os.environ["MEM0_DIR"] = str(config.mem0_dir)
    # A maintenance tool sends nothing anywhere, and must not open mem0's second embedded
    # Qdrant (migrations_qdrant) that telemetry keeps (mem0ai 2.2.1).
    os.environ["MEM0_TELEMETRY"] = "False"
    for plugin in config.plugins:
        try:
            importlib.import_module(plugin)
        except Exception as error:  # noqa: BLE001 - any plugin failure is a config problem
            raise ConfigError(
                config.source, [f"plugins: cannot import {plugin!r}: {error}"]
            ) from error


def _build_memory(config: Config) -> Any:
    """``Memory.from_config`` with secrets resolved; mem0's exceptions translated (see ``open_memory``)."""
    where = vector_store_for(config).where
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
                f"the embedded Qdrant store {where} was taken by another process just now",
                "another memsync command or the app started; try again when it is done",
            ) from error
        _raise_if_store_unopenable(where, error)
        raise ConfigError(config.source, [f"mem0: Memory.from_config failed: {error}"]) from error
    except ValueError as error:
        if hasattr(error, "errors"):  # pydantic: name the keys, never the values (secrets)
            where = "; ".join(
                f"mem0.{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                for e in error.errors()
            )
            raise ConfigError(config.source, [where or "mem0 rejected the configuration"]) from None
        if "inhomogeneous" in str(error):
            raise UnavailableError(
                f"the collection in {where} holds vectors of different sizes: qdrant-client "
                "cannot open it, so nothing can be written through mem0",
                "memsync check names the points (dimension-mismatch); restore a snapshot",
            ) from error
        _raise_if_store_unopenable(where, error)
        raise ConfigError(config.source, [f"mem0: Memory.from_config failed: {error}"]) from error
    except Exception as error:  # noqa: BLE001 - mem0 raises many kinds on a bad config
        _raise_if_store_unopenable(where, error)
        raise ConfigError(
            config.source, [f"mem0: Memory.from_config failed ({type(error).__name__})"]
        ) from None
    finally:
        mem0_logger.setLevel(level)
    return memory


def _raise_if_store_unopenable(where: str, error: Exception) -> None:
    """Raise UnavailableError (exit 11) when ``error`` came from the vector store's client.

    qdrant-client 1.20 unpickles every point row when it opens an embedded store
    (``qdrant_client/local/persistence.py: load``, no handler): a row it cannot load (a class it
    does not have, a model pickled by another pydantic) raises out of ``Memory.from_config``.
    That is the store's state, not memsync's configuration (exit 10 stays for that). mem0ai
    2.2.1's pgvector store touches the server only at its first use, never here.
    """
    traceback = error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_globals.get("__name__", "").startswith("qdrant_client.local."):
            raise UnavailableError(
                f"qdrant-client could not open the embedded Qdrant store {where} "
                f"({type(error).__name__} loading its points): a stored point does not load, "
                "most likely written by another qdrant-client or pydantic version than this one",
                "memsync check and doctor read the store without qdrant-client and name the "
                "rows; run memsync with the app's qdrant-client and pydantic versions, or "
                "restore a snapshot",
            ) from error
        traceback = traceback.tb_next


class Mem0Writer:
    """The writes memsync makes through one open ``mem0.Memory`` (mem0ai 2.2.1), typed.

    Built by ``open_memory`` only; valid inside its ``with`` block (the store is held).
    Deletes and text updates go through mem0's own API (history rows, entity cleanup);
    ``put_back`` and the entity-link repairs are documented direct writes through mem0's
    vector store objects; ``record_events``/``delete_messages`` write history.db directly.
    mem0 and qdrant-client exceptions propagate unchanged (reconcile records them per action).
    """

    def __init__(self, memory: Any, config: Config, route: Route = "direct") -> None:
        self._memory = memory
        self._config = config
        self.route: Route = route

    def payload(self, memory_id: str) -> dict[str, Any] | None:
        """The live point's payload, or None when it has no point. Reads only."""
        current = self._memory.vector_store.get(vector_id=memory_id)
        return None if current is None else dict(current.payload or {})

    def exists(self, memory_id: str) -> bool:
        """Whether the memory has a point in the live collection. Reads only."""
        return self._memory.vector_store.get(vector_id=memory_id) is not None

    def delete(self, memory_id: str) -> bool:
        """Delete a memory through ``Memory.delete`` (point, DELETE history row, entity links).

        Every stored row of the point goes: qdrant-client 1.20 (``local/persistence.py: load``)
        removes the outdated rows of each point (other UUID spellings, another key pickle
        protocol) when ``open_memory`` opens the store, and its ``delete`` removes the current
        row under whatever key it has. memsync writes no row itself, so nothing races the open
        client in this process. Returns False (nothing done) when it has no point. Idempotent.
        """
        if not self.exists(memory_id):
            return False
        self._memory.delete(memory_id)
        return True

    def update_text(self, memory_id: str, text: str) -> bool:
        """Rewrite a memory's text through ``Memory.update`` (re-embeds; UPDATE row; new hash).

        Returns False when the point already holds ``text`` with its md5 ``hash`` (settled,
        nothing written). Idempotent.

        Raises:
            LookupError: the memory has no point.
        """
        payload = self.payload(memory_id)
        if payload is None:
            raise LookupError(f"memory {memory_id} has no point")
        if payload.get("data") == text and payload.get("hash") == payload_hash(text):
            return False
        self._memory.update(memory_id, text)
        return True

    def update_metadata(self, memory_id: str, metadata: Mapping[str, Any]) -> bool:
        """Merge ``metadata`` into a memory's payload through ``Memory.update`` (no re-embedding).

        mem0ai 2.2.1 records it as an UPDATE whose old and new text are equal. Returns False
        (nothing written) when the memory has no point.
        """
        if not self.exists(memory_id):
            return False
        self._memory.update(memory_id, metadata=dict(metadata))
        return True

    def put_back(self, point_id: str, vector: Sequence[float], payload: Mapping[str, Any]) -> bool:
        """Insert a lost point again with its original id, dense vector and payload.

        A documented direct write (``vector_store.insert``: no history row, no re-embedding).
        Returns False (nothing written) when the point is already there. Idempotent.
        """
        if self.exists(point_id):
            return False
        self._memory.vector_store.insert(
            vectors=[list(vector)], ids=[point_id], payloads=[dict(payload)]
        )
        return True

    def relink_entity(self, entity_id: str, remaining: Sequence[str]) -> bool:
        """Set an entity's ``linked_memory_ids`` to ``remaining``; delete the entity when empty.

        A documented direct write to mem0's entity collection. Returns False when the entity
        is gone already. Idempotent. The whole payload is written back: mem0's pgvector
        ``update`` replaces it (Qdrant's merges), so sending the links alone would wipe the
        entity's text, type and scope.
        """
        store = self._memory.entity_store
        current = store.get(vector_id=entity_id)
        if current is None:
            return False
        if remaining:
            payload = {**(current.payload or {}), "linked_memory_ids": list(remaining)}
            store.update(vector_id=entity_id, vector=None, payload=payload)
        else:
            store.delete(vector_id=entity_id)
        return True

    def touch_entity_store(self) -> None:
        """Initialise mem0's entity store, so deletes through this Memory clean entity links too.

        mem0ai 2.2.1 skips that cleanup in a process that never touched its entity store.
        """
        with suppress(Exception):
            _ = self._memory.entity_store

    def embed(self, text: str) -> list[float]:
        """Embed ``text`` with the config's embedder (mem0's ``embed(text, "add")``).

        The embedder's own exceptions propagate unchanged (a migration retries the transient
        ones). Reads only.
        """
        return [float(x) for x in self._memory.embedding_model.embed(text, "add")]

    def insert_points(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        payloads: Sequence[Mapping[str, Any]],
        *,
        entities: bool = False,
    ) -> None:
        """Write points with these ids, vectors and payloads, in one call (a migration's batch).

        A documented direct write through mem0's vector store object (``vector_store.insert``,
        or ``entity_store.insert`` with ``entities``): no history row, no embedding. Embedded
        Qdrant upserts; mem0ai 2.2.1's pgvector inserts in one transaction and fails on an id
        already there, so callers skip the ids the target holds.
        """
        store = self._memory.entity_store if entities else self._memory.vector_store
        store.insert(
            vectors=[list(v) for v in vectors], ids=list(ids), payloads=[dict(p) for p in payloads]
        )

    def delete_points(self, ids: Sequence[str], *, entities: bool = False) -> None:
        """Delete points by id, one call each (a migration's target catching up with its source).

        A documented direct write through mem0's vector store object (``vector_store.delete``,
        or ``entity_store.delete``): no history row. Only for a store memsync created (a
        migration's target): the live store's deletes go through ``delete``.
        """
        store = self._memory.entity_store if entities else self._memory.vector_store
        for point_id in ids:
            store.delete(vector_id=point_id)

    def top_hit(self, text: str, filters: Mapping[str, Any]) -> tuple[str, str] | None:
        """``(memory_id, text)`` of ``Memory.search``'s first result, or None when it finds none.

        mem0ai 2.2.1's ``search`` needs ``filters`` (user_id, agent_id or run_id); expired
        memories are included. Reads only (one embedding of ``text``).
        """
        found = self._memory.search(text, top_k=1, filters=dict(filters), show_expired=True)
        results = found.get("results") if isinstance(found, dict) else found
        if not results:
            return None
        return str(results[0]["id"]), str(results[0].get("memory") or "")

    def probe_embedder(self) -> None:
        """Embed one probe text before any action that needs the embedder.

        Raises:
            ConfigError: (exit 10, naming the embedder) it fails or returns the wrong size.
        """
        config = self._config
        provider = (config.mem0.get("embedder") or {}).get("provider", "openai")
        try:
            vector = self._memory.embedding_model.embed(PROBE_TEXT, "add")
        except Exception as error:  # noqa: BLE001 - network, auth, model errors alike
            raise ConfigError(
                config.source, [f"mem0.embedder ({provider}): probe embedding failed: {error}"]
            ) from error
        expected = config.expected_dims[0][1] if config.expected_dims else None
        if expected is not None and len(vector) != expected:
            raise ConfigError(
                config.source,
                [
                    f"mem0.embedder ({provider}): probe embedding has {len(vector)} dimensions, "
                    f"the collection expects {expected}"
                ],
            )

    def record_events(self, events: Sequence[HistoryEvent]) -> int:
        """Insert history rows memsync records (``memsync-<uuid4>`` ids); returns rows inserted.

        A direct write to history.db (``history.insert_repair_events``): ``INSERT OR IGNORE``,
        so a repeated row is a no-op.

        Raises:
            TryLaterError: history.db stays locked for 5 s; UnavailableError: it cannot be written.
        """
        return history.insert_repair_events(self._config.history_db_path, list(events))

    def delete_messages(self, scope: str) -> int:
        """Delete the raw ``messages`` rows of one session scope; returns rows deleted.

        Raises:
            TryLaterError, UnavailableError: as ``record_events``.
        """
        return history.delete_message_scope(self._config.history_db_path, scope)
