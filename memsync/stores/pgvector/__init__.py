"""Postgres with pgvector, mem0's REST server layout: the ``VectorStore`` port over it.

mem0ai 2.2.1's pgvector provider keeps a collection in a table ``<collection_name>`` (``id UUID
PRIMARY KEY, vector vector(N), payload JSONB``, an HNSW or DiskANN index, a GIN index on
``payload->>'text_lemmatized'``) and its entity store in ``<collection_name>_entities``. A
capture is an export of both tables in one read-only transaction (``memsync.stores.pgvector.
export``): every reader of points reads the export's CSV files, never the live tables, exactly as
embedded Qdrant's readers read ``VACUUM INTO`` copies. PostgreSQL has no single-writer lock:
``holder`` is always None, and memsync's own ``mem0.Memory`` writes while the app serves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from memsync.config import PGVectorSettings
from memsync.errors import ConfigError, UnavailableError
from memsync.model import CollectionInfo, DoctorResult, EntityLink, Point
from memsync.stores.locks import LockHolder
from memsync.stores.pgvector import ddl, doctor, drop, export, load, rows
from memsync.stores.pgvector.connect import connect, first_line, locked, where
from memsync.stores.pgvector.staging import TableStaging
from memsync.stores.sqlite_files import CopyResult, in_id_order
from memsync.stores.vector_store import LocalDir, MetaFile, StoredPoint, VectorCapture

COMPACT_LOCK_TIMEOUT_S = 5
# pgvector's HNSW index takes vectors of at most 2,000 dimensions (pgvector 0.5 to 0.8, type
# vector); mem0 creates it at start (hnsw = true, its default) and fails when it cannot.
HNSW_MAX_DIMS = 2000


class PgVector:
    """The ``VectorStore`` port over mem0's pgvector tables (PostgreSQL 16, pgvector 0.6 tested).

    Built by ``memsync.stores.backends.backend_for``. Live reads use a read-only
    session; nothing here writes the live tables but ``compact`` (VACUUM FULL). Contracts, shapes and
    errors: see ``VectorStore``.
    """

    kind = "pgvector"
    label = "pgvector"
    mode = "pgvector"
    capture_dir = "pgvector"
    writes_alone = False  # the app writes on beside memsync's direct route
    doctor_codes = doctor.RESULT_CODES
    integrity_prefix = ""  # check_copy's verdicts say what failed themselves
    bytes_per_dimension = 8  # 4 bytes in the row and about as much again in its HNSW index
    index_file = export.SCHEMA_FILE

    def __init__(
        self, settings: PGVectorSettings, environ: Mapping[str, str] | None = None
    ) -> None:
        self._settings = settings
        self._environ = os.environ if environ is None else environ

    @classmethod
    def from_settings(cls, settings: PGVectorSettings) -> PgVector:
        """The tables ``[mem0.vector_store.config]`` names (secrets resolved when connecting)."""
        return cls(settings)

    @classmethod
    def for_layout(cls, root: Path, collection: str) -> PgVector:
        """A store reading a captured export (``<snapshot>/pgvector/``) of ``collection``."""
        del root  # an export's files are named by the store's capture_dir, under any root
        return cls(PGVectorSettings(collection_name=collection))

    @property
    def settings(self) -> PGVectorSettings:
        """The ``[mem0.vector_store.config]`` this store was built from (secrets unresolved)."""
        return self._settings

    @property
    def location(self) -> None:
        """None: the live store is a server, not files memsync can reach."""
        return None

    @property
    def where(self) -> str:
        """``postgresql://user@host:port/dbname table <collection>`` (never the password)."""
        return f"{where(self._settings, self._environ)} table {self.collection}"

    @property
    def collection(self) -> str:
        """mem0's memory table (``collection_name``)."""
        return self._settings.collection_name

    @property
    def entities_collection(self) -> str:
        """mem0's entity table (mem0ai 2.2.1: ``<collection_name>_entities``)."""
        return f"{self.collection}_entities"

    def connect(self, *, read_only: bool = True) -> Any:
        """A connection context (``memsync.stores.pgvector.connect.connect``) to this server."""
        return connect(self._settings, read_only=read_only, environ=self._environ)

    # --- the live store -----------------------------------------------------------------

    def present(self) -> bool:
        """Whether the memory table exists. Connects (read-only). Raises UnavailableError."""
        return bool(self.read_collections())

    def holds_data(self) -> bool:
        """Whether the memory table exists (a restore renames it aside, never over it)."""
        return self.present()

    def reach(self) -> None:
        """One connection, no table read. Raises as ``connect``."""
        with self.connect():
            pass

    def holder(self) -> LockHolder | None:
        """None: PostgreSQL allows many writers."""
        return None

    def lock_path(self) -> Path | None:
        """None: no lock file."""
        return None

    def require_free(self, what: str) -> None:
        """Return at once: PostgreSQL allows many writers."""

    def prepare_for_writing(self) -> None:
        """Nothing to roll back: PostgreSQL recovers its own transactions."""

    def collection_file(self, collection: str, root: Path | None = None) -> Path:
        """``<root>/<collection>.pgcopy`` in a capture that holds it, else ``<collection>.csv``.

        Root None: the bare name of a CSV export (a snapshot of memsync 0.2; a live table has
        no file). Reads only whether the binary file exists.
        """
        binary = Path(export.file_of(collection, binary=True))
        if root is not None and (root / binary).is_file():
            return root / binary
        name = Path(export.file_of(collection))
        return name if root is None else root / name

    def capture_names(self, collection: str) -> tuple[str, ...]:
        """``<collection>.pgcopy`` (binary, read by ``schema.json``'s columns: it too) or ``.csv``.

        See ``VectorStore.capture_names``.
        """
        binary, text = export.file_of(collection, binary=True), export.file_of(collection)
        return (binary, export.SCHEMA_FILE, text)

    def read_collections(self) -> dict[str, CollectionInfo] | None:
        """The live memory and entity tables that exist, as collections; None when neither does.

        Raises:
            UnavailableError: the server cannot be reached or refuses the catalog reads.
        """
        import psycopg

        with self.connect() as connection:
            try:
                with connection.cursor() as cursor:
                    shapes = {
                        name: export.describe_table(cursor, name)
                        for name in (self.collection, self.entities_collection)
                    }
            except psycopg.errors.LockNotAvailable:
                raise locked(connection, self.collection, "reading the catalog") from None
            except psycopg.Error as error:
                raise UnavailableError(
                    f"reading the catalog of {self.where} failed: {first_line(error)}"
                ) from None
        found = {name: shape for name, shape in shapes.items() if shape is not None}
        if not found:
            return None
        document = {
            "tables": {name: {**shape, "rows": 0, "file": ""} for name, shape in found.items()}
        }
        return export.collections_of(document)

    def legacy_files(self) -> dict[str, tuple[str, ...]]:
        """{}: pgvector has no legacy point store."""
        return {}

    # --- capture ------------------------------------------------------------------------

    def capture(
        self, dest: Path, *, vectors: bool = True, inventory: Path | None = None
    ) -> VectorCapture:
        """Export the memory table, then the entity table, into ``dest`` in one transaction.

        See ``export.export`` (``vectors=False``: each row's vector size, not its values;
        ``inventory``: the memory table exported that way too, in id order, in the same
        transaction, which ``points_in_order`` then reads); an absent memory table gives
        ``present=False`` (the entity table alone is still exported).
        """
        with self.connect() as connection:
            document, copies = export.export(
                connection,
                [self.collection, self.entities_collection],
                dest,
                vectors=vectors,
                inventory=(inventory, self.collection)
                if inventory is not None and vectors
                else None,
            )
        return VectorCapture(
            root=dest,
            present=self.collection in copies,
            collections=export.collections_of(document),
            copies=copies,
            inventory=inventory if inventory is not None and vectors else None,
        )

    def open_capture(
        self, root: Path, started_at: datetime, finished_at: datetime
    ) -> VectorCapture:
        """Describe the export at ``root`` (``schema.json`` read). See ``VectorStore.open_capture``."""
        document = export.read_schema(root)
        if document is None:
            return VectorCapture(root=root, present=False, collections={}, copies={})
        copies = {}
        for name, table in document["tables"].items():
            path = root / table["file"]
            if path.is_file():
                source = Path(str(table.get("qualified", name)))
                copies[name] = CopyResult.at_rest(path, started_at, finished_at, source)
        return VectorCapture(
            root=root,
            present=self.collection in document["tables"],
            collections=export.collections_of(document),
            copies=copies,
        )

    # --- inventory ----------------------------------------------------------------------

    def iter_points(self, capture: VectorCapture, collection: str) -> Iterator[Point]:
        """Stream an exported table's rows as points. See ``rows.iter_points``."""
        copy = capture.copies.get(collection)
        if copy is not None:
            yield from rows.iter_points(copy.dest)

    def count_rows(self, capture: VectorCapture) -> dict[str, int]:
        """Rows the export wrote of each table (its ``schema.json``). See ``VectorStore.count_rows``."""
        return {name: _exported_rows(capture.root, name) for name in sorted(capture.copies)}

    def read_points(
        self,
        capture: VectorCapture,
        keys: frozenset[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Point]:
        """The exported memory table's points by id (payloads cut to ``keys``)."""
        return {point.id: point for point in self._stream(capture, keys, progress)}

    def points_in_order(
        self,
        capture: VectorCapture,
        keys: frozenset[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[Point]:
        """The exported memory table's points by ascending id.

        An inventory export is written ``ORDER BY`` the id (``schema.json``'s ``"order": "id"``,
        see ``export``): streamed, one row in memory at a time; so is a snapshot's capture that
        wrote one beside it (``capture.inventory``), whose rows it reads instead of the full ones. Any other export (a snapshot's)
        is sorted through a temporary SQLite database (``sqlite_files.in_id_order``; of two
        rows of one id, the later wins, as ``read_points``), so memory stays flat too.
        """
        copy = capture.copies.get(self.collection)
        if copy is None:
            return
        if capture.inventory is not None:  # the same rows, ordered, without the vectors
            side = VectorCapture(
                root=capture.inventory,
                present=True,
                collections=capture.collections,
                copies={
                    self.collection: replace(
                        copy, dest=capture.inventory / export.file_of(self.collection)
                    )
                },
            )
            yield from self._stream(side, keys, progress)
            return
        document = export.read_schema(capture.root) or {"tables": {}}
        if document["tables"].get(self.collection, {}).get("order") == "id":
            yield from self._stream(capture, keys, progress)
            return
        stream = self._stream(capture, keys, progress)
        yield from in_id_order((point, row) for row, point in enumerate(stream))

    def _stream(
        self,
        capture: VectorCapture,
        keys: frozenset[str] | None,
        progress: Callable[[int, int], None] | None,
    ) -> Iterator[Point]:
        """The memory table's export file row by row (none without one), reporting progress."""
        copy = capture.copies.get(self.collection)
        if copy is None:
            return
        total = _exported_rows(capture.root, self.collection)
        read = 0
        for point in rows.iter_points(copy.dest, keys):
            yield point
            read += 1
            if progress is not None and read % 10_000 == 0:
                progress(read, total)
        if progress is not None:
            progress(read, max(total, read))

    def read_entities(self, capture: VectorCapture) -> tuple[EntityLink, ...]:
        """The exported entity table's links. See ``rows.read_entities``."""
        copy = capture.copies.get(self.entities_collection)
        return rows.read_entities(copy.dest) if copy is not None else ()

    def read_live_entities(self) -> tuple[EntityLink, ...]:
        """The live entity table's links, read in one query; () when the table is absent."""
        import psycopg
        from psycopg import sql

        links = []
        with self.connect() as connection:
            try:
                with connection.cursor() as cursor:
                    if export.describe_table(cursor, self.entities_collection) is None:
                        return ()
                    query = sql.SQL("SELECT id::text, payload FROM {}").format(
                        sql.Identifier(self.entities_collection)
                    )
                    links = [rows.entity_link(i, p) for i, p in cursor.execute(query)]
            except psycopg.errors.LockNotAvailable:
                raise locked(connection, self.entities_collection, "reading") from None
            except psycopg.Error as error:
                raise UnavailableError(
                    f"reading {self.entities_collection} on {self.where} failed: {first_line(error)}"
                ) from None
        return tuple(sorted(links, key=lambda link: link.entity_id))

    def iter_stored(
        self, capture: VectorCapture, collection: str
    ) -> Iterator[tuple[str, StoredPoint]]:
        """Stream an exported table's rows with payloads and vectors. See ``rows.iter_stored``."""
        copy = capture.copies.get(collection)
        if copy is not None:
            yield from rows.iter_stored(copy.dest)

    def find_point(self, root: Path, collection: str, point_id: str) -> StoredPoint | None:
        """One row of the export at ``root`` with its vector; None when absent."""
        path = self.collection_file(collection, root)
        return rows.find_point(path, point_id) if path.is_file() else None

    # --- erasure ------------------------------------------------------------------------

    def compact(self) -> str:
        """Rewrite both live tables so no file keeps a deleted row (erase, after its deletes).

        ``VACUUM FULL`` of each table (its heap, TOAST and indexes, mem0's text index included,
        go to new files): it holds an ACCESS EXCLUSIVE lock for the rewrite (milliseconds for
        thousands of rows), so the app's statements wait, never fail. The lock is waited for at
        most ``COMPACT_LOCK_TIMEOUT_S``: a table busy longer (a long transaction) gets a plain
        ``VACUUM`` (no lock the app waits for), and the answer says its erased rows' bytes
        remain until a ``VACUUM FULL``. WAL archives and base backups made outside memsync still
        hold the deleted rows. Writes the live tables. Idempotent.

        Returns:
            what was done, for the erasure's report (``"VACUUM FULL"`` or the partial outcome).

        Raises:
            UnavailableError: a VACUUM fails (the role does not own the tables).
        """
        import psycopg
        from psycopg import sql

        busy: list[str] = []
        with self.connect(read_only=False) as connection:
            connection.autocommit = True  # VACUUM cannot run inside a transaction block
            try:
                connection.execute(f"SET lock_timeout = '{COMPACT_LOCK_TIMEOUT_S}s'")
                for table in (self.collection, self.entities_collection):
                    with connection.cursor() as cursor:
                        if export.describe_table(cursor, table) is None:
                            continue
                        name = sql.Identifier(table)
                        try:
                            cursor.execute(sql.SQL("VACUUM FULL {}").format(name))
                        except psycopg.errors.LockNotAvailable:
                            busy.append(table)
                            cursor.execute(sql.SQL("VACUUM {}").format(name))
            except psycopg.Error as error:
                raise UnavailableError(
                    f"VACUUM of {self.where} failed: {first_line(error)}",
                    "the role needs to own the tables (or be a superuser) to VACUUM them",
                ) from None
        if not busy:
            return "VACUUM FULL"
        return (
            f"plain VACUUM of {', '.join(busy)}: locked by another session for "
            f"{COMPACT_LOCK_TIMEOUT_S} s; the erased rows' bytes stay in its files until "
            f"VACUUM FULL {', '.join(busy)} runs (by hand, as the tables' owner, once the lock "
            "is free: psql -c 'VACUUM FULL ...')"
        )

    def erase_points(self, root: Path, point_ids: Sequence[str]) -> int:
        """Remove the rows from every export file under ``root`` (atomic rewrites); rows removed.

        ``schema.json``'s row counts follow. Idempotent.
        """
        document = export.read_schema(root)
        if document is None:
            return 0
        removed = 0
        for table in document["tables"].values():
            path = root / table["file"]
            if path.is_file():
                gone, left = rows.remove_rows(path, point_ids)
                if gone:
                    removed += gone
                    table["rows"] = left
                    table["file_bytes"] = path.stat().st_size
        if removed:
            export.write_schema(root, document)
        return removed

    # --- snapshot and restore -----------------------------------------------------------

    def remove_store(self, *, dry_run: bool = False) -> int:
        """DROP both tables in one transaction. See ``VectorStore.remove_store``."""
        tables = (self.collection, self.entities_collection)
        return drop.drop_tables(self.connect, tables, self.where, dry_run=dry_run)

    def files(self, root: Path) -> list[str]:
        """``schema.json`` and each exported table's file under ``root``, sorted after it."""
        document = export.read_schema(root)
        if document is None:
            return []
        stored = sorted(
            t["file"] for t in document["tables"].values() if (root / t["file"]).is_file()
        )
        return [export.SCHEMA_FILE, *stored]

    def check_copy(
        self,
        capture: VectorCapture,
        quick: bool = False,
        *,
        integrity: bool = True,
        decode: bool = True,
    ) -> dict[str, str]:
        """Per export file: its rows counted against ``schema.json`` (integrity), then decoded.

        ``quick`` is the same check (a CSV has no cheaper one). Never raises for a damaged copy.
        A capture this process just exported with its inventory beside it (``capture.inventory``:
        snapshot create's) is not counted again: its memory table's file holds every byte the
        export wrote (its size) of the rows the server counted, which the inventory export of
        the same transaction counted too.
        """
        verdicts = {}
        try:
            document = export.read_schema(capture.root) or {"tables": {}}
        except UnavailableError as error:
            return {export.SCHEMA_FILE: error.message}
        for name, table in sorted(document["tables"].items()):
            missing = name not in capture.copies and not (capture.root / table["file"]).is_file()
            if integrity and missing:  # a capture of some files only is checked on those
                verdicts[str(table["file"])] = (
                    f"pgvector export {table['file']} is missing: schema.json lists it"
                )
            elif integrity and (why := ddl.problem(name, table)) is not None:
                verdicts[export.SCHEMA_FILE] = why
        for name, copy in sorted(capture.copies.items()):
            shape = document["tables"].get(name, {})
            expected = shape.get("rows")
            try:
                verdict = "ok"
                if integrity:
                    verdict = rows.header_verdict(
                        copy.dest, shape.get("columns"), vectors=shape.get("vectors") is not False
                    )
                if integrity and verdict == "ok" and _as_exported(capture, name, copy):
                    pass  # the rows the server sent, every byte of them on disk: not re-read
                elif integrity and verdict == "ok":
                    found, last = rows.count_rows(copy.dest)
                    if expected is not None and found != expected:
                        verdict = (
                            f"pgvector export {copy.dest.name} ends at {last} after "
                            f"{found} rows, but the export recorded {expected}: the file is "
                            "truncated or altered"
                        )
                if verdict == "ok" and decode:
                    for _point in rows.iter_points(copy.dest, dimension=_declared_dims(shape)):
                        pass
            except UnavailableError as error:
                verdict = error.message
            verdicts[copy.dest.name] = verdict
        return verdicts

    # --- behind the port: what only this backend does --------------------------------------

    def probe_server(self, expected_dims: tuple[tuple[str, int], ...]) -> list[DoctorResult]:
        """Doctor's ``pg-*`` results for the server (``doctor.probe_pgvector``); never raises."""
        return doctor.probe_pgvector(self._settings, expected_dims)

    container = "table"
    capture_blocks_writers = False  # its export runs in a transaction no writer waits for

    def local_dirs(self) -> tuple[LocalDir, ...]:
        """(): the server keeps the tables; no directory of it is on this machine."""
        return ()

    def telemetry(self, path: Path) -> tuple[LocalDir, ...]:
        """(): mem0 keeps its telemetry in a table on the server."""
        del path
        return ()

    def sqlite_verdicts(self, capture: VectorCapture) -> list[tuple[Path, str]]:
        """[]: no SQLite file (``probe_server`` reads the tables)."""
        del capture
        return []

    def probe_capture(
        self, capture: VectorCapture, expected_dims: tuple[tuple[str, int], ...]
    ) -> list[DoctorResult]:
        """[]: ``probe_server`` reads the tables' sizes and dimensions on the server."""
        del capture, expected_dims
        return []

    def probe_app_view(
        self, qdrant_client: str | None, found: Mapping[str, Any]
    ) -> list[DoctorResult]:
        """[]: the app's client reads no file of this store."""
        del qdrant_client, found
        return []

    def meta_file(self, source: str) -> MetaFile:
        """Never: a server store has no meta.json (``repair-meta`` refuses, exit 10)."""
        raise ConfigError(
            source, ["mem0.vector_store: repair-meta is for embedded Qdrant (a path)"]
        )

    def probe_set_aside(self) -> list[DoctorResult]:
        """A ``pre-restore-copy`` (ok) per ``<table>_pre_restore_*`` table; [] unreachable."""
        tables = [self.collection, self.entities_collection]
        return doctor.probe_pre_restore_tables(self.connect, tables, self.where)

    def erase_set_aside(self, point_ids: Sequence[str]) -> list[str]:
        """Erase the points from the tables a restore moved aside (rows deleted, VACUUM FULL).

        Returns the tables rewritten (``load.erase_pre_restore``).
        """
        tables = [self.collection, self.entities_collection]
        return load.erase_pre_restore(self.connect, tables, point_ids)

    def set_aside_ids(self, scope: Mapping[str, str]) -> set[str]:
        """Ids of the scope's rows in the tables a restore moved aside (``<table>_pre_restore_*``)."""
        tables = [self.collection, self.entities_collection]
        return load.pre_restore_scope_ids(self.connect, tables, scope)

    def erase_old(self, point_ids: Sequence[str]) -> int:
        """Delete the points from this (old, not live) store's tables; the rows removed."""
        with self.connect(read_only=False) as connection:
            return sum(
                load.erase_rows(connection, table, point_ids)
                for table in (self.collection, self.entities_collection)
                if load.exists(connection, table)
            )

    def describe_missing(self, present: bool) -> tuple[str, str, str | None]:
        """mem0's table is gone: a DROP, a restore elsewhere, a wrong database."""
        del present
        return (
            f"table {self.collection!r} does not exist on {self.where}",
            "dropped, restored into another database, or a wrong dbname/collection_name",
            self.where,
        )

    def staging(self) -> TableStaging:
        """The restore staged beside the live tables and swapped by renames (``staging``)."""
        return TableStaging(self)

    def refuse_dims(self, dims: int) -> tuple[str, str] | None:
        """Why mem0 could not create this table with ``dims``-dimension vectors; None if it can.

        An HNSW index (``hnsw = true``) takes at most ``HNSW_MAX_DIMS`` dimensions: mem0
        would fail to create it at every start of the app.
        """
        if not self._settings.hnsw or dims <= HNSW_MAX_DIMS:
            return None
        return (
            f"the new config's pgvector table takes {dims}-dimension vectors with an "
            f"HNSW index (hnsw = true), and pgvector's HNSW index takes at most "
            f"{HNSW_MAX_DIMS}: mem0 would fail to create it at every start of the app",
            f"use an embedder of at most {HNSW_MAX_DIMS} dimensions (many models can "
            "shorten theirs, e.g. OpenAI's text-embedding-3 `dimensions`), or set hnsw = false "
            "in [mem0.vector_store.config] (every search then scans the table)",
        )

    def captured_versions(self, capture: VectorCapture) -> dict[str, str | None]:
        """The server's versions the export recorded (a manifest's ``versions``: ``postgresql``, ``pgvector``)."""
        return export.pgvector_versions(capture.root)


def _declared_dims(shape: dict[str, Any]) -> int | None:
    """N of the ``vector(N)`` column ``schema.json`` declares (what a restore creates). Pure."""
    for column in shape.get("columns") or []:
        if isinstance(column, dict) and column.get("name") == "vector":
            return export.declared_dimension(str(column.get("type", "")))
    return None


def _as_exported(capture: VectorCapture, name: str, copy: CopyResult) -> bool:
    """Whether ``copy`` is a fresh export's memory table file, whole (see ``check_copy``)."""
    if capture.inventory is None or copy.dest.parent != capture.root:
        return False
    try:
        side = export.read_schema(capture.inventory) or {"tables": {}}
        size = copy.dest.stat().st_size
    except (OSError, UnavailableError):
        return False
    return name in side["tables"] and size == copy.size_bytes


def _exported_rows(root: Path, table: str) -> int:
    try:
        document = export.read_schema(root) or {"tables": {}}
    except UnavailableError:
        return 0
    rows_ = document["tables"].get(table, {}).get("rows")
    return rows_ if isinstance(rows_, int) else 0


BACKEND = PgVector
