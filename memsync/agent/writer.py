"""The one-shot writer: memsync's operations in a short-lived process of the app's interpreter.

memsync never writes a deployment through a mem0ai or qdrant-client other than the app's: a
library of another version that opens the store may rewrite its files in a format the app
cannot read (qdrant-client 1.20 rewrites ``meta.json``; mem0ai 2.2 adds collections). When no
agent serves the running app, memsync starts this module with the app's own interpreter
(``memsync.stores.mem0.open_memory``), from a copy of this standard-library-only package:
nothing else of memsync's environment is on its path. It speaks the agent's protocol on its
standard input and output (``stdout`` is kept for the protocol; anything mem0 prints goes to
stderr):

1. memsync sends one start document: ``{"mem0": {...}, "plugins": [...], "mem0_dir": ...,
   "mode": "memory" | "embedder" | "plugins" | "meta-inspect" | "meta-repair", "path": ...,
   "python_path": [...]}`` (secrets
   resolved; never on the command line). ``plugins`` only imports the config's plugins and,
   given a ``path``, says what ``meta`` says of its ``meta.json`` (doctor). The ``meta`` modes open no ``Memory``: they answer
   with what the app's qdrant-client says of the store's ``meta.json`` (``meta``) and exit;
2. the writer imports the plugins, builds ``Memory.from_config`` (or, for ``embedder``, only
   the embedder) and answers ``hello`` (or an error: ``config``, ``locked``, ``unopenable``,
   ``refused``);
3. then one reply per request line, the same operations the agent runs (``ops.Operations``),
   until its standard input closes; it closes the ``Memory`` and exits 0.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import warnings
from importlib import metadata
from typing import Any, BinaryIO

from . import meta
from .gate import WriteGate
from .ops import Operations
from .protocol import (
    MAX_REQUEST_BYTES,
    AgentRequestError,
    failure_details,
    parse_request,
    reply_bytes,
)
from .support import refusal

logger = logging.getLogger("memsync.agent")


class StartError(Exception):
    """The writer cannot start; ``kind`` is the error type of its reply."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


class _EmbedderOnly:
    """What ``Operations.op_embed`` needs, without opening any store (a migration's probe)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        from mem0.configs.base import MemoryConfig
        from mem0.utils.factory import EmbedderFactory

        self.config = MemoryConfig(**settings)
        self.embedding_model = EmbedderFactory.create(
            self.config.embedder.provider,
            self.config.embedder.config,
            self.config.vector_store.config,
        )


def _problems(error: Exception) -> str:
    """What mem0 said about its config, key by key, never a value (pydantic's ``input``)."""
    if hasattr(error, "errors"):
        try:
            items = error.errors()
        except Exception:  # noqa: BLE001 - not pydantic after all
            items = []
        text = "; ".join(
            f"mem0.{'.'.join(str(p) for p in item.get('loc', ())) or 'config'}: {item.get('msg')}"
            for item in items
            if isinstance(item, dict)
        )
        if text:
            return text
    return f"{type(error).__name__}: {error}"


def _from_qdrant_client(error: BaseException) -> bool:
    traceback = error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_globals.get("__name__", "").startswith("qdrant_client.local."):
            return True
        traceback = traceback.tb_next
    return False


def build(start: dict[str, Any]) -> Any:
    """The ``Memory`` (or embedder) the start document asks for. Raises StartError."""
    settings = start.get("mem0")
    if not isinstance(settings, dict):
        raise StartError("bad-request", "the start document has no mem0 object")
    os.environ["MEM0_DIR"] = str(start.get("mem0_dir") or os.environ.get("MEM0_DIR") or "")
    os.environ["MEM0_TELEMETRY"] = "False"  # a maintenance write sends nothing anywhere
    warnings.filterwarnings("ignore", message="Payload indexes have no effect")
    why = refusal(_version("mem0ai"), settings)
    if why is not None:
        raise StartError("refused", why)
    # [app] python_path: where the app's own modules live when not installed in its environment
    for entry in reversed([str(p) for p in start.get("python_path") or []]):
        if entry not in sys.path:
            sys.path.insert(1, entry)
    for plugin in start.get("plugins") or []:
        try:
            importlib.import_module(str(plugin))
        except Exception as error:  # noqa: BLE001 - any plugin failure is a config problem
            raise StartError(
                "config", f"plugins: cannot import {plugin!r}: {type(error).__name__}: {error}"
            ) from None
    if start.get("mode") == "plugins":  # doctor: the plugins import here; nothing is built
        return None
    mem0_logger = logging.getLogger("mem0")
    mem0_logger.setLevel(logging.CRITICAL)  # mem0 logs validation errors with the input (secrets)
    try:
        if start.get("mode") == "embedder":
            return _EmbedderOnly(settings)
        from mem0 import Memory

        return Memory.from_config(settings)
    except Exception as error:  # noqa: BLE001 - mem0 raises many kinds; each is named
        if isinstance(error, RuntimeError) and "already accessed" in str(error):
            raise StartError("locked", str(error)) from None
        if isinstance(error, ValueError) and "inhomogeneous" in str(error):
            raise StartError("inhomogeneous", str(error)) from None
        if _from_qdrant_client(error):
            raise StartError("unopenable", f"{type(error).__name__}: {error}") from None
        raise StartError("config", _problems(error)) from None
    finally:
        mem0_logger.setLevel(logging.WARNING)


def close(memory: Any) -> None:
    """Close the Memory and its vector store client (mem0ai 0.1.x has no ``Memory.close``)."""
    try:
        memory.close()
    except Exception:  # noqa: BLE001, S110 - absent on this version, or closed already
        pass
    try:
        memory.vector_store.client.close()
    except Exception:  # noqa: BLE001, S110 - absent (the embedder alone), or closed already
        pass


def serve(memory: Any, requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer request lines from ``requests`` until it ends (the operations of ``ops``)."""
    handlers = Operations(memory, WriteGate(), lease_max_s=0.0).handlers()
    while True:
        line = requests.readline(MAX_REQUEST_BYTES + 1)
        if not line:
            return
        request_id = None
        try:
            request_id, op, call = parse_request(line, handlers)
            if op in ("pause", "resume", "history_release", "history_reopen"):
                raise AgentRequestError("bad-request", f"{op} is for an agent in a running app")
            reply = reply_bytes(request_id, result=call())
        except AgentRequestError as error:
            request_id = request_id if error.request_id is None else error.request_id
            reply = reply_bytes(request_id, error=(error.kind, str(error)))
        except Exception as error:  # noqa: BLE001 - the op failed inside mem0: report it
            message = f"{type(error).__name__}: {error}"
            reply = reply_bytes(
                request_id, error=("failed", message), details=failure_details(error)
            )
        replies.write(reply)
        replies.flush()


def _meta(start: dict[str, Any], replies: BinaryIO) -> int:
    """Answer a ``meta`` start: the store's ``meta.json`` as the app's qdrant-client sees it."""
    try:
        path = str(start.get("path") or "")
        found = meta.repair(path) if start["mode"] == "meta-repair" else meta.inspect(path)
    except (OSError, ValueError, ImportError) as error:
        replies.write(reply_bytes(0, error=("failed", f"{type(error).__name__}: {error}")))
        replies.flush()
        return 2
    replies.write(reply_bytes(0, result=found))
    replies.flush()
    return 0


def _die_with_parent() -> None:
    """Be killed when memsync dies (Linux ``PR_SET_PDEATHSIG``), never left writing alone.

    An orphaned writer would go on holding the store; memsync's journal finishes the work.
    """
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the writer ends at its next request
        return
    parent = os.environ.get("MEMSYNC_WRITER_PARENT")
    if parent and parent.isdigit() and os.getppid() != int(parent):  # memsync already died
        os._exit(3)


def main() -> int:
    """Run the writer on this process's standard input and output; returns the exit status."""
    _die_with_parent()
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # print() from mem0 or a plugin goes to stderr, never into the protocol
    requests = sys.stdin.buffer
    try:
        start = json.loads(requests.readline(MAX_REQUEST_BYTES + 1) or b"null")
        if not isinstance(start, dict):
            raise StartError("bad-request", "the first line must be the start document")
        if start.get("mode") in ("meta-inspect", "meta-repair"):
            return _meta(start, replies)
        memory = build(start)
        if start.get("mode") == "plugins":  # doctor: the plugins import; the store's meta.json
            path = start.get("path")
            found: dict[str, Any] = {"plugins": list(start.get("plugins") or [])}
            found["meta"] = meta.inspect(str(path)) if path else None
            found["decode"] = meta.undecodable(str(path)) if path else None
            replies.write(reply_bytes(0, result=found))
            replies.flush()
            return 0
    except StartError as error:
        replies.write(reply_bytes(0, error=(error.kind, str(error))))
        replies.flush()
        return 2
    except (OSError, ImportError) as error:  # meta.json unreadable, no qdrant-client
        replies.write(reply_bytes(0, error=("failed", f"{type(error).__name__}: {error}")))
        replies.flush()
        return 2
    except ValueError as error:
        replies.write(reply_bytes(0, error=("bad-request", f"start document: {error}")))
        replies.flush()
        return 2
    try:
        hello = Operations(memory, WriteGate(), lease_max_s=0.0).op_hello()
        replies.write(reply_bytes(0, result=hello))
        replies.flush()
        serve(memory, requests, replies)
    finally:
        close(memory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
