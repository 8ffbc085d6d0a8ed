"""The operations memsync writes with, each run with the app's own ``Memory``.

One implementation, two hosts: the agent inside the running app (``server``) and the one-shot
writer, a short-lived process of the app's own interpreter (``writer``). Either way mem0ai and
qdrant-client are the app's, of whatever version it runs (0.1.118 to 2.2.x): where an older
``Memory`` lacks a call, the operation uses what that version has (``_update``, ``_search``).
Every operation but ``hello``, ``pause``, ``resume`` and ``history_reopen`` runs alone
(``WriteGate.exclusive``); arguments are checked before anything is touched; each is
idempotent. The package imports only the standard library and runs on Python 3.9 and newer.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import logging
import math
import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from .gate import WriteGate
from .history import HistoryConnection
from .protocol import PROTOCOL, AgentRequestError

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
    number = isinstance(value, (int, float)) and not isinstance(value, bool)  # noqa: UP038 - 3.9
    return number and math.isfinite(value)


# The payload keys mem0's ``_update_memory`` writes itself; every other key is the memory's own
# metadata, which mem0ai before 2.0.7 drops on a text update.
MEM0_OWN_KEYS = frozenset(
    {"data", "hash", "text_lemmatized", "created_at", "updated_at", "user_id", "agent_id",
     "run_id", "actor_id", "role"}
)  # fmt: skip


def _parameters(method: Any) -> Any:
    try:
        return inspect.signature(method).parameters
    except (TypeError, ValueError):
        return {}


def _vectors(name: str, value: Any) -> list[list[float]]:
    if not isinstance(value, list) or not value:
        raise AgentRequestError("bad-request", f"{name} must be a non-empty list of vectors")
    for vector in value:
        if not isinstance(vector, list) or not vector or not all(_finite(x) for x in vector):
            raise AgentRequestError("bad-request", f"{name}: each must be a list of finite numbers")
    return [[float(x) for x in vector] for vector in value]


def _lemmatized(text: str) -> str | None:
    """mem0's own BM25 lemmatization of ``text`` (mem0ai 2.x), or None where it has none."""
    try:  # the app's mem0, imported where it runs (this package imports no mem0 itself)
        lemmatize = importlib.import_module("mem0.utils.lemmatization").lemmatize_for_bm25
    except (ImportError, AttributeError):
        return None
    return str(lemmatize(text))


# A pgvector table name memsync loads with COPY: one every mem0ai names the same way (0.1.118 to
# 2.0 unquoted, folded to lower case; 2.1 and newer quoted).
PLAIN_TABLE = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")


def _pg_table(store: Any) -> str | None:
    """The table of mem0's ``PGVector`` store when memsync can load it with COPY, else None."""
    table = getattr(store, "collection_name", None)
    usable = all(hasattr(store, name) for name in ("_get_cursor", "create_col", "connection_pool"))
    return table if usable and isinstance(table, str) and PLAIN_TABLE.match(table) else None


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _secondary_indexes(cursor: Any, table: str) -> list[str]:
    """The table's indexes that back no constraint (mem0's HNSW, DiskANN and GIN ones)."""
    cursor.execute(
        "SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
        "WHERE x.indrelid = %s::regclass AND NOT x.indisprimary AND NOT x.indisunique "
        "AND NOT x.indisexclusion ORDER BY c.relname",
        (table,),
    )
    return [str(row[0]) for row in cursor.fetchall()]


def _copy_rows(
    store: Any, table: str, ids: list[str], vectors: list[list[float]], payloads: list[Any]
) -> bool:
    """The rows mem0's ``insert`` would write, by one ``COPY`` in one transaction (psycopg 3).

    False (nothing written) where the app's mem0 runs on psycopg2: its own insert then.
    """
    ensure = getattr(store, "_ensure_collection", None)  # mem0ai 2.2 creates the table on use
    if callable(ensure):
        ensure()
    with store._get_cursor(commit=True) as cursor:
        if not hasattr(cursor, "copy"):
            return False
        with cursor.copy(f"COPY {table} (id, vector, payload) FROM STDIN") as copy:
            for index, point_id in enumerate(ids):  # paired by the caller (3.9: no strict zip)
                text = "[" + ",".join(repr(x) for x in vectors[index]) + "]"
                copy.write_row((point_id, text, json.dumps(payloads[index])))
    return True


class _CommitAtEnd:
    """qdrant-client's SQLite connection with ``commit`` held back: one transaction a batch."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def commit(self) -> None:
        """Nothing yet: ``one_transaction`` commits once, after the last row."""

    def __enter__(self) -> _CommitAtEnd:  # qdrant-client 1.20: ``with self.storage:`` a point
        return self

    def __exit__(self, *exc: object) -> None:
        """No commit; an error goes on up to ``one_transaction``'s roll-back."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connection, name)


@contextmanager
def one_transaction(store: Any) -> Iterator[None]:
    """Write through qdrant-client's local mode with every row of the block in one transaction.

    Its ``CollectionPersistence.persist`` pickles each point (the app's own models, its own key
    encoding) and commits it alone (``commit()``, or ``with connection:`` from qdrant-client
    1.20), an fsync per point; here the same rows go to ``storage.sqlite`` and commit once at
    the end (rolled back on an error). Any other store
    (pgvector, a Qdrant server, an in-memory collection) writes as it always does.
    """
    local = getattr(getattr(store, "client", None), "_client", None)
    collections = getattr(local, "collections", None)
    collection = None
    if isinstance(collections, dict):
        collection = collections.get(getattr(store, "collection_name", None))
    persistence: Any = getattr(collection, "storage", None)
    connection = getattr(persistence, "storage", None)
    if not isinstance(connection, sqlite3.Connection):
        yield
        return
    persistence.storage = _CommitAtEnd(connection)
    try:
        yield
        connection.commit()
    except BaseException:
        connection.rollback()
        raise
    finally:
        persistence.storage = connection


SCOPE_KEYS = frozenset({"user_id", "agent_id", "run_id"})
MAX_SEARCH_TEXT = 65536  # characters: one memory's text, never a document
MAX_EMBED_BATCH = 1024  # texts in one embed_batch request (a migration's batch)


class Operations:
    """The fixed set of operations the agent runs on ``memory`` (see agent-protocol.md)."""

    def __init__(self, memory: Any, gate: WriteGate, lease_max_s: float) -> None:
        self.memory = memory
        self.gate = gate
        self.lease_max_s = lease_max_s
        self.history = HistoryConnection(memory)
        self.limits: dict[str, Any] = {"lease_max_s": lease_max_s}  # the host's bounds (hello)
        # Pauses of the last two leases, [start, end] (monotonic s): app writes are held at most
        # lease_max_s in any 2 x lease_max_s, renewals and back-to-back pauses included.
        self._holds: list[list[float]] = []

    def handlers(self) -> dict[str, Callable[..., Any]]:
        """The operations by their wire name."""
        return {
            "hello": self.op_hello,
            "get": self.op_get,
            "delete": self.op_delete,
            "update": self.op_update,
            "put_back": self.op_put_back,
            "put_back_text": self.op_put_back_text,
            "relink_entity": self.op_relink_entity,
            "touch_entities": self.op_touch_entities,
            "embed": self.op_embed,
            "embed_batch": self.op_embed_batch,
            "insert_points": self.op_insert_points,
            "defer_indexes": self.op_defer_indexes,
            "build_indexes": self.op_build_indexes,
            "delete_points": self.op_delete_points,
            "search": self.op_search,
            "pause": self.op_pause,
            "resume": self.op_resume,
            "history_release": self.op_history_release,
            "history_reopen": self.op_history_reopen,
            "checkpoint": self.op_checkpoint,
        }

    def op_hello(self) -> dict[str, Any]:
        """Who serves: protocol, pid, uid, versions, the store paths and collection it holds."""
        config = getattr(self.memory, "config", None)
        store = getattr(getattr(config, "vector_store", None), "config", None)
        path = getattr(store, "path", None)
        history = getattr(config, "history_db_path", None)
        shared = self.gate.shared
        return {
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
            "executable": sys.executable,
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
            "limits": dict(self.limits),
            "gate": {
                "directory": str(shared.directory) if shared is not None else None,
                "covered": self.gate.covered(),
            },
        }

    def _live_payload(self, memory_id: str) -> dict[str, Any] | None:
        current = self.memory.vector_store.get(vector_id=memory_id)
        return None if current is None else dict(current.payload or {})

    def op_get(self, memory_id: str) -> dict[str, Any] | None:
        """The live point's payload from the app's own store, or None."""
        memory_id = _id("memory_id", memory_id)
        with self.gate.app_call(write=False):  # a read: alongside the app's calls, never alone
            return self._live_payload(memory_id)

    def op_delete(self, memory_id: str) -> dict[str, bool]:
        """``Memory.delete`` (point, DELETE row, entity links); ``deleted`` False when no point."""
        memory_id = _id("memory_id", memory_id)
        with self.gate.exclusive():
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
                self._update(str(memory_id), str(text), payload, {})
            else:
                if not isinstance(metadata, dict):
                    raise AgentRequestError("bad-request", "metadata must be an object")
                self._update(str(memory_id), None, payload, dict(metadata))
            return {"updated": True}

    def _update(
        self, memory_id: str, text: str | None, payload: dict[str, Any], metadata: dict[str, Any]
    ) -> None:
        """``Memory.update`` of the text, or of metadata alone (``text`` None), on any version.

        mem0ai 2.0.10 and newer take metadata alone; 1.0 to 2.0.9 need the text with it (the
        same text: mem0 embeds it again); before 2.0.7 a text update keeps only the metadata it
        is given, so the memory's own keys are given back; 0.1.x takes no metadata at all, so
        its payload is put back through the vector store after mem0's update.
        """
        params = _parameters(self.memory.update)
        names = [n for n in params if n not in ("self", "memory_id")]
        own = {k: v for k, v in payload.items() if k not in MEM0_OWN_KEYS}
        wanted = {**own, **metadata}
        if (
            text is None
            and "metadata" in params
            and names
            and params[names[0]].default is not (inspect.Parameter.empty)
        ):
            self.memory.update(memory_id, metadata=metadata)
            return
        new_text = payload.get("data") if text is None else text
        if not isinstance(new_text, str):
            raise AgentRequestError("failed", f"memory {memory_id} has no text to update")
        if "metadata" in params:
            if wanted:
                self.memory.update(memory_id, new_text, metadata=wanted)
            else:
                self.memory.update(memory_id, new_text)
            return
        self.memory.update(memory_id, new_text)
        after = self._live_payload(memory_id) or {}
        if any(after.get(k) != v for k, v in wanted.items()):
            vector = self.memory.embedding_model.embed(new_text, "update")
            self.memory.vector_store.update(
                vector_id=memory_id, vector=vector, payload={**after, **wanted}
            )

    def op_put_back(
        self, point_id: str, vector: list[float], payload: dict[str, Any]
    ) -> dict[str, bool]:
        """Insert a lost point with its id, vector and payload (``vector_store.insert``)."""
        point_id = _id("point_id", point_id)
        vectors = _vectors("vector", [vector])
        if not isinstance(payload, dict):
            raise AgentRequestError("bad-request", "payload must be an object")
        with self.gate.exclusive():
            if self._live_payload(str(point_id)) is not None:
                return {"inserted": False}
            self.memory.vector_store.insert(
                vectors=vectors, ids=[str(point_id)], payloads=[payload]
            )
            return {"inserted": True}

    def op_put_back_text(
        self, point_id: str, text: str, payload: dict[str, Any]
    ) -> dict[str, bool]:
        """Insert a lost point with its id and payload and ``text``, embedded by the app's embedder.

        ``recover`` of a memory whose text changed after the snapshot: the payload's ``data``
        and ``hash`` become ``text``'s, its ``text_lemmatized`` (mem0ai 2.x) is made again by
        mem0's own lemmatizer (dropped where the app's mem0 has none), and the vector is
        ``embed(text, "update")``, as ``Memory.update`` makes it. No history row.
        """
        point_id = _id("point_id", point_id)
        if not isinstance(text, str) or not text or len(text) > MAX_SEARCH_TEXT:
            raise AgentRequestError(
                "bad-request", f"text must be a string of 1 to {MAX_SEARCH_TEXT} characters"
            )
        if not isinstance(payload, dict):
            raise AgentRequestError("bad-request", "payload must be an object")
        with self.gate.exclusive():
            if self._live_payload(str(point_id)) is not None:
                return {"inserted": False}
            new = {**payload, "data": text, "hash": _text_hash(text)}
            if "text_lemmatized" in new:
                lemmatized = _lemmatized(text)
                if lemmatized is None:
                    del new["text_lemmatized"]
                else:
                    new["text_lemmatized"] = lemmatized
            vector = _vectors("vector", [list(self.memory.embedding_model.embed(text, "update"))])
            self.memory.vector_store.insert(vectors=vector, ids=[str(point_id)], payloads=[new])
            return {"inserted": True}

    def op_relink_entity(self, entity_id: str, remaining: list[str]) -> dict[str, bool]:
        """Set an entity's ``linked_memory_ids``; delete it when ``remaining`` is empty."""
        entity_id = _id("entity_id", entity_id)
        if not isinstance(remaining, list) or not all(isinstance(m, str) for m in remaining):
            raise AgentRequestError("bad-request", "remaining must be a list of memory ids")
        with self.gate.exclusive():
            store = self._entity_store()
            if store is None:  # mem0ai before 2.2 keeps no entities
                return {"changed": False}
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

    def _entity_store(self) -> Any:
        """mem0's entity store, or None on a version that has none (mem0ai before 2.2)."""
        try:
            return self.memory.entity_store
        except AttributeError:
            return None

    def op_touch_entities(self) -> dict[str, bool]:
        """Initialise mem0's entity store, so ``Memory.delete`` cleans entity links too.

        mem0ai 2.2.1 cleans links only once its entity store was touched in the process. memsync
        asks only when the deployment has an entity collection: touching it creates one.
        """
        with self.gate.exclusive():
            touched = self._entity_store() is not None
            return {"touched": touched}

    def op_embed(self, text: str) -> dict[str, list[float]]:
        """The embedding of ``text`` by the app's embedder (``embed(text, "add")``). Reads only."""
        if not isinstance(text, str):
            raise AgentRequestError("bad-request", "text must be a string")
        return {"vector": [float(x) for x in self.memory.embedding_model.embed(text, "add")]}

    def op_embed_batch(self, texts: list[str]) -> dict[str, list[list[float]]]:
        """The embeddings of ``texts``, in order, by the app's embedder. Reads only.

        mem0's ``embed_batch(texts, "add")`` where the app's mem0ai has it (2.x: one request
        for an embedder with a batch API, ``embed`` per text otherwise), else ``embed(text,
        "add")`` per text (a migration's batch).
        """
        if (
            not isinstance(texts, list)
            or not 0 < len(texts) <= MAX_EMBED_BATCH
            or not all(isinstance(t, str) and len(t) <= MAX_SEARCH_TEXT for t in texts)
        ):
            raise AgentRequestError(
                "bad-request", f"texts must be a list of 1 to {MAX_EMBED_BATCH} strings"
            )
        model = self.memory.embedding_model
        batch = getattr(model, "embed_batch", None)
        if callable(batch):
            vectors = list(batch(list(texts), "add"))
        else:
            vectors = [model.embed(text, "add") for text in texts]
        if len(vectors) != len(texts):
            raise AgentRequestError(
                "failed", f"the embedder returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return {"vectors": [[float(x) for x in vector] for vector in vectors]}

    def op_insert_points(
        self,
        ids: list[str],
        vectors: list[list[float]],
        payloads: list[Any],
        entities: bool = False,
    ) -> dict[str, int]:
        """Write points with these ids, vectors and payloads in one transaction (a migration's batch).

        Into pgvector the rows ``vector_store.insert`` would write, by one ``COPY`` (psycopg 3);
        into any other store ``vector_store.insert`` itself (``entity_store`` with
        ``entities``), embedded Qdrant's rows committed once (``one_transaction``). No history row.
        """
        checked = [_id("ids", i) for i in ids] if isinstance(ids, list) else []
        rows = _vectors("vectors", vectors)
        if not checked or len(rows) != len(checked) or not isinstance(payloads, list):
            raise AgentRequestError("bad-request", "ids, vectors and payloads must pair up")
        if len(payloads) != len(checked) or not all(isinstance(p, dict) for p in payloads):
            raise AgentRequestError("bad-request", "payloads must be one object per id")
        with self.gate.exclusive():
            store = self._entity_store() if entities else self.memory.vector_store
            if store is None:
                raise AgentRequestError("failed", "this mem0ai keeps no entity store")
            table = _pg_table(store)
            if table is None or not _copy_rows(store, table, checked, rows, payloads):
                with one_transaction(store):
                    store.insert(vectors=rows, ids=checked, payloads=payloads)
            return {"inserted": len(checked)}

    def op_defer_indexes(self, entities: bool = False) -> dict[str, list[str]]:
        """Drop the indexes of an empty pgvector table before a migration loads it.

        Only an empty table (a migration's new target: nobody has written to it yet): its rows
        then load without the HNSW and GIN indexes kept up to date row by row;
        ``build_indexes`` makes them again. ``dropped``: their names (none for any other store).
        """
        with self.gate.exclusive():
            store = self._entity_store() if entities else self.memory.vector_store
            table = _pg_table(store)
            if table is None:
                return {"dropped": []}
            store.create_col()  # the table as mem0 makes it (mem0ai 2.2 makes it on first use)
            with store._get_cursor(commit=True) as cursor:
                cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {table})")
                if cursor.fetchone()[0]:
                    return {"dropped": []}
                dropped = _secondary_indexes(cursor, table)
                for name in dropped:
                    cursor.execute(f"DROP INDEX {_quoted(name)}")
            return {"dropped": dropped}

    def op_build_indexes(self, entities: bool = False) -> dict[str, list[str]]:
        """Build the indexes a pgvector table lacks with mem0's own ``create_col`` (IF NOT EXISTS).

        ``indexes``: the table's indexes afterwards (none for any other store).
        """
        with self.gate.exclusive():
            store = self._entity_store() if entities else self.memory.vector_store
            table = _pg_table(store)
            if table is None:
                return {"indexes": []}
            store.create_col()
            with store._get_cursor() as cursor:
                return {"indexes": _secondary_indexes(cursor, table)}

    def op_delete_points(self, ids: list[str], entities: bool = False) -> dict[str, int]:
        """Delete points by id through mem0's vector store (no history row): a target only."""
        checked = [_id("ids", i) for i in ids] if isinstance(ids, list) else None
        if checked is None:
            raise AgentRequestError("bad-request", "ids must be a list of point ids")
        with self.gate.exclusive():
            store = self._entity_store() if entities else self.memory.vector_store
            if store is None:
                return {"deleted": 0}
            for point_id in checked:
                store.delete(vector_id=point_id)
            return {"deleted": len(checked)}

    def op_search(self, text: str, filters: dict[str, Any], limit: int = 1) -> dict[str, Any]:
        """``Memory.search`` in one scope: ``results`` as ``[{"id", "memory"}]``. Reads only.

        mem0ai 2.x takes ``filters`` and ``top_k``; before 2.0, ``user_id``/``agent_id``/
        ``run_id`` and ``limit``. Expired memories are included where the version can.
        """
        if not isinstance(text, str) or not isinstance(filters, dict):
            raise AgentRequestError("bad-request", "search takes text and a filters object")
        if (
            len(text) > MAX_SEARCH_TEXT
            or not filters
            or not all(
                key in SCOPE_KEYS and isinstance(value, str) and 0 < len(value) <= 256
                for key, value in filters.items()
            )
        ):
            raise AgentRequestError(
                "bad-request",
                f"search takes a text of at most {MAX_SEARCH_TEXT} characters and a scope: "
                "filters of user_id, agent_id or run_id, each a string",
            )
        if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= 100:
            raise AgentRequestError("bad-request", "limit must be an integer from 1 to 100")
        params = _parameters(self.memory.search)
        kwargs: dict[str, Any]
        if "top_k" in params:
            kwargs = {"top_k": limit, "filters": dict(filters)}
        else:
            scope = ("user_id", "agent_id", "run_id")
            kwargs = {k: filters[k] for k in scope if k in filters and k in params}
            kwargs["limit"] = limit
        if "show_expired" in params:
            kwargs["show_expired"] = True
        found = self.memory.search(text, **kwargs)  # gated as the app's own reads
        results = found.get("results") if isinstance(found, dict) else found
        return {
            "results": [
                {"id": str(r.get("id")), "memory": str(r.get("memory") or "")}
                for r in results or []
                if isinstance(r, dict)
            ]
        }

    def op_pause(self, lease_s: float) -> dict[str, Any]:
        """Hold back app writes (in-flight ones finish first) for at most ``lease_max_s``.

        ``covered``: the pids of the app processes whose writes the pause holds (every process
        that joined the deployment's gate; only this one without a shared gate).
        """
        if not _finite(lease_s) or lease_s <= 0:
            raise AgentRequestError("bad-request", "lease_s must be a positive finite number")
        now = time.monotonic()
        window = 2 * self.lease_max_s
        renewal = self.gate.paused() and bool(self._holds)
        if not renewal and self._holds:
            self._holds[-1][1] = min(self._holds[-1][1], now)  # the last one ended (ran out)
        self._holds = [hold for hold in self._holds if hold[1] > now - window]
        held = sum(min(end, now) - max(start, now - window) for start, end in self._holds)
        left = self.lease_max_s - held
        if left <= 0.001:
            raise AgentRequestError(
                "busy",
                f"app writes were held {held:.1f} s of the last {window:g} s; this agent holds "
                f"them at most lease_max_s ({self.lease_max_s:g} s) in any {window:g} s",
            )
        lease = min(float(lease_s), left)
        waited = self.gate.pause(lease, keep_start=renewal)
        if renewal:
            self._holds[-1][1] = time.monotonic() + lease
        else:
            self._holds.append([now, time.monotonic() + lease])
        covered = self.gate.covered()
        logger.info("memsync agent: app writes paused in pids %s (lease %.1f s)", covered, lease)
        return {"lease_s": lease, "waited_s": round(waited, 6), "covered": covered}

    def end_pause(self) -> float | None:
        """Resume app writes (``WriteGate.resume``) and close the current hold's record."""
        held = self.gate.resume()
        if held is not None and self._holds:
            self._holds[-1][1] = min(self._holds[-1][1], time.monotonic())
        return held

    def op_resume(self) -> dict[str, Any]:
        """Let app writes go on: ``held_s`` (None when they were not paused), ``lease_ran_out``.

        ``lease_ran_out`` true means app writes went on before this resume: whatever memsync
        did under the pause was not fully quiesced.
        """
        held = self.end_pause()
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

    def _own_files(self) -> set[Path]:
        """history.db and each collection's ``storage.sqlite`` of the store this app holds."""
        config = getattr(self.memory, "config", None)
        history = getattr(config, "history_db_path", None)
        store = getattr(getattr(config, "vector_store", None), "config", None)
        root = getattr(store, "path", None)
        files = {Path(history).resolve()} if history else set()
        if root:
            files |= {p.resolve() for p in Path(root).glob("collection/*/storage.sqlite")}
        return files

    def op_checkpoint(self, paths: list[str]) -> dict[str, list[int]]:
        """``PRAGMA wal_checkpoint(TRUNCATE)`` of the app's own SQLite files, run alone.

        No app call (read or write) is in flight meanwhile, so no transaction of the app's pins
        the ``-wal`` file. ``paths``: history.db or a collection's ``storage.sqlite`` of this
        app's store, nothing else. Returns ``{path: [busy, log frames, checkpointed frames]}``.
        """
        own = self._own_files()
        if not isinstance(paths, list) or not all(
            isinstance(p, str) and Path(p).resolve() in own for p in paths
        ):
            raise AgentRequestError(
                "bad-request", "paths must be this app's history.db or storage.sqlite files"
            )
        answers: dict[str, list[int]] = {}
        with self.gate.exclusive():
            for path in paths:
                connection = sqlite3.connect(path, timeout=5.0)
                try:
                    row = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    answers[path] = [int(value) for value in row]
                except sqlite3.Error as error:
                    raise AgentRequestError("failed", f"checkpoint {path}: {error}") from error
                finally:
                    connection.close()
        return answers
