"""The vector-store port: everything memsync's operations need from a vector store.

capture, inventory, snapshot, restore, reconcile and doctor reach the vector store only
through ``VectorStore``; ``memsync.stores.backends.backend_for`` builds the one the config
names (embedded Qdrant's qdrant-client 1.20 files, or Postgres with pgvector, whose captures
are CSV exports read the same way), once per command (``memsync.deployment.Deployment.open``).
This module imports no backend.

Vocabulary:
    live store: the files (or server) the app writes through mem0; ``location`` names it.
    capture: a consistent copy of the live store's files, made by ``capture`` into a
        directory memsync owns (a work directory, or a snapshot being built); everything that
        reads points reads a capture, never the live store.
    collection: mem0's memory collection (``config.collection``) or its entity collection
        (``<collection>_entities``, mem0ai 2.2.1), or any other the store holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from memsync.errors import UnavailableError
from memsync.model import CollectionInfo, DoctorResult, EntityLink, Point
from memsync.stores.locks import LockHolder
from memsync.stores.sqlite_files import CopyResult

TELEMETRY_COLLECTION = "mem0migrations"  # mem0ai 2.2.1, mem0/memory/main.py
LEGACY_STORE_FIX = (
    "stop the app and migrate the legacy point store first "
    "(docs/reference/findings.md#legacy-point-store); until then nothing may be deleted"
)


def refuse_legacy_store(legacy: Mapping[str, tuple[str, ...]], what: str) -> None:
    """Raise UnavailableError (exit 11) while ``legacy`` names a legacy point store. Pure.

    ``legacy``: ``VectorCapture.legacy_files`` (or ``Inventory.legacy_stores``). Its points are
    invisible to mem0, not lost: a delete, a forget, an erasure or a snapshot taken now would
    be judged against the points mem0 sees and be wrong about the others.
    """
    if legacy:
        listed = "; ".join(f"{name}: {', '.join(files)}" for name, files in sorted(legacy.items()))
        raise UnavailableError(
            f"{what}: the vector store keeps a legacy point store its client no longer reads "
            f"({listed}); its points are invisible to mem0, not lost",
            LEGACY_STORE_FIX,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class VectorCapture:
    """A capture of a vector store under ``root`` (or an existing captured layout).

    Attributes:
        root: the capture's vector-store directory (``<capture>/<VectorStore.capture_dir>``).
        present: the live store existed when captured (embedded Qdrant: it had a meta.json).
        collections: every collection's parameters, by name (empty when not present).
        copies: each copied collection's copy result (source, dest, UTC instants, seconds,
            bytes), by name; a collection listed without a copy had no file to copy.
        legacy_files: the store's files of a legacy point store the backend's library no longer
            reads, by collection (paths relative to the store's directory; embedded Qdrant:
            ``storage.dbm*`` of qdrant-client < 1.1.7). Never copied; while any is there the
            captured points are not all of the collection's points.
        inventory: an inventory-only export of the same instant beside the copy, which the
            judge reads instead of the copy (pgvector: ``capture(inventory=...)``); None: none.
    """

    root: Path
    present: bool
    collections: dict[str, CollectionInfo]
    copies: dict[str, CopyResult]
    legacy_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    inventory: Path | None = None


@dataclass(frozen=True, slots=True)
class LocalDir:
    """A directory a live store keeps on this machine, as doctor names and probes it.

    Attributes:
        label: its name in messages (``"Qdrant directory"``).
        path: the directory.
        store: the store it holds (doctor reads its ``holder``, ``lock_path`` and ``files``).
        files_label: each file's name in messages, before the file's (``"Qdrant"``).
        mem0_default: where mem0 puts it when the config names no path (an old copy may stay
            there after a move), or None.
    """

    label: str
    path: Path
    store: VectorStore
    files_label: str = ""
    mem0_default: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredPoint:
    """One point as stored, with its vector: what ``put_back`` writes again.

    Attributes:
        payload: the whole stored payload (mem0's keys and the app's metadata).
        vector: the dense vector (floats), or None when the point has none.
    """

    payload: dict[str, Any]
    vector: list[float] | None


class StagedRestore(Protocol):
    """A restore a server store stages and swaps itself (pgvector: tables beside the live ones).

    Tables (or whatever the server keeps a collection in) are described by dicts, as the
    restore journal records them: ``live``, ``staged`` (None: the snapshot has none),
    ``aside``, ``had_live``, ``indexes``. ``memsync.restore.pgvector`` runs the steps.
    """

    def require_ready(self) -> None:
        """Refuse (exit 11) a server that cannot take the restore (no vector extension)."""
        ...

    def plan(self, snapshot_id: str) -> list[dict[str, Any]]:
        """The collections of a restore with their live, staged and aside names. Pure."""
        ...

    def with_catalog(self, tables: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Which live ones exist, and aside names nothing has. Reads only."""
        ...

    def captured_tables(self, root: Path) -> dict[str, Any]:
        """The collections a capture at ``root`` holds, by live name. Reads only."""
        ...

    def load(self, root: Path, tables: list[dict[str, Any]]) -> None:
        """Load each staged one from the capture at ``root`` (sets ``indexes``)."""
        ...

    def swap(self, tables: list[dict[str, Any]]) -> None:
        """In one transaction: each live one aside, each staged one into place."""
        ...

    def drop_staged(self, staged: list[str]) -> None:
        """Drop memsync's own staged ones (a rollback). Idempotent."""
        ...

    def swapped(self, tables: list[dict[str, Any]]) -> bool:
        """Whether the swap committed. Reads only."""
        ...

    def written_after(self, moment: datetime) -> tuple[str, str] | None:
        """The memory written last after ``moment`` (its memory_id and mem0's stamp), if any.

        A server recovered to a point in time holds none. Reads only.
        """
        ...


class MetaFile(Protocol):
    """A store's metadata file as the app's own client judges it (``repair-meta``).

    ``found``: ``stores.app_process.app_meta``'s answer, from the app's interpreter.
    """

    def refused(self, found: Mapping[str, Any]) -> dict[str, list[str]]:
        """The keys the app's client refuses, by collection. Pure."""
        ...

    def require_repairable(self, found: Mapping[str, Any], client: str | None) -> None:
        """Return when every refused key can be dropped (unset); ``client``: its version.

        Raises:
            UnavailableError: (exit 11) a refused key has a value (named), or another problem.
        """
        ...


@runtime_checkable
class CaptureReader(Protocol):
    """What reading a capture of a vector store needs: a capture's (or a snapshot's) files.

    Methods here never touch the live store, take no lock, and accept any captured layout the
    backend wrote (a fresh capture, or a snapshot's plaintext files); ``erase_points`` rewrites
    such a copy. Every error is a ``memsync.errors`` one.
    """

    @property
    def kind(self) -> str:
        """The backend's name for messages and manifests (``"embedded-qdrant"``)."""
        ...

    @property
    def label(self) -> str:
        """The backend's name in messages (``"embedded Qdrant"``, ``"pgvector"``)."""
        ...

    @property
    def integrity_prefix(self) -> str:
        """What a ``check_copy`` verdict is prefixed with in a finding (``"PRAGMA integrity_check: "``)."""
        ...

    @property
    def writes_alone(self) -> bool:
        """Whether a writer that opened the store keeps every other process from writing it.

        Embedded Qdrant: True (one process at a time, its ``.lock``: memsync's direct route runs
        only while the app is stopped). A server: False (the app writes on beside memsync).
        """
        ...

    @property
    def capture_dir(self) -> str:
        """The subdirectory of a capture (and of a snapshot) that holds this store's copy (``"qdrant"``)."""
        ...

    @property
    def index_file(self) -> str:
        """The file of a capture (relative to its root) that lists its collections (``"meta.json"``).

        ``open_capture`` and ``files`` read it before any other, so ``snapshot verify`` opens a
        snapshot's vector copy only after this file passed its checksum.
        """
        ...

    @property
    def collection(self) -> str:
        """mem0's memory collection (``vector_store.config.collection_name``)."""
        ...

    @property
    def entities_collection(self) -> str:
        """mem0's entity collection (``<collection>_entities``, mem0ai 2.2.1)."""
        ...

    def collection_file(self, collection: str, root: Path | None = None) -> Path:
        """The file holding ``collection`` under ``root`` (default: the live ``location``). Pure.

        For messages (doctor names live files) and for reading a captured layout.
        """
        ...

    def capture_names(self, collection: str) -> tuple[str, ...]:
        """The files of a capture that reading ``collection`` needs, relative to the capture. Pure.

        Under every name each may have; for choosing among a manifest's files before the
        capture is at hand.
        """
        ...

    def open_capture(
        self, root: Path, started_at: datetime, finished_at: datetime
    ) -> VectorCapture:
        """Describe an existing captured layout at ``root`` (a snapshot's plaintext files).

        Each copy's instants are the given UTC ones, its duration 0 s. Reads the metadata only.

        Raises:
            UnavailableError: the metadata is unreadable or not valid.
        """
        ...

    def iter_points(self, capture: VectorCapture, collection: str) -> Iterator[Point]:
        """Yield every current point of a captured collection (none when it has no copy).

        A point is one id as the backend's client identifies it, with its current copy
        (embedded Qdrant: UUID spellings and row keys normalised, the newest row wins, as
        qdrant-client 1.20's ``load``); every reader of points (check, snapshot, verify,
        forget, erase) sees the same points. Streams (one decoded point in memory at a time); the vector is dropped, its size kept.
        Reads only.

        Raises:
            UnavailableError: the copy is damaged or a point does not decode (the message
                names the file and the row).
        """
        ...

    def count_rows(self, capture: VectorCapture) -> dict[str, int]:
        """The rows each copied collection holds, by collection name, without decoding any.

        A cheap size of the store (doctor's ``store-size``): embedded Qdrant counts the rows of
        each ``storage.sqlite`` (one per point, or a few more when an older client left several
        rows for one point: the rows qdrant-client loads on open); pgvector the rows its
        export wrote. Reads only.

        Raises:
            UnavailableError: a copy cannot be opened.
        """
        ...

    def read_points(
        self,
        capture: VectorCapture,
        keys: frozenset[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Point]:
        """Read every current point of the captured memory collection, by id ({} without a copy).

        Args:
            capture: a capture of this store.
            keys: keep only these payload keys (None: the whole payload).
            progress: called as ``progress(points_read, points_total)`` now and then and at the end.

        Raises:
            UnavailableError: as ``iter_points``.
        """
        ...

    def points_in_order(
        self,
        capture: VectorCapture,
        keys: frozenset[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[Point]:
        """Yield ``read_points``'s points in ascending id order (Python ``str`` order of the id).

        The order a streaming check merges with history's (``history.iter_memories``). A backend
        whose capture is already in that order streams it (pgvector's inventory export: one row
        in memory at a time); embedded Qdrant sorts a large collection through a temporary
        SQLite database (``qdrant_embedded.rows.points_in_order``). Memory stays flat in the number of
        points. Reads only.

        Raises:
            UnavailableError: as ``iter_points``.
        """
        ...

    def read_entities(self, capture: VectorCapture) -> tuple[EntityLink, ...]:
        """Read mem0's entity links from the captured entity collection, sorted by entity id.

        Empty when the entity collection has no copy. ``linked_memory_ids`` keep their order.

        Raises:
            UnavailableError: as ``iter_points``.
        """
        ...

    def iter_stored(
        self, capture: VectorCapture, collection: str
    ) -> Iterator[tuple[str, StoredPoint]]:
        """Yield ``(point_id, StoredPoint)`` for every current point of a captured collection.

        The same points as ``iter_points`` (same ids, same current copy), with the whole
        payload and the dense vector (floats), for a migration that writes them elsewhere.
        Streams (one point in memory at a time); none when the collection has no copy. Reads
        only.

        Raises:
            UnavailableError: as ``iter_points``; also for a capture made with
                ``vectors=False`` where the store left the vectors out (pgvector).
        """
        ...

    def find_point(self, root: Path, collection: str, point_id: str) -> StoredPoint | None:
        """Return one point of a captured layout at ``root`` with its vector, or None when absent.

        ``point_id`` in any spelling the client accepts; the point's current copy, as
        ``iter_points`` reads it. Used to put a lost point back from a snapshot. Reads only.

        Raises:
            UnavailableError: the copy is unreadable or the point does not decode.
        """
        ...

    def erase_points(self, root: Path, point_ids: Sequence[str]) -> int:
        """Remove points from a copy at ``root`` (a pre-restore copy, a snapshot being rewritten).

        Every collection of the copy loses the points, every stored copy of them (embedded
        Qdrant: each UUID spelling and key pickle protocol), and its files are rewritten so no
        free page keeps them. Never for the live store (that changes through mem0). Returns the
        stored rows removed (0 when none was there). Idempotent.

        Raises:
            TryLaterError, UnavailableError: a file is busy or cannot be written.
        """
        ...

    def captured_versions(self, capture: VectorCapture) -> dict[str, str | None]:
        """Versions a capture recorded for a snapshot's manifest (``versions``); {} if none."""
        ...

    def files(self, root: Path) -> list[str]:
        """The store's files under ``root`` (live location or a capture), relative to it, sorted.

        Restore puts exactly these back; snapshot lists them in its manifest (under
        ``capture_dir``). Embedded Qdrant: ``meta.json`` and each existing
        ``collection/<name>/storage.sqlite``. Reads only.

        Raises:
            UnavailableError: the metadata is unreadable or not valid.
        """
        ...

    def check_copy(
        self,
        capture: VectorCapture,
        quick: bool = False,
        *,
        integrity: bool = True,
        decode: bool = True,
    ) -> dict[str, str]:
        """Check a captured copy's integrity and that every point decodes.

        Returns one verdict per copied collection file (``capture.copies``; keys relative to
        ``capture.root``, as ``files``): ``"ok"``, or the problem (``PRAGMA integrity_check``'s
        text, or the undecodable point's message). A file that fails its integrity check is not
        decoded; a file that cannot be opened at all gets the reason as its verdict. Never
        raises for a damaged copy. Reads only. To check only some files, pass a capture whose
        ``copies`` hold only those (``dataclasses.replace``).

        Args:
            capture: a capture of this store.
            quick: a quick check (``quick_check``) instead of a full one.
            integrity: run the integrity check (False: only decode, for files already checked).
            decode: decode every point (False: only the integrity check, as doctor and
                ``snapshot create`` want; the points are read afterwards anyway).
        """
        ...


@runtime_checkable
class LiveStore(Protocol):
    """What a live vector store does: presence, its holder, capture, erasure, restore, probes.

    Bound to one deployment's live store and its two collections. Every error is a
    ``memsync.errors`` one: library and SQLite exceptions never leave an implementation.
    """

    @property
    def mode(self) -> str:
        """A snapshot manifest's ``mode`` for this backend (``"embedded"``, ``"pgvector"``)."""
        ...

    @property
    def bytes_per_dimension(self) -> int:
        """What one vector dimension takes in this store, in bytes (an estimate, for plans)."""
        ...

    @property
    def location(self) -> Path | None:
        """The live store's directory (embedded Qdrant: ``vector_store.config.path``).

        None for a server backend (pgvector): it has no files memsync reaches; code that moves,
        probes or copies the live store's files applies to embedded stores only.
        """
        ...

    @property
    def where(self) -> str:
        """Where the live store is, for messages: a directory, or a server and table (no secret)."""
        ...

    def present(self) -> bool:
        """Tell whether the live store exists (embedded Qdrant: ``meta.json`` is there).

        A dangling link counts as present (and then fails to read). Reads only.

        Raises:
            UnavailableError: the location is unreachable (permissions).
        """
        ...

    def holds_data(self) -> bool:
        """Tell whether the live location holds anything a restore would replace.

        Embedded Qdrant: any entry in its directory but the ``.lock`` (a store without its
        ``meta.json`` counts: restore moves it aside rather than over it). Reads only.
        """
        ...

    def reach(self) -> None:
        """Return when the live store can be reached at all; reads nothing of it.

        A server backend connects once (no table is read, so a lock on one does not wait);
        embedded Qdrant has nothing to reach.

        Raises:
            UnavailableError: the server cannot be reached.
            ConfigError: its settings cannot be resolved (a secret's variable unset).
        """
        ...

    def holder(self) -> LockHolder | None:
        """Return the process holding the live store (the app, through mem0), or None.

        Embedded Qdrant allows one process at a time (its ``.lock``); a server backend holds
        nothing and returns None. Reads /proc; never takes the lock, not even to probe.
        """
        ...

    def lock_path(self) -> Path | None:
        """The lock file a writer holds (embedded Qdrant: ``<location>/.lock``); None if none."""
        ...

    def require_free(self, what: str) -> None:
        """Return when a direct write (through mem0 or memsync) is possible now.

        Args:
            what: the operation, for the message (``"forget"``).

        Raises:
            LockedError: (exit 12) another process holds the store; the message names it.
        """
        ...

    def prepare_for_writing(self) -> None:
        """Undo what a crashed writer left half-done before memsync writes (hot journals).

        Only writing commands call it (read-only copies cannot roll a journal back).
        Writes the live store (rollback only). Idempotent.

        Raises:
            TryLaterError: a file is busy; UnavailableError: a file is unreadable.
        """
        ...

    def read_collections(self) -> dict[str, CollectionInfo] | None:
        """Read the live store's collections and their vector parameters; None when absent.

        Reads only (no lock).

        Raises:
            UnavailableError: the metadata exists but is unreadable or not valid.
        """
        ...

    def capture(
        self, dest: Path, *, vectors: bool = True, inventory: Path | None = None
    ) -> VectorCapture:
        """Copy the live store into ``dest`` consistently, while the app may be writing.

        ``vectors=False``: the copy is read as an inventory only (points, payloads, vector
        sizes), so a store may leave the vector values out where that is cheaper (pgvector
        exports each row's ``vector_dims``; embedded Qdrant copies its files whole anyway).
        ``inventory``: a directory where a store whose inventory is cheaper to read from an
        export of its own may also write one, of the same instant (pgvector: in id order,
        without the vector values; ``VectorCapture.inventory``); embedded Qdrant ignores it.

        Each collection is copied in one short read (embedded Qdrant: one ``VACUUM INTO`` per
        ``storage.sqlite``, the memory collection first); each copy's ``CopyResult`` holds its
        UTC start and end and its duration in seconds, so the capture window can be stated.
        Takes no lock. Writes under ``dest`` only. An absent store gives ``present=False``
        and no copies.

        Raises:
            UnavailableError: a store file is unreadable or damaged (a listed collection with no
                readable file is damage, never "no points").
            TryLaterError: a file stays busy, or ``dest``'s disk is full.
        """
        ...

    def legacy_files(self) -> dict[str, tuple[str, ...]]:
        """The live store's files of a legacy point store its library no longer reads.

        By collection, paths relative to ``location``; {} when there is none (embedded Qdrant:
        ``storage.dbm*`` of qdrant-client < 1.1.7 beside the ``storage.sqlite`` that
        qdrant-client 1.20 reads instead). Their points are invisible to mem0, not lost:
        nothing may be deleted or recorded as lost while they are there. Reads only.
        """
        ...

    def read_live_entities(self) -> tuple[EntityLink, ...]:
        """Read mem0's entity links from the live store, sorted by entity id (as ``read_entities``).

        Only for a writer holding the store (inside ``mem0.open_memory``), after its own
        deletes: nobody else can be writing then. Empty when the entity collection is absent.
        Reads only.

        Raises:
            UnavailableError: the entity collection is unreadable or a point does not decode.
        """
        ...

    def compact(self) -> str:
        """Rewrite the live store so no free page keeps deleted content (erase, after deletes).

        Returns what was done, for the erasure's report (pgvector: ``"VACUUM FULL"``, or a
        plain VACUUM of a table locked too long, said so).

        Embedded Qdrant: ``VACUUM`` of each ``storage.sqlite``: SQLite allows it while the app
        holds the store (one exclusive transaction, 5 s busy timeout; qdrant-client keeps its
        points in memory and never reads the rows again), so it needs no route; memsync's own
        ``Memory`` must be closed. Writes the live store. Idempotent.

        Raises:
            TryLaterError: a file stays busy; UnavailableError: a file cannot be rewritten.
        """
        ...

    def remove_store(self, *, dry_run: bool = False) -> int:
        """Remove the whole live store: the old store a migration left (``migrate --cleanup``).

        Embedded Qdrant: the directory, only when every entry is one qdrant-client writes
        (``meta.json``, ``.lock``, ``collection/<name>/storage.sqlite`` and its SQLite
        journals); pgvector: ``DROP TABLE`` of the memory and entity tables in one
        transaction. The caller makes sure nobody holds the store (``require_free``) and that
        it is not a live deployment's. An absent store removes nothing (0). Idempotent.

        Args:
            dry_run: measure only; nothing is removed.

        Returns:
            the bytes the store takes (took): files' sizes, or ``pg_total_relation_size``.

        Raises:
            ConfigError: (exit 10) the directory holds something qdrant-client never writes
                (it is not only a store: nothing is removed; the message names the entry).
            UnavailableError: the store cannot be read or removed (permissions, server).
        """
        ...

    def probe_server(self, expected_dims: tuple[tuple[str, int], ...]) -> list[DoctorResult]:
        """Doctor's results about the store's server (pgvector: ``pg-*``); [] for files.

        ``expected_dims``: ``config.expected_dims``. Never raises (an unreachable server is an
        error result). Reads only.
        """
        ...

    def probe_set_aside(self) -> list[DoctorResult]:
        """A ``pre-restore-copy`` (ok) per copy a restore moved aside inside the store itself.

        pgvector: the ``<table>_pre_restore_*`` tables ([] when the server is unreachable);
        embedded Qdrant: [] (its copies are directories beside it, doctor lists those). Reads only.
        """
        ...

    def erase_set_aside(self, point_ids: Sequence[str]) -> list[str]:
        """Erase the points from the copies a restore moved aside inside the store itself.

        Returns the copies rewritten, for the erasure's report (pgvector: each
        ``<table>_pre_restore_*`` table, rows deleted and VACUUM FULL); [] for embedded Qdrant
        (its copies are directories the caller passes to ``erase_points``). Idempotent.

        Raises:
            UnavailableError: the server refuses a statement.
        """
        ...

    def set_aside_ids(self, scope: Mapping[str, str]) -> set[str]:
        """Ids of the points whose payload holds ``scope`` in the copies a restore moved aside.

        pgvector: each ``<table>_pre_restore_*`` table; embedded Qdrant: every collection of the
        ``<path>.pre-restore-*`` directories beside the store. A memory a restore rolled back
        lives only there, so a scope erasure purges these ids from the copies too. Reads only.

        Raises:
            UnavailableError: a copy is unreadable, or the server refuses a statement.
        """
        ...

    def erase_old(self, point_ids: Sequence[str]) -> int:
        """Delete the points from this store, the old store a migration left (never the live one).

        Returns the rows removed. Embedded Qdrant rolls back a hot journal first.

        Raises:
            MemsyncError: the store is not there, or cannot be written.
        """
        ...

    def describe_missing(self, present: bool) -> tuple[str, str, str | None]:
        """What ``collection-missing`` says when the memory collection is missing. Pure.

        Returns (what is missing, its likely causes, the path to name or None); ``present``:
        the store itself was there when captured (``VectorCapture.present``).
        """
        ...

    def staging(self) -> StagedRestore | None:
        """How the server stages and swaps a restore in itself; None for a store of files.

        None (embedded Qdrant): a restore moves the snapshot's files in place of ``location``.
        """
        ...

    def refuse_dims(self, dims: int) -> tuple[str, str] | None:
        """Why mem0 could not create this store with ``dims``-dimension vectors, and what to do.

        None when it can (pgvector with ``hnsw = true`` takes at most 2,000). Pure.
        """
        ...

    # --- doctor: what a backend says about itself (docs/reference/commands/doctor.md) --------

    @property
    def container(self) -> str:
        """What holds one deployment's store, in messages: ``"directory"``, ``"table"``."""
        ...

    @property
    def capture_blocks_writers(self) -> bool:
        """Whether a capture's read of the live store makes mem0's writers wait (SQLite files).

        False for a server backend: its export runs in a transaction no writer waits for, so
        only history.db's read counts in ``capture-duration`` and ``wal-recommended``.
        """
        ...

    def local_dirs(self) -> tuple[LocalDir, ...]:
        """The directories the live store keeps on this machine; () for a server backend.

        What doctor probes (mount, space, permissions, lock), what a restore's copies sit
        beside, what must exist for the app to start. Pure.
        """
        ...

    def telemetry(self, path: Path) -> tuple[LocalDir, ...]:
        """The telemetry store mem0 opens beside this one at ``path``; () when it keeps none here.

        mem0ai 2.2.1 opens an embedded Qdrant at ``$MEM0_DIR/migrations_qdrant`` beside an
        embedded store; with a server store it keeps its telemetry in a table. Pure.
        """
        ...

    def sqlite_verdicts(self, capture: VectorCapture) -> list[tuple[Path, str]]:
        """Each live SQLite file of the store and the quick_check verdict of its copy.

        For ``sqlite-integrity`` and ``journal-mode``; [] for a server backend. Reads ``capture``.
        """
        ...

    def probe_capture(
        self, capture: VectorCapture, expected_dims: tuple[tuple[str, int], ...]
    ) -> list[DoctorResult]:
        """Doctor's results about the store's captured files; reads the capture only.

        Embedded Qdrant: ``legacy-point-store``, ``collection-params``, ``store-size``; [] for a
        server backend (``probe_server`` reads its tables).
        """
        ...

    def probe_app_view(
        self, qdrant_client: str | None, found: Mapping[str, Any]
    ) -> list[DoctorResult]:
        """Doctor's results from the app interpreter's view of the store. Pure.

        ``found``: ``app_process.app_doctor``'s answer. Embedded Qdrant: ``store-meta``,
        ``store-decode``; [] for a server backend.
        """
        ...

    def meta_file(self, source: str) -> MetaFile:
        """The store's metadata file ``repair-meta`` rewrites for the app's qdrant-client.

        Raises:
            ConfigError: (exit 10) the backend has none (pgvector); ``source``: the config.
        """
        ...


@runtime_checkable
class VectorStore(LiveStore, CaptureReader, Protocol):
    """What capture, inventory, snapshot, restore, reconcile and doctor need from a vector store.

    A backend provides both halves: ``LiveStore`` (the live store) and ``CaptureReader``
    (reading its captures). ``memsync.stores.backends.backend_for`` builds one.

    An instance is bound to one deployment's live store and its two collections. Methods that
    read a capture never touch the live store, take no lock, and accept any captured layout
    this backend wrote (a fresh capture, or a snapshot's plaintext files). Every error is a
    ``memsync.errors`` one: library and SQLite exceptions never leave an implementation.
    """
