"""Embedded (local-mode) Qdrant files: meta.json, per-collection ``storage.sqlite``.

Layout written by qdrant-client 1.20.0 local mode: ``<path>/meta.json`` (collections and their
vector parameters), ``<path>/collection/<name>/storage.sqlite`` with one table
``points(id TEXT PRIMARY KEY, point BLOB)``; ``point`` is a pickled ``PointStruct``. The rows
themselves are read, found and deleted by ``memsync.stores.qdrant_embedded.rows`` (several rows of one
point under other UUID spellings: the highest rowid wins, as qdrant-client's ``load`` does).

Nothing here takes Qdrant's ``.lock`` or builds a ``QdrantClient``; points are decoded through
``PointUnpickler`` (``memsync.stores.qdrant_embedded.formats``), which admits only the classes
qdrant-client writes. ``EmbeddedQdrant`` is the ``VectorStore`` port over these files.
"""

from __future__ import annotations

import glob
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsync.config import MEM0_DEFAULT_QDRANT_PATH, QdrantSettings
from memsync.errors import LockedError, MemsyncError, UnavailableError
from memsync.model import CollectionInfo, DoctorResult, EntityLink, Point
from memsync.stores import locks
from memsync.stores.qdrant_embedded import doctor
from memsync.stores.qdrant_embedded.formats import (
    parse_meta,
)
from memsync.stores.qdrant_embedded.meta import QdrantMeta
from memsync.stores.qdrant_embedded.removal import remove_directory
from memsync.stores.qdrant_embedded.rows import (
    count_rows,
    delete_points,
    find_point,
    iter_points,
    iter_stored,
    points_in_order,
    read_entities,
    read_points,
)
from memsync.stores.sqlite_files import (
    CopyResult,
    present,
    roll_back_hot_journal,
    vacuum,
    vacuum_into,
    work_dir_error,
)
from memsync.stores.sqlite_files import integrity as sqlite_integrity
from memsync.stores.vector_store import (
    TELEMETRY_COLLECTION,
    LocalDir,
    StoredPoint,
    VectorCapture,
)

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


def _capture_beside_legacy(source: Path, dest: Path) -> CopyResult:
    """Capture a collection whose points sit in a legacy dbm store, as qdrant-client reads it.

    qdrant-client 1.20 opens a missing or empty (0-byte) ``storage.sqlite`` beside dbm files as
    a store without points (it creates the ``points`` table). The copy says the same, so the
    findings name the legacy store (``legacy-point-store``), never a damaged file. Writes only
    ``dest``.
    """
    started = datetime.now(UTC)
    if source.is_file() and source.stat().st_size > 0:
        vacuum_into(source, dest, in_place=False)  # written to below: a copy
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(dest)) as connection, connection:
        connection.execute("CREATE TABLE IF NOT EXISTS points (id TEXT PRIMARY KEY, point BLOB)")
    return CopyResult.at_rest(dest, started, datetime.now(UTC), source=source)


class EmbeddedQdrant:
    """The ``VectorStore`` port over embedded (local-mode) Qdrant files (qdrant-client 1.20.0).

    Built by ``memsync.stores.backends.backend_for``. Reads the files directly: never
    builds a ``QdrantClient`` and never takes Qdrant's ``.lock`` (the app may hold it).
    Contracts, shapes and errors: see ``VectorStore``.
    """

    kind = "embedded-qdrant"
    label = "embedded Qdrant"
    integrity_prefix = "PRAGMA integrity_check: "  # what a verdict of check_copy comes from
    bytes_per_dimension = 9  # each float pickled as a Python float (qdrant-client 1.20)
    mode = "embedded"
    capture_dir = "qdrant"
    index_file = META_FILE
    writes_alone = True  # its .lock: one process at a time

    def __init__(self, path: Path, collection: str) -> None:
        self._path = path
        self._collection = collection

    @classmethod
    def from_settings(cls, settings: QdrantSettings) -> EmbeddedQdrant:
        """The store at ``path`` with ``collection_name`` (``[mem0.vector_store.config]``)."""
        return cls(settings.path, settings.collection_name)

    @classmethod
    def for_layout(cls, root: Path, collection: str) -> EmbeddedQdrant:
        """A store reading the files at ``root`` (a capture's or a snapshot's ``qdrant/``)."""
        return cls(root, collection)

    @property
    def location(self) -> Path:
        """The embedded Qdrant directory (``vector_store.config.path``)."""
        return self._path

    @property
    def where(self) -> str:
        """The embedded Qdrant directory, for messages."""
        return str(self._path)

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

    def reach(self) -> None:
        """Nothing to reach: the directory is read where it is (``present``)."""

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

    def capture_names(self, collection: str) -> tuple[str, ...]:
        """``collection/<collection>/storage.sqlite``. See ``VectorStore.capture_names``."""
        return (storage_path(Path(), collection).as_posix(),)

    def read_collections(self) -> dict[str, CollectionInfo] | None:
        """The live ``meta.json``'s collections, or None when absent. See ``read_meta``."""
        return read_meta(self._path)

    def capture(
        self, dest: Path, *, vectors: bool = True, inventory: Path | None = None
    ) -> VectorCapture:
        """Copy ``meta.json`` then each ``storage.sqlite`` (memory collection first) into ``dest``.

        One ``VACUUM INTO`` per collection, ``vectors`` or not (a page copy costs the same).
        See ``VectorStore.capture``.
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
            source, copy = storage_path(self._path, name), storage_path(dest, name)
            if name in legacy:
                copies[name] = _capture_beside_legacy(source, copy)
            else:
                copies[name] = vacuum_into(source, copy)
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
                copies[name] = CopyResult.at_rest(storage, started_at, finished_at)
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

    def count_rows(self, capture: VectorCapture) -> dict[str, int]:
        """Rows of each copied ``storage.sqlite``. See ``VectorStore.count_rows``."""
        return {name: count_rows(copy.dest) for name, copy in sorted(capture.copies.items())}

    def read_points(
        self,
        capture: VectorCapture,
        keys: frozenset[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Point]:
        """The captured memory collection's points by id. See ``read_points``."""
        copy = capture.copies.get(self._collection)
        return read_points(copy.dest, keys, progress) if copy is not None else {}

    def points_in_order(
        self,
        capture: VectorCapture,
        keys: frozenset[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[Point]:
        """The captured memory collection's points by ascending id. See ``points_in_order``.

        qdrant-client's row keys are pickles of the id as spelt (``formats.decode_key``),
        so the file has no order by normalised id: a large collection is sorted through a
        temporary SQLite database, so memory stays flat in the number of points.
        """
        copy = capture.copies.get(self._collection)
        if copy is not None:
            yield from points_in_order(copy.dest, keys, progress)

    def read_entities(self, capture: VectorCapture) -> tuple[EntityLink, ...]:
        """The captured entity collection's links. See ``read_entities``."""
        copy = capture.copies.get(self.entities_collection)
        return read_entities(copy.dest) if copy is not None else ()

    def read_live_entities(self) -> tuple[EntityLink, ...]:
        """The live entity collection's links (read-only open of its storage.sqlite); () if none."""
        storage = storage_path(self._path, self.entities_collection)
        return read_entities(storage) if storage.is_file() else ()

    def iter_stored(
        self, capture: VectorCapture, collection: str
    ) -> Iterator[tuple[str, StoredPoint]]:
        """Stream a captured collection's current points with vectors. See ``iter_stored``."""
        copy = capture.copies.get(collection)
        if copy is None:
            return
        for point_id, payload, vector in iter_stored(copy.dest):
            dense = vector.get("") if isinstance(vector, dict) else vector
            yield (
                point_id,
                StoredPoint(
                    payload=payload, vector=list(dense) if isinstance(dense, list) else None
                ),
            )

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

    def compact(self) -> str:
        """VACUUM each live ``storage.sqlite`` (no route needed). See ``VectorStore.compact``."""
        for storage in sorted(self._path.glob(f"collection/*/{STORAGE_FILE}")):
            vacuum(storage)
        return "VACUUM"

    def erase_points(self, root: Path, point_ids: Sequence[str]) -> int:
        """Delete the points from every ``storage.sqlite`` under ``root`` and VACUUM each."""
        return sum(
            delete_points(storage, point_ids)
            for storage in sorted(root.glob(f"collection/*/{STORAGE_FILE}"))
        )

    def remove_store(self, *, dry_run: bool = False) -> int:
        """Remove the directory if it holds only a store. See ``VectorStore.remove_store``."""
        return remove_directory(self._path, dry_run=dry_run)

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
        """``integrity_check`` (or ``quick_check``) then a full decode of each copied collection.

        A copy this process captured (its source another file) is checked mapped
        (``sqlite_files.integrity``'s ``fresh``); a snapshot's file at rest with read calls.
        """
        verdicts = {}
        for name, copy in sorted(capture.copies.items()):
            fresh = copy.source != copy.dest
            try:
                verdict = sqlite_integrity(copy.dest, quick, fresh=fresh) if integrity else "ok"
                if verdict == "ok" and decode:
                    for _point in iter_points(copy.dest):
                        pass
            except UnavailableError as error:  # not openable at all, or a point undecodable
                verdict = error.message
            verdicts[str(storage_path(capture.root, name).relative_to(capture.root))] = verdict
        return verdicts

    # --- behind the port: what only a server backend does, nothing here ------------------------

    doctor_codes: tuple[str, ...] = ()  # its files' results are doctor's own codes
    container = "directory"
    capture_blocks_writers = True  # a capture reads SQLite files the app's writer waits for

    def local_dirs(self) -> tuple[LocalDir, ...]:
        """The store's directory (mem0's default: ``/tmp/qdrant``)."""
        return (
            LocalDir(
                "Qdrant directory", self._path, self, "Qdrant", Path(MEM0_DEFAULT_QDRANT_PATH)
            ),
        )

    def telemetry(self, path: Path) -> tuple[LocalDir, ...]:
        """mem0's telemetry Qdrant at ``path`` (collection ``mem0migrations``)."""
        store = EmbeddedQdrant(path, TELEMETRY_COLLECTION)
        return (LocalDir("mem0 telemetry Qdrant", path, store),)

    def sqlite_verdicts(self, capture: VectorCapture) -> list[tuple[Path, str]]:
        """Each collection's ``storage.sqlite`` and its copy's quick_check verdict."""
        return doctor.sqlite_verdicts(self, capture)

    def probe_capture(
        self, capture: VectorCapture, expected_dims: tuple[tuple[str, int], ...]
    ) -> list[DoctorResult]:
        """``legacy-point-store``, ``collection-params``, ``store-size`` (``doctor``)."""
        return doctor.probe_capture(self, capture, expected_dims)

    def probe_app_view(
        self, qdrant_client: str | None, found: Mapping[str, Any]
    ) -> list[DoctorResult]:
        """``store-meta`` and ``store-decode`` (``doctor.probe_app_view``)."""
        return doctor.probe_app_view(self.where, qdrant_client, found)

    def meta_file(self, source: str) -> QdrantMeta:
        """``<path>/meta.json``, judged by the app's qdrant-client (``meta.QdrantMeta``)."""
        del source
        return QdrantMeta()

    def probe_server(self, expected_dims: tuple[tuple[str, int], ...]) -> list[DoctorResult]:
        """[]: no server (doctor probes the files: ``store-meta``, ``sqlite-*``, ``lock``)."""
        del expected_dims
        return []

    def probe_set_aside(self) -> list[DoctorResult]:
        """[]: a restore's copies are directories beside the store, which doctor lists itself."""
        return []

    def erase_set_aside(self, point_ids: Sequence[str]) -> list[str]:
        """[]: a restore's copies are directories beside the store (``erase_points`` on each)."""
        del point_ids
        return []

    def set_aside_ids(self, scope: Mapping[str, str]) -> set[str]:
        """Ids of the scope's points in every collection of the ``<path>.pre-restore-*`` copies.

        A hot journal a killed app left, moved aside with its file, is rolled back first (no
        app opens a copy, and the erasure writes it next).
        """
        copies = sorted(self._path.parent.glob(f"{glob.escape(self._path.name)}.pre-restore-*"))
        files = [
            storage
            for copy in copies
            if copy.is_dir()
            for storage in sorted(copy.glob(f"collection/*/{STORAGE_FILE}"))
        ]
        for storage in files:
            roll_back_hot_journal(storage)
        return {
            point.id
            for storage in files
            for point in iter_points(storage)
            if all(point.payload.get(k) == v for k, v in scope.items())
        }

    def erase_old(self, point_ids: Sequence[str]) -> int:
        """Delete the points from this (old, not live) store's files; the rows removed.

        Raises:
            MemsyncError: the store is not there (moved or removed by hand).
        """
        if not self.present():
            raise MemsyncError(
                f"the old store {self.where} is not there (moved or removed by hand?): "
                "if it was moved, it still holds them"
            )
        self.prepare_for_writing()  # a hot journal a killed writer left
        return self.erase_points(self._path, point_ids)

    def describe_missing(self, present: bool) -> tuple[str, str, str | None]:
        """The collection (or the whole directory) is gone: a wiped /tmp, a wrong path."""
        where = "" if present else f" (there is no embedded Qdrant store at {self._path})"
        return (
            f"collection {self._collection!r} does not exist{where}",
            "a wrong path in the config, a wiped /tmp, a deleted directory",
            None,
        )

    def staging(self) -> None:
        """None: a restore moves the snapshot's files in place of the directory."""
        return None

    def refuse_dims(self, dims: int) -> tuple[str, str] | None:
        """None: embedded Qdrant takes vectors of any size."""
        del dims
        return None

    def captured_versions(self, capture: VectorCapture) -> dict[str, str | None]:
        """{}: the client's version is the app's (``manifest.versions`` has it already)."""
        del capture
        return {}
