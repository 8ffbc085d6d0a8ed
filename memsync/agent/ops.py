"""The agent's operations, each run with the app's own ``Memory`` (mem0ai 2.2.1).

Every operation but ``hello``, ``pause``, ``resume`` and ``history_reopen`` runs alone (``WriteGate.exclusive``);
arguments are checked before anything is touched; each is idempotent.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from memsync.agent.gate import WriteGate
from memsync.agent.history import HistoryConnection
from memsync.agent.protocol import PROTOCOL, AgentRequestError

logger = logging.getLogger("memsync.agent")


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _text_hash(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # noqa: S324 - mem0's own payload hash


def _id(name: str, value: Any) -> str:
    """``value`` when it is a non-empty string of at most 256 characters, else bad-request."""
    if not isinstance(value, str) or not 0 < len(value) <= 256:
        raise AgentRequestError("bad-request", f"{name} must be a non-empty string")
    return value


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class Operations:
    """The fixed set of operations the agent runs on ``memory`` (see agent-protocol.md)."""

    def __init__(self, memory: Any, gate: WriteGate, lease_max_s: float) -> None:
        self.memory = memory
        self.gate = gate
        self.lease_max_s = lease_max_s
        self._entities_touched = False
        self.history = HistoryConnection(memory)

    def handlers(self) -> dict[str, Callable[..., Any]]:
        """The operations by their wire name."""
        return {
            "hello": self.op_hello,
            "get": self.op_get,
            "delete": self.op_delete,
            "update": self.op_update,
            "put_back": self.op_put_back,
            "relink_entity": self.op_relink_entity,
            "pause": self.op_pause,
            "resume": self.op_resume,
            "history_release": self.op_history_release,
            "history_reopen": self.op_history_reopen,
        }

    def op_hello(self) -> dict[str, Any]:
        """Who serves: protocol, pid, uid, versions, the store paths and collection it holds."""
        config = getattr(self.memory, "config", None)
        store = getattr(getattr(config, "vector_store", None), "config", None)
        path = getattr(store, "path", None)
        history = getattr(config, "history_db_path", None)
        return {
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
            "mem0": _version("mem0ai"),
            "qdrant_client": _version("qdrant-client"),
            "memsync": _version("memsync"),
            "vector_store": {
                "provider": getattr(getattr(config, "vector_store", None), "provider", None),
                "path": str(Path(path).resolve()) if path else None,
                "collection": getattr(store, "collection_name", None),
            },
            "history_db_path": str(Path(history).resolve()) if history else None,
            "paused": self.gate.paused(),
        }

    def _live_payload(self, memory_id: str) -> dict[str, Any] | None:
        current = self.memory.vector_store.get(vector_id=memory_id)
        return None if current is None else dict(current.payload or {})

    def op_get(self, memory_id: str) -> dict[str, Any] | None:
        """The live point's payload from the app's own store, or None."""
        memory_id = _id("memory_id", memory_id)
        with self.gate.exclusive():
            return self._live_payload(memory_id)

    def op_delete(self, memory_id: str) -> dict[str, bool]:
        """``Memory.delete`` (point, DELETE row, entity links); ``deleted`` False when no point."""
        memory_id = _id("memory_id", memory_id)
        with self.gate.exclusive():
            if not self._entities_touched:
                with contextlib.suppress(Exception):  # mem0ai 2.2.1 cleans links only once touched
                    _ = self.memory.entity_store
                self._entities_touched = True
            if self._live_payload(str(memory_id)) is None:
                return {"deleted": False}
            self.memory.delete(str(memory_id))
            return {"deleted": True}

    def op_update(
        self, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None
    ) -> dict[str, bool]:
        """``Memory.update`` of the text (re-embeds) or metadata; False when settled already.

        Raises AgentRequestError ("failed") when the memory has no point and text was given.
        """
        memory_id = _id("memory_id", memory_id)
        if (text is None) == (metadata is None):
            raise AgentRequestError("bad-request", "update takes exactly one of text, metadata")
        if text is not None and not isinstance(text, str):
            raise AgentRequestError("bad-request", "text must be a string")
        if metadata is not None and not isinstance(metadata, dict):
            raise AgentRequestError("bad-request", "metadata must be an object")
        with self.gate.exclusive():
            payload = self._live_payload(str(memory_id))
            if payload is None:
                if text is not None:
                    raise AgentRequestError("failed", f"memory {memory_id} has no point")
                return {"updated": False}
            if text is not None:
                if payload.get("data") == text and payload.get("hash") == _text_hash(text):
                    return {"updated": False}
                self.memory.update(str(memory_id), str(text))
            else:
                if not isinstance(metadata, dict):
                    raise AgentRequestError("bad-request", "metadata must be an object")
                self.memory.update(str(memory_id), metadata=dict(metadata))
            return {"updated": True}

    def op_put_back(
        self, point_id: str, vector: list[float], payload: dict[str, Any]
    ) -> dict[str, bool]:
        """Insert a lost point with its id, vector and payload (``vector_store.insert``)."""
        point_id = _id("point_id", point_id)
        if not isinstance(vector, list) or not vector or not all(_finite(x) for x in vector):
            raise AgentRequestError("bad-request", "vector must be a list of finite numbers")
        if not isinstance(payload, dict):
            raise AgentRequestError("bad-request", "payload must be an object")
        with self.gate.exclusive():
            if self._live_payload(str(point_id)) is not None:
                return {"inserted": False}
            self.memory.vector_store.insert(
                vectors=[[float(x) for x in vector]], ids=[str(point_id)], payloads=[payload]
            )
            return {"inserted": True}

    def op_relink_entity(self, entity_id: str, remaining: list[str]) -> dict[str, bool]:
        """Set an entity's ``linked_memory_ids``; delete it when ``remaining`` is empty."""
        entity_id = _id("entity_id", entity_id)
        if not isinstance(remaining, list) or not all(isinstance(m, str) for m in remaining):
            raise AgentRequestError("bad-request", "remaining must be a list of memory ids")
        with self.gate.exclusive():
            store = self.memory.entity_store
            current = store.get(vector_id=str(entity_id))
            if current is None:
                return {"changed": False}
            if remaining:  # the whole payload: pgvector's update replaces it, Qdrant's merges
                payload = dict(getattr(current, "payload", None) or {})
                payload["linked_memory_ids"] = [str(m) for m in remaining]
                store.update(vector_id=str(entity_id), vector=None, payload=payload)
            else:
                store.delete(vector_id=str(entity_id))
            return {"changed": True}

    def op_pause(self, lease_s: float) -> dict[str, float]:
        """Hold back app writes (in-flight ones finish first) for at most ``lease_max_s``."""
        if not _finite(lease_s) or lease_s <= 0:
            raise AgentRequestError("bad-request", "lease_s must be a positive finite number")
        lease = min(float(lease_s), self.lease_max_s)
        waited = self.gate.pause(lease)
        logger.info("memsync agent: app writes paused (lease %.1f s)", lease)
        return {"lease_s": lease, "waited_s": round(waited, 6)}

    def op_resume(self) -> dict[str, Any]:
        """Let app writes go on: ``held_s`` (None when they were not paused), ``lease_ran_out``.

        ``lease_ran_out`` true means app writes went on before this resume: whatever memsync
        did under the pause was not fully quiesced.
        """
        held = self.gate.resume()
        ran_out = held is None or self.gate.lease_ran_out
        if held is not None:
            logger.info("memsync agent: app writes resumed after %.3f s", held)
        return {"held_s": None if held is None else round(held, 6), "lease_ran_out": ran_out}

    def op_history_release(self) -> dict[str, Any]:
        """Close mem0's history connection under a pause; history calls wait until reopen.

        Runs alone (in-flight app calls end first). Raises AgentRequestError ("bad-request")
        unless app writes are paused: a released history is only ever part of a pause.
        """
        if not self.gate.paused():
            raise AgentRequestError("bad-request", "history_release needs a pause first")
        with self.gate.exclusive():
            return self.history.release()

    def op_history_reopen(self, journal_mode: str | None = None) -> dict[str, Any]:
        """Open history.db at its path again (the file there now), journal mode put back.

        Not run alone: app calls waiting on mem0's history lock hold the gate until it opens.
        """
        return self.history.reopen(journal_mode)
