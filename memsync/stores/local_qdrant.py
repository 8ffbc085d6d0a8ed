"""Embedded (local-mode) Qdrant files: meta.json, per-collection ``storage.sqlite``.

Layout written by qdrant-client 1.20.0 local mode: ``<path>/meta.json`` (collections and their
vector parameters), ``<path>/collection/<name>/storage.sqlite`` with one table
``points(id TEXT PRIMARY KEY, point BLOB)``; ``point`` is a pickled ``PointStruct``. Older
files can hold several rows for one point (other UUID spellings, another key pickle
protocol): every reader here takes the highest rowid among them, as qdrant-client's ``load``
does (``qdrant_formats.normalize_point_id``).

Nothing here takes Qdrant's ``.lock`` or builds a ``QdrantClient``; points are decoded through
``PointUnpickler`` (``memsync.stores.qdrant_formats``), which admits only the classes
qdrant-client writes. ``EmbeddedQdrant`` is the ``VectorStore`` port over these files.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memsync.errors import LockedError, UnavailableError
from memsync.model import CollectionInfo, EntityLink, Point
from memsync.stores import locks
from memsync.stores.qdrant_formats import (
    PointDecodeError,
    decode_key,
    decode_point,
    decode_stored,
    normalize_point_id,
    parse_meta,
)
from memsync.stores.sqlite_files import (
    CopyResult,
    connect_readonly,
    present,
    roll_back_hot_journal,
    translate,
    vacuum,
    vacuum_into,
    work_dir_error,
)
from memsync.stores.sqlite_files import integrity as sqlite_integrity
from memsync.stores.vector_store import StoredPoint, VectorCapture

META_FILE = "meta.json"
STORAGE_FILE = "storage.sqlite"
LEGACY_STORAGE_FILE = "storage.dbm"  # qdrant-client < 1.1.7 (1.20.0 persistence.py)
LOCK_FILE = ".lock"


def read_meta(qdrant_path: Path) -> dict[str, CollectionInfo] | None:
    """Read ``meta.json``: each collection's parameters by name; None when the file is absent.

    Reads only (no lock).

    Raises:
        UnavailableError: meta.json exists (a dangling link counts) but is not readable or
            not Qdrant's JSON.
    """
    meta = qdrant_path / META_FILE
    text = read_meta_text(qdrant_path)
    return None if text is None else parse_meta(text, meta)


def read_meta_text(qdrant_path: Path) -> str | None:
    """Read ``meta.json``'s text; None when absent. Reads only.

    Raises:
        UnavailableError: it is unreachable, a dangling link, unreadable or not UTF-8.
    """
    meta = qdrant_path / META_FILE
    if not present(meta):
        return None
    try:
        return meta.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnavailableError(f"Qdrant metadata {meta} is a dangling link") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UnavailableError(
            f"Qdrant metadata {meta} is not readable: {error}",
            "check its permissions (memsync needs read access to the Qdrant directory)",
        ) from error


def storage_path(qdrant_path: Path, collection: str) -> Path:
    """The ``storage.sqlite`` of ``collection`` under the embedded Qdrant ``qdrant_path``."""
    return qdrant_path / "collection" / collection / STORAGE_FILE


def iter_points(storage: Path) -> Iterator[Point]:
    """Yield every current point of a captured ``storage.sqlite`` (newest row per id wins).

    Ids are normalised (``normalize_point_id``): the rows of every spelling of a UUID are one
    point, as qdrant-client 1.20.0's ``load`` reads them.

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
    of a point id (in any spelling, normalised) wins, as qdrant-client 1.20.0's ``load`` decides. With ``keys``, each payload is
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
        total = (
            int(connection.execute("SELECT count(*) FROM points").fetchone()[0]) if progress else 0
        )
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


def rows_of(connection: sqlite3.Connection, point_ids: frozenset[str]) -> list[int]:
    """The rowids of every row of the (normalised) ``point_ids``, newest first. Reads only.

    Matches each row by its key (``decode_key``: any UUID spelling, any key pickle protocol);
    a row whose key memsync cannot read is matched by the id in its point, as qdrant-client
    1.20.0's ``load`` identifies rows (``normalize_point_id(point.id)``).

    Raises:
        sqlite3.Error: the file cannot be read.
        PointDecodeError: a row with an unreadable key holds an undecodable point.
    """
    rowids = []
    for rowid, key in connection.execute("SELECT rowid, id FROM points ORDER BY rowid DESC"):
        point_id = decode_key(key) if isinstance(key, str) else None
        if point_id is None:
            (blob,) = connection.execute(
                "SELECT point FROM points WHERE rowid = ?", (rowid,)
            ).fetchone()
            point_id = decode_point(blob, frozenset()).id
        if point_id in point_ids:
            rowids.append(rowid)
    return rowids


def delete_points(storage: Path, point_ids: Sequence[str]) -> int:
    """Delete every row of ``point_ids`` from a ``storage.sqlite`` copy, then VACUUM it.

    Every spelling of an id and every key pickle protocol counts (``rows_of``), so no older
    row is left to become the point again. Only for copies (a snapshot being rewritten, a
    pre-restore copy): the live store changes through mem0. Returns the rows removed.
    Idempotent.

    Raises:
        TryLaterError, UnavailableError: the file is busy or cannot be written.
    """
    wanted = frozenset(normalize_point_id(point_id) for point_id in point_ids)
    connection = sqlite3.connect(storage, timeout=5.0)
    try:
        with connection:
            rowids = rows_of(connection, wanted)
            connection.executemany("DELETE FROM points WHERE rowid = ?", [(r,) for r in rowids])
        connection.execute("VACUUM")
        return len(rowids)
    except sqlite3.Error as error:
        raise translate(error, storage, "delete points") from error
    except PointDecodeError as error:
        raise UnavailableError(f"{storage} cannot be read: {error}") from error
    finally:
        connection.close()


def find_point(storage: Path, point_id: str) -> tuple[dict[str, Any], Any] | None:
    """Return ``(payload, vector)`` of one point of a captured or snapshot ``storage.sqlite``.

    The point qdrant-client 1.20.0 loads: the newest row among every spelling of the id and
    every key pickle protocol (``rows_of``). The vector is as stored (mem0: ``{"": [floats],
    ...}``). None when absent. Reads only; decodes through ``PointUnpickler``.

    Raises:
        UnavailableError: the file is unreadable.
    """
    wanted = normalize_point_id(point_id)
    connection = connect_readonly(storage)
    try:
        for rowid in rows_of(connection, frozenset({wanted})):
            (blob,) = connection.execute(
                "SELECT point FROM points WHERE rowid = ?", (rowid,)
            ).fetchone()
            stored_id, payload, vector = decode_stored(blob)
            if stored_id == wanted:  # qdrant-client goes by the point's id, not its key
                return payload, vector
        return None
    except (sqlite3.Error, PointDecodeError) as error:
        raise UnavailableError(f"point {point_id} of {storage} cannot be read: {error}") from error
    finally:
        connection.close()


def legacy_files(qdrant_path: Path) -> dict[str, tuple[str, ...]]:
    """The legacy dbm point stores under an embedded Qdrant directory, by collection. Reads only.

    qdrant-client before 1.1.7 kept a collection's points in ``storage.dbm`` (Python's
    ``dbm``: ``storage.dbm`` itself, or ``.db``, ``.dir``/``.pag``, ``.dat``/``.dir``/``.bak``
    beside it). 1.20.0 (``local/persistence.py: check_legacy_storage``) refuses such a
    collection only while it has no ``storage.sqlite``; beside one (a first open after an
    upgrade that went wrong: qdrant-client issue #1456, PR #1442) it reads the sqlite file and
    ignores the dbm files, so the points they hold are invisible, not lost.

    Returns:
        ``{collection: (paths relative to qdrant_path, sorted)}``; collections without any
        legacy file are left out.
    """
    found: dict[str, tuple[str, ...]] = {}
    for directory in sorted((qdrant_path / "collection").glob("*")):
        files = sorted(p for p in directory.glob(f"{LEGACY_STORAGE_FILE}*") if p.is_file())
        if files:
            found[directory.name] = tuple(str(p.relative_to(qdrant_path)) for p in files)
    return found


class EmbeddedQdrant:
    """The ``VectorStore`` port over embedded (local-mode) Qdrant files (qdrant-client 1.20.0).

    Built by ``memsync.stores.vector_store.vector_store_for``. Reads the files directly: never
    builds a ``QdrantClient`` and never takes Qdrant's ``.lock`` (the app may hold it).
    Contracts, shapes and errors: see ``VectorStore``.
    """

    kind = "embedded-qdrant"
    capture_dir = "qdrant"
    index_file = META_FILE

    def __init__(self, path: Path, collection: str) -> None:
        self._path = path
        self._collection = collection

    @property
    def location(self) -> Path:
        """The embedded Qdrant directory (``vector_store.config.path``)."""
        return self._path

    @property
    def collection(self) -> str:
        """mem0's memory collection."""
        return self._collection

    @property
    def entities_collection(self) -> str:
        """mem0's entity collection (mem0ai 2.2.1: ``<collection>_entities``)."""
        return f"{self._collection}_entities"

    def present(self) -> bool:
        """Whether ``meta.json`` is there (a dangling link counts). See ``VectorStore.present``."""
        return present(self._path / META_FILE)

    def holds_data(self) -> bool:
        """Whether the directory holds any entry but ``.lock``. See ``VectorStore.holds_data``."""
        return self._path.is_dir() and any(p.name != LOCK_FILE for p in self._path.iterdir())

    def lock_path(self) -> Path:
        """``<location>/.lock``, which qdrant-client's local mode flocks while a client is open."""
        return self._path / LOCK_FILE

    def holder(self) -> locks.LockHolder | None:
        """The process holding ``.lock`` (from /proc/locks), or None. See ``VectorStore.holder``."""
        return locks.find_holder(self.lock_path(), self._path)

    def require_free(self, what: str) -> None:
        """Raise LockedError (exit 12) when another process holds ``.lock``. Reads /proc only."""
        holder = self.holder()
        if holder is not None and holder.pid != os.getpid():
            raise LockedError(
                f"{what}: the embedded Qdrant store {self._path} is held by {holder.describe()}",
                "stop that process (the app) first; embedded Qdrant allows one process at a time",
            )

    def prepare_for_writing(self) -> None:
        """Roll back the hot journal a crashed writer left in any ``storage.sqlite``. Idempotent."""
        for path in sorted(self._path.glob(f"collection/*/{STORAGE_FILE}")):
            if path.is_file():
                roll_back_hot_journal(path)

    def collection_file(self, collection: str, root: Path | None = None) -> Path:
        """``<root>/collection/<collection>/storage.sqlite`` (root: the live directory). Pure."""
        return storage_path(self._path if root is None else root, collection)

    def read_collections(self) -> dict[str, CollectionInfo] | None:
        """The live ``meta.json``'s collections, or None when absent. See ``read_meta``."""
        return read_meta(self._path)

    def capture(self, dest: Path) -> VectorCapture:
        """Copy ``meta.json`` then each ``storage.sqlite`` (memory collection first) into ``dest``.

        One ``VACUUM INTO`` per collection. See ``VectorStore.capture``.
        """
        text = read_meta_text(self._path)
        legacy = legacy_files(self._path)
        if text is None:
            return VectorCapture(
                root=dest, present=False, collections={}, copies={}, legacy_files=legacy
            )
        collections = parse_meta(text, self._path / META_FILE)
        try:
            dest.mkdir(parents=True, exist_ok=True)
            (dest / META_FILE).write_text(text, encoding="utf-8")
        except OSError as error:
            raise work_dir_error(dest, error) from error
        copies = {}
        for name in sorted(collections, key=lambda name: (name != self._collection, name)):
            # qdrant-client creates storage.sqlite with every collection: a listed collection
            # without a readable one is damage (exit 11), never "no points".
            copies[name] = vacuum_into(storage_path(self._path, name), storage_path(dest, name))
        return VectorCapture(
            root=dest, present=True, collections=collections, copies=copies, legacy_files=legacy
        )

    def open_capture(
        self, root: Path, started_at: datetime, finished_at: datetime
    ) -> VectorCapture:
        """Describe the Qdrant layout at ``root`` (meta.json read). See ``VectorStore.open_capture``."""
        collections = read_meta(root)
        copies = {}
        for name in collections or {}:
            storage = storage_path(root, name)
            if storage.is_file():
                copies[name] = CopyResult(
                    source=storage,
                    dest=storage,
                    started_at=started_at,
                    finished_at=finished_at,
                    duration_s=0.0,
                    size_bytes=storage.stat().st_size,
                )
        return VectorCapture(
            root=root,
            present=collections is not None,
            collections=collections or {},
            copies=copies,
            legacy_files=legacy_files(root),
        )

    def iter_points(self, capture: VectorCapture, collection: str) -> Iterator[Point]:
        """Stream a captured collection's current points. See ``iter_points``."""
        copy = capture.copies.get(collection)
        if copy is not None:
            yield from iter_points(copy.dest)

    def read_points(
        self,
        capture: VectorCapture,
        keys: frozenset[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Point]:
        """The captured memory collection's points by id. See ``read_points``."""
        copy = capture.copies.get(self._collection)
        return read_points(copy.dest, keys, progress) if copy is not None else {}

    def read_entities(self, capture: VectorCapture) -> tuple[EntityLink, ...]:
        """The captured entity collection's links. See ``read_entities``."""
        copy = capture.copies.get(self.entities_collection)
        return read_entities(copy.dest) if copy is not None else ()

    def read_live_entities(self) -> tuple[EntityLink, ...]:
        """The live entity collection's links (read-only open of its storage.sqlite); () if none."""
        storage = storage_path(self._path, self.entities_collection)
        return read_entities(storage) if storage.is_file() else ()

    def find_point(self, root: Path, collection: str, point_id: str) -> StoredPoint | None:
        """One point of the layout at ``root`` with its dense vector (named ``""`` by mem0)."""
        storage = storage_path(root, collection)
        if not storage.is_file():
            return None
        found = find_point(storage, point_id)
        if found is None:
            return None
        payload, vector = found
        dense = vector.get("") if isinstance(vector, dict) else vector
        return StoredPoint(payload=payload, vector=list(dense) if isinstance(dense, list) else None)

    def legacy_files(self) -> dict[str, tuple[str, ...]]:
        """The live store's legacy dbm point stores by collection. See ``legacy_files``."""
        return legacy_files(self._path)

    def compact(self) -> None:
        """VACUUM each live ``storage.sqlite`` (the store must be free). See ``VectorStore.compact``."""
        for storage in sorted(self._path.glob(f"collection/*/{STORAGE_FILE}")):
            vacuum(storage)

    def erase_points(self, root: Path, point_ids: Sequence[str]) -> int:
        """Delete the points from every ``storage.sqlite`` under ``root`` and VACUUM each."""
        return sum(
            delete_points(storage, point_ids)
            for storage in sorted(root.glob(f"collection/*/{STORAGE_FILE}"))
        )

    def files(self, root: Path) -> list[str]:
        """``meta.json`` and each existing ``collection/<name>/storage.sqlite`` under ``root``."""
        collections = read_meta(root)
        if collections is None:
            return []
        stored = [str(storage_path(root, name).relative_to(root)) for name in collections]
        return [META_FILE, *sorted(p for p in stored if (root / p).is_file())]

    def check_copy(
        self,
        capture: VectorCapture,
        quick: bool = False,
        *,
        integrity: bool = True,
        decode: bool = True,
    ) -> dict[str, str]:
        """``integrity_check`` (or ``quick_check``) then a full decode of each copied collection."""
        verdicts = {}
        for name, copy in sorted(capture.copies.items()):
            try:
                verdict = sqlite_integrity(copy.dest, quick=quick) if integrity else "ok"
                if verdict == "ok" and decode:
                    for _point in iter_points(copy.dest):
                        pass
            except UnavailableError as error:  # not openable at all, or a point undecodable
                verdict = error.message
            verdicts[str(storage_path(capture.root, name).relative_to(capture.root))] = verdict
        return verdicts
