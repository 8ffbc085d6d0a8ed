"""Embedded (local-mode) Qdrant files: meta.json, per-collection ``storage.sqlite``.

Layout written by qdrant-client 1.20.0 local mode: ``<path>/meta.json`` (collections and their
vector parameters), ``<path>/collection/<name>/storage.sqlite`` with one table
``points(id TEXT PRIMARY KEY, point BLOB)``; ``point`` is a pickled ``PointStruct``. Older
files can hold several rows for one point id: the highest rowid is the current one.

Nothing here takes Qdrant's ``.lock`` or builds a ``QdrantClient``; points are decoded through
``PointUnpickler``, which admits only the classes qdrant-client writes.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from memsync.errors import UnavailableError
from memsync.model import CollectionInfo, EntityLink, Point
from memsync.stores.sqlite_files import (
    CopyResult,
    connect_readonly,
    translate,
    vacuum_into,
    work_dir_error,
)

META_FILE = "meta.json"
STORAGE_FILE = "storage.sqlite"
LOCK_FILE = ".lock"
_QDRANT_MODELS = "qdrant_client.http.models.models"
# Payload keys memsync never needs (a copy of ``data`` prepared for BM25, mem0ai 2.2.1).
_DROPPED_PAYLOAD_KEYS = frozenset({"text_lemmatized"})


class PointDecodeError(Exception):
    """A stored point is not a pickle of the classes qdrant-client writes."""


class _Decoded:
    """Stand-in for qdrant-client's pydantic models: keeps the pickled state, runs no code."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def fields(self) -> dict[str, Any]:
        """The model's field values (pydantic v2 pickles them under ``__dict__``); not a copy."""
        state = self.state
        if isinstance(state, dict):
            inner = state.get("__dict__", state)
            return inner if isinstance(inner, dict) else {}
        if isinstance(state, tuple) and state and isinstance(state[0], dict):
            return state[0]  # pydantic v1 style (dict, fields_set)
        return {}


class PointStructStandIn(_Decoded):
    """Decoded ``PointStruct``."""

    __slots__ = ()


class SparseVectorStandIn(_Decoded):
    """Decoded ``SparseVector`` (mem0's ``bm25``)."""

    __slots__ = ()


_ALLOWED = {
    (_QDRANT_MODELS, "PointStruct"): PointStructStandIn,
    (_QDRANT_MODELS, "SparseVector"): SparseVectorStandIn,
}


class PointUnpickler(pickle.Unpickler):
    """Unpickle a stored point, admitting only PointStruct and SparseVector (as stand-ins)."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        stand_in = _ALLOWED.get((module, name))
        if stand_in is None:
            raise PointDecodeError(f"refused class {module}.{name} in a stored point")
        return stand_in


def decode_point(blob: bytes, keys: frozenset[str] | None = None) -> Point:
    """Decode one ``points.point`` blob into a ``Point`` (vector dropped, size kept). Pure.

    Args:
        blob: the pickled point.
        keys: keep only these payload keys (None: the whole payload but ``text_lemmatized``).

    Raises:
        PointDecodeError: the blob is not a pickled PointStruct of the admitted classes.
    """
    try:
        decoded = PointUnpickler(io.BytesIO(blob)).load()
    except PointDecodeError:
        raise
    except Exception as error:  # noqa: BLE001 - any unpickling failure means undecodable
        raise PointDecodeError(f"not a pickled point: {type(error).__name__}: {error}") from error
    if not isinstance(decoded, PointStructStandIn):
        raise PointDecodeError(f"stored value is a {type(decoded).__name__}, not a PointStruct")
    fields = decoded.fields()
    point_id = fields.get("id")
    if not isinstance(point_id, str | int):
        raise PointDecodeError(f"point has no valid id ({point_id!r})")
    payload = fields.get("payload") or {}
    if not isinstance(payload, dict):
        raise PointDecodeError(f"point {point_id} has a payload of type {type(payload).__name__}")
    if keys is not None:
        payload = {key: payload[key] for key in keys & payload.keys()}
    else:
        for key in _DROPPED_PAYLOAD_KEYS & payload.keys():
            del payload[key]
    return Point(id=str(point_id), payload=payload, vector_size=_vector_size(fields.get("vector")))


def _vector_size(vector: Any) -> int | None:
    if isinstance(vector, dict):
        vector = vector.get("")
    if isinstance(vector, list) and vector and not isinstance(vector[0], list):
        return len(vector)
    return None


def read_meta(qdrant_path: Path) -> dict[str, CollectionInfo] | None:
    """Read ``meta.json``: each collection's parameters by name; None when the file is absent.

    Reads only (no lock).

    Raises:
        UnavailableError: meta.json exists but is not readable or not Qdrant's JSON.
    """
    meta = qdrant_path / META_FILE
    try:
        text = meta.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UnavailableError(f"Qdrant metadata {meta} is not readable: {error.strerror}") from error
    return parse_meta(text, meta)


COLLECTION_NAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,255}$")


def parse_meta(text: str, where: Path) -> dict[str, CollectionInfo]:
    """Parse meta.json text into collection parameters. Pure.

    Collection names become paths, so a name that is not a plain file name (``..``, ``/``)
    makes the file invalid rather than a path outside the store.

    Raises:
        UnavailableError: the text is not Qdrant's meta.json.
    """
    try:
        data = json.loads(text)
        collections = data["collections"]
        if not isinstance(collections, dict):
            raise TypeError("collections is not an object")
        for name in collections:
            if not COLLECTION_NAME.match(name):
                raise ValueError(f"invalid collection name {name!r}")
        return {name: _collection_info(name, params) for name, params in collections.items()}
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as error:
        raise UnavailableError(
            f"Qdrant metadata {where} is not valid ({type(error).__name__}: {error})",
            "the embedded Qdrant directory is damaged: restore it from a snapshot",
        ) from error


def _collection_info(name: str, params: Mapping[str, Any]) -> CollectionInfo:
    vectors = params.get("vectors")
    size = distance = None
    if isinstance(vectors, dict) and "size" in vectors:
        if not isinstance(vectors["size"], int) or isinstance(vectors["size"], bool):
            raise TypeError(f"collection {name!r} has a vector size of {vectors['size']!r}")
        size, distance = vectors["size"], vectors.get("distance")
    sparse = params.get("sparse_vectors") or {}
    return CollectionInfo(
        name=name,
        vector_size=size,
        distance=str(distance) if distance is not None else None,
        sparse_vectors=tuple(sorted(sparse)) if isinstance(sparse, dict) else (),
    )


def storage_path(qdrant_path: Path, collection: str) -> Path:
    """The ``storage.sqlite`` of ``collection`` under the embedded Qdrant ``qdrant_path``."""
    return qdrant_path / "collection" / collection / STORAGE_FILE


def capture(
    qdrant_path: Path, dest: Path, collections: Iterator[str] | list[str]
) -> dict[str, CopyResult]:
    """Copy each collection's storage.sqlite into ``dest`` (same layout).

    Each collection is copied with one ``VACUUM INTO`` (one short read transaction).
    Writes under ``dest`` only.

    Raises:
        UnavailableError, TryLaterError: as ``vacuum_into``.
    """
    copies: dict[str, CopyResult] = {}
    for name in collections:
        source = storage_path(qdrant_path, name)
        # qdrant-client creates storage.sqlite with every collection: a listed collection
        # without a readable one is damage (exit 11), never "no points".
        copies[name] = vacuum_into(source, storage_path(dest, name))
    return copies


def write_meta_copy(text: str, dest: Path) -> None:
    """Write the captured meta.json text into the capture directory ``dest``.

    Raises:
        TryLaterError: the disk is full; UnavailableError: ``dest`` cannot be written.
    """
    try:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / META_FILE).write_text(text, encoding="utf-8")
    except OSError as error:
        raise work_dir_error(dest, error) from error


def iter_points(storage: Path) -> Iterator[Point]:
    """Yield every current point of a captured ``storage.sqlite`` (newest row per id wins).

    Streams: one decoded point in memory at a time (the ids seen are kept). Reads only.

    Raises:
        UnavailableError: the file is not a valid collection store, or a point is undecodable
            (the message names the file and the row).
    """
    connection = connect_readonly(storage)
    seen: set[str] = set()
    try:
        cursor = connection.execute("SELECT rowid, point FROM points ORDER BY rowid DESC")
        for rowid, blob in cursor:
            try:
                point = decode_point(blob)
            except PointDecodeError as error:
                raise _undecodable(storage, rowid, error) from error
            if point.id not in seen:
                seen.add(point.id)
                yield point
    except sqlite3.Error as error:
        raise translate(error, storage, "read its points") from error
    finally:
        connection.close()


def read_points(
    storage: Path,
    keys: frozenset[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Point]:
    """Read every current point of a captured ``storage.sqlite`` into a dict by id.

    Rows are read in rowid order and a later row replaces an earlier one, so the newest row
    of a point id wins (as qdrant-client's own loader decides). With ``keys``, each payload is
    trimmed to those keys, so memory stays bounded whatever metadata the app stores (100,000
    points: about 110 MB of payload objects with mem0's own keys). Reads only.

    Args:
        storage: the captured storage.sqlite.
        keys: payload keys to keep (None: all).
        progress: called as ``progress(rows_read, rows_total)`` every 1,000 rows and at the end.

    Raises:
        UnavailableError: as ``iter_points``.
    """
    connection = connect_readonly(storage)
    points: dict[str, Point] = {}
    try:
        total = int(connection.execute("SELECT count(*) FROM points").fetchone()[0]) if progress else 0
        read = 0
        for rowid, blob in connection.execute("SELECT rowid, point FROM points ORDER BY rowid"):
            read += 1
            if progress is not None and read % 1000 == 0:
                progress(read, total)
            try:
                point = decode_point(blob, keys)
            except PointDecodeError as error:
                raise _undecodable(storage, rowid, error) from error
            points[point.id] = point
        if progress is not None:
            progress(read, total)
    except sqlite3.Error as error:
        raise translate(error, storage, "read its points") from error
    finally:
        connection.close()
    return points


def _undecodable(storage: Path, rowid: int, error: PointDecodeError) -> UnavailableError:
    return UnavailableError(
        f"point at rowid {rowid} of {storage} cannot be decoded: {error}",
        "the collection store is damaged or was not written by qdrant-client",
    )


def read_entities(storage: Path) -> tuple[EntityLink, ...]:
    """Read mem0's entity points (``<collection>_entities``) from a captured storage file.

    Returns the entities sorted by id; ``linked_memory_ids`` keep their stored order.

    Raises:
        UnavailableError: as ``iter_points``.
    """
    links = []
    for point in iter_points(storage):
        linked = point.payload.get("linked_memory_ids")
        ids = tuple(str(item) for item in linked) if isinstance(linked, list) else ()
        text = point.payload.get("data")
        links.append(
            EntityLink(
                entity_id=point.id,
                text=text if isinstance(text, str) else None,
                linked_memory_ids=ids,
            )
        )
    return tuple(sorted(links, key=lambda link: link.entity_id))


def point_key(point_id: str) -> str:
    """qdrant-client's key for a point id in ``points.id`` (1.20.0: base64 of a protocol-4 pickle)."""
    import base64

    return base64.b64encode(pickle.dumps(point_id, protocol=4)).decode("ascii")


def find_point(storage: Path, point_id: str) -> tuple[dict[str, Any], Any] | None:
    """Return ``(payload, vector)`` of one point of a captured or snapshot ``storage.sqlite``.

    The vector is as stored (mem0: ``{"": [floats], ...}``). Looks the row up by qdrant-client's
    key, then by scanning (older files may spell keys differently); newest row wins. None when
    absent. Reads only; decodes through ``PointUnpickler``.

    Raises:
        UnavailableError: the file is unreadable.
    """
    key = point_key(point_id)
    connection = connect_readonly(storage)
    try:
        rows = connection.execute("SELECT point FROM points WHERE id = ? ORDER BY rowid DESC", (key,)).fetchall()
        if not rows:
            rows = [
                (blob,)
                for (blob,) in connection.execute("SELECT point FROM points ORDER BY rowid DESC")
                if point_id.encode() in blob
            ]
        for (blob,) in rows:
            decoded = PointUnpickler(io.BytesIO(blob)).load()
            fields = decoded.fields() if isinstance(decoded, PointStructStandIn) else {}
            if str(fields.get("id")) == point_id:
                vector = fields.get("vector")
                if isinstance(vector, dict):
                    vector = {name: (v.fields() if isinstance(v, _Decoded) else v) for name, v in vector.items()}
                return dict(fields.get("payload") or {}), vector
        return None
    except (sqlite3.Error, pickle.UnpicklingError, PointDecodeError) as error:
        raise UnavailableError(f"point {point_id} of {storage} cannot be read: {error}") from error
    finally:
        connection.close()
