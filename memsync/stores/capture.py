"""Capture a whole deployment (vectors first, then history) and read it into values.

This is the pipeline's first two stages (docs/architecture.md): ``capture`` copies every store file in one
short job, ``read_inventory`` turns the copies into an ``Inventory`` for ``check``. The vector
store is reached only through the ``VectorStore`` port (the deployment's, ``memsync.deployment``).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import structlog

from memsync import flock
from memsync.config import Config
from memsync.errors import UnavailableError
from memsync.model import (
    CaptureWindow,
    CollectionInfo,
    EntityLink,
    Inventory,
    MemoryHistory,
    Point,
    parse_time,
)
from memsync.stores import history, journal_mode
from memsync.stores.backends import layout_store
from memsync.stores.sqlite_files import (
    CopyResult,
    pinned_snapshots,
    present,
    read_in_place,
    work_dir_error,
)
from memsync.stores.vector_store import VectorCapture, VectorStore

logger = structlog.get_logger(__name__)
CAPTURING_LOCK = ".capturing"

# The payload keys check reads (mem0ai 2.2.1 payload); the rest is dropped while reading.
CHECKED_PAYLOAD_KEYS = frozenset(
    {"data", "hash", "created_at", "updated_at", "user_id", "agent_id", "run_id", "expiration_date"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Captured:
    """A capture of both stores under ``root`` (``<store.capture_dir>/`` and ``history.db``).

    Attributes:
        root: the capture directory.
        store: the vector store it was captured from (reads the vector copy).
        vectors: the vector store's copy (collections, per-collection copy results).
        history_copy: the history.db copy, or None when history.db does not exist.
        window: the capture instants (UTC).
        in_place: nothing was copied: the "copies" are the live files, read through read
            snapshots held since ``window.vectors_at`` (``temporary_capture(in_place=True)``).
    """

    root: Path
    store: VectorStore
    vectors: VectorCapture
    history_copy: CopyResult | None
    window: CaptureWindow
    in_place: bool = False

    @property
    def qdrant_present(self) -> bool:
        """The vector store existed (embedded Qdrant: it had a meta.json)."""
        return self.vectors.present

    @property
    def collections(self) -> dict[str, CollectionInfo]:
        """Parameters of every collection, by name."""
        return self.vectors.collections

    @property
    def collection_copies(self) -> dict[str, CopyResult]:
        """Each copied collection's copy result, by name."""
        return self.vectors.copies

    @property
    def qdrant_dir(self) -> Path:
        """The captured vector-store directory."""
        return self.vectors.root

    @property
    def history_path(self) -> Path:
        """The captured history.db (may not exist)."""
        return self.root / "history.db"


def capture(
    store: VectorStore,
    config: Config,
    dest: Path,
    *,
    vectors: bool = True,
    on_pinned: Callable[[bool], None] | None = None,
    inventory: Path | None = None,
) -> Captured:
    """Copy the deployment's stores into ``dest``: every collection first, then history.db.

    ``vectors=False``: an inventory-only copy (``VectorStore.capture``), never a snapshot's.
    ``on_pinned(every)``: called before any copy starts, ``every`` True when the read snapshots
    of every store file are open (each file in WAL mode with a live writer, and a vector store
    of files: a server store's export opens its snapshot only when it starts), so nothing
    written after the call is in the copies (``snapshot create`` lets the app write again).
    ``inventory``: where the vector store may write an inventory-only export of the same instant
    for the judge (``VectorStore.capture``); the caller removes it.

    Takes no lock; each live file is read in one short transaction (``VACUUM INTO``); when every
    file is in WAL mode, all read snapshots are opened first, back to back
    (``sqlite_files.pinned_snapshots``), so the pair is one instant.
    Writes under ``dest`` only.

    Raises:
        UnavailableError: neither store exists, or a store file is unreadable or damaged.
        TryLaterError: a store is busy, or ``dest``'s disk is full.
    """
    vectors_present = store.present()
    history_present = present(config.history_db_path)
    if not vectors_present and not history_present:
        raise UnavailableError(
            f"neither the vector store {store.where} nor history.db "
            f"{config.history_db_path} exists",
            "check the [mem0] paths and mem0_dir in the memsync config",
        )
    clock_start = datetime.now(UTC)
    live = [
        entry.path for entry in journal_mode.live_files(store, config.history_db_path)
    ]  # vectors first, then history
    with pinned_snapshots(live) as pinned:  # WAL files: every read snapshot opened at one instant
        if on_pinned is not None:
            on_pinned(pinned and store.location is not None)
        copied = store.capture(dest / store.capture_dir, vectors=vectors, inventory=inventory)
        copies = copied.copies
        vectors_end = datetime.now(UTC)
        history_copy = None
        if history_present:
            history_copy = history.capture(config.history_db_path, dest / "history.db")
        history_end = datetime.now(UTC)
    all_copies = [*copies.values(), *([history_copy] if history_copy else [])]
    window = CaptureWindow(
        vectors_at=min((c.started_at for c in copies.values()), default=clock_start),
        vectors_finished_at=max((c.finished_at for c in copies.values()), default=vectors_end),
        history_at=history_copy.started_at if history_copy else vectors_end,
        history_finished_at=history_copy.finished_at if history_copy else history_end,
        longest_read_s=max((c.duration_s for c in all_copies), default=0.0),
        in_flight_margin_s=config.check.in_flight_margin_s,
    )
    logger.info(
        "capture_finished",
        collections=len(copies),
        size_bytes=sum(c.size_bytes for c in all_copies),
        duration_s=round((history_end - clock_start).total_seconds(), 3),
        longest_read_s=round(window.longest_read_s, 3),
    )
    return Captured(
        root=dest, store=store, vectors=copied, history_copy=history_copy, window=window
    )


def from_directory(
    root: Path, window: CaptureWindow, config: Config, store: VectorStore | None = None
) -> Captured:
    """Describe an existing capture layout (a snapshot's plaintext files) as a ``Captured``.

    ``store`` describes the vector copy (None: embedded Qdrant, the layout of every snapshot so
    far, with mem0's default collection; ``read_inventory`` reads it with the config's names).
    The window is judged with ``config``'s in-flight margin (manifests do not record one).
    Reads the vector store's metadata only.

    Raises:
        UnavailableError: the metadata is unreadable or not valid.
    """
    if store is None:
        store = layout_store(root)
    vectors = store.open_capture(
        root / store.capture_dir, window.vectors_at, window.vectors_finished_at
    )
    history_file = root / "history.db"
    history_copy = None
    if history_file.is_file():
        history_copy = CopyResult.at_rest(
            history_file, window.history_at, window.history_finished_at
        )
    window = replace(window, in_flight_margin_s=config.check.in_flight_margin_s)
    return Captured(
        root=root, store=store, vectors=vectors, history_copy=history_copy, window=window
    )


@contextmanager
def scratch_directory(config: Config) -> Iterator[Path]:
    """A fresh ``capture-*`` directory under ``work_dir``, held and removed on exit.

    The directory is marked in use with an flock on its ``.capturing`` file, so a concurrent
    ``remove_stale_captures`` leaves it alone; when the process dies the flock is free, and
    the next memsync command (``temporary_capture``) or ``forget --erase``
    (``erase.purge_own_copies``) removes it with the store copies it holds. Stale directories
    of dead commands are removed first.

    Raises:
        TryLaterError: ``work_dir`` cannot be created or written.
    """
    dest = config.work_dir / f"capture-{uuid.uuid4().hex[:12]}"
    try:
        config.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        remove_stale_captures(config.work_dir)
        dest.mkdir(mode=0o700)
        holder = flock.acquire(dest / CAPTURING_LOCK, wait=True, note=False)
    except OSError as error:
        raise work_dir_error(config.work_dir, error) from error
    try:
        yield dest
    finally:
        holder.close()
        shutil.rmtree(dest, ignore_errors=True)


@contextmanager
def temporary_capture(
    store: VectorStore, config: Config, in_place: bool = False
) -> Iterator[Captured]:
    """Capture into a fresh directory under ``work_dir`` (``scratch_directory``), removed on exit.

    An inventory-only capture (``capture(vectors=False)``): its readers (check, doctor, review,
    the repairs' re-checks) read points, payloads and vector sizes, never vector values.
    ``in_place``: when every live file is in WAL mode with its ``-shm`` (a running app) and the
    store keeps files, nothing is copied: the read snapshots of every file are opened at one
    instant and held for the block, and the capture's files are the live ones, read through
    them (``sqlite_files.read_in_place``; a WAL reader blocks no writer). Otherwise a copy.

    Raises:
        TryLaterError: ``work_dir`` cannot be created or written.
        UnavailableError: as ``capture``.
    """
    with scratch_directory(config) as dest:
        if not in_place or store.location is None:  # a server store exports: nothing to hold
            yield capture(store, config, dest, vectors=False)
            return
        live = [entry.path for entry in journal_mode.live_files(store, config.history_db_path)]
        with read_in_place(live) as held:
            yield replace(capture(store, config, dest, vectors=False), in_place=held)


def remove_stale_captures(work_dir: Path, max_age_s: float = 60) -> list[Path]:
    """Remove ``capture-*`` directories left by a memsync that died (their flock is free).

    They hold full copies of the stores (personal data), so they must not outlive a crash.
    A directory without a lock file yet is left alone for ``max_age_s`` seconds (a capture
    being set up). Returns the directories removed. Never raises for a directory it cannot
    inspect (it is left).
    """
    removed = []
    for child in sorted(work_dir.glob("capture-*")):
        lock = child / CAPTURING_LOCK
        try:
            if not lock.exists():
                if time.time() - child.stat().st_mtime < max_age_s:
                    continue  # just made by a check that has not locked it yet
            else:
                with flock.hold(lock, note=False):
                    pass  # free: its memsync died
        except flock.LockHeld:
            continue  # a running check owns it
        except OSError:
            continue
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
    return removed


def read_inventory(
    store: VectorStore,
    captured: Captured,
    config: Config,
    progress: Callable[[int, int], None] | None = None,
) -> Inventory:
    """Read a capture into an ``Inventory`` (see ``_read_inventory``).

    ``store``: the deployment's; it names the collections (a snapshot's copy may use others).

    Errors name the live file the copy was made from, not the temporary copy.
    """
    with naming_live_files(captured):
        return _read_inventory(store, captured, config, progress)


@contextmanager
def naming_live_files(captured: Captured) -> Iterator[None]:
    """Re-raise an ``UnavailableError`` on a copy with the live file's name in its place."""
    try:
        yield
    except UnavailableError as error:
        message = error.message
        for copy in [*captured.collection_copies.values(), captured.history_copy]:
            if copy is not None and copy.source != copy.dest:
                message = message.replace(str(copy.dest), f"{copy.source} (read from a fresh copy)")
        raise UnavailableError(message, error.hint) from error


def memory_streams(
    store: VectorStore,
    captured: Captured,
    config: Config,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Inventory, tuple[Iterator[Point], Iterator[MemoryHistory]]]:
    """``read_inventory`` as streams: the inventory without points or history, and both in id order.

    The points come from ``VectorStore.points_in_order`` (payloads cut to the keys check
    reads), history's memories from ``history.iter_memories``; both are read lazily, so
    errors (UnavailableError, as ``read_inventory``) are raised while iterating. Reads the
    copies only.

    Raises:
        UnavailableError: the entity copy or history.db's summary is unreadable.
    """
    entities = store.read_entities(captured.vectors)
    memories: Iterator[MemoryHistory] = iter(())
    if captured.history_copy is not None:
        contents = history.read_summary(captured.history_copy.dest)
        memories = history.iter_memories(captured.history_copy.dest)
    else:
        contents = history.HistoryContents(present=False, memories={}, rows=0, message_scopes=())
    summary = _inventory(captured, config, {}, entities, contents)
    points = store.points_in_order(captured.vectors, CHECKED_PAYLOAD_KEYS, progress)
    return summary, (points, memories)


def read_named(
    store: VectorStore,
    captured: Captured,
    config: Config,
    memory_ids: frozenset[str],
    keep_point: Callable[[Point], bool] | None = None,
) -> Inventory:
    """``read_inventory`` holding only the points and history memories of ``memory_ids``.

    ``store``: the deployment's (as ``read_inventory``); ``keep_point``: the points it accepts
    are kept too, with their history.

    Besides them it keeps the point with the newest ``updated_at`` (else ``created_at``) and
    the memory with the newest last event, so the newest instant of each store is the whole
    inventory's (what ``reconcile.apply.vectors_newer_than_history`` compares). Points and
    memories are streamed (``VectorStore.points_in_order``, ``history.iter_memories``):
    memory grows with ``memory_ids``, not with the store. Every other field is the whole
    inventory's. Reads the copies only; errors name the live files.

    Raises:
        UnavailableError: as ``read_inventory``.
    """
    with naming_live_files(captured):
        summary, (stream, memories) = memory_streams(store, captured, config)
        points: dict[str, Point] = {}
        newest_point: tuple[datetime, Point] | None = None
        for point in stream:
            if point.id in memory_ids or (keep_point is not None and keep_point(point)):
                points[point.id] = point
                continue
            at = parse_time(point.payload.get("updated_at")) or parse_time(
                point.payload.get("created_at")
            )
            if at is not None and (newest_point is None or at > newest_point[0]):
                newest_point = (at, point)
        kept: dict[str, MemoryHistory] = {}
        newest_memory: tuple[datetime, MemoryHistory] | None = None
        for memory in memories:
            if memory.memory_id in memory_ids or memory.memory_id in points:
                kept[memory.memory_id] = memory
            elif memory.last.at is not None and (
                newest_memory is None or memory.last.at > newest_memory[0]
            ):
                newest_memory = (memory.last.at, memory)
    if newest_point is not None:
        points[newest_point[1].id] = newest_point[1]
    if newest_memory is not None:
        kept[newest_memory[1].memory_id] = newest_memory[1]
    return replace(summary, points=points, history=kept)


def _read_inventory(
    store: VectorStore,
    captured: Captured,
    config: Config,
    progress: Callable[[int, int], None] | None = None,
) -> Inventory:
    """Read a capture into an ``Inventory``. Reads the copies only.

    ``progress(points_read, points_total)`` is called while the memory collection is decoded.

    Raises:
        UnavailableError: a copied file is damaged or a point undecodable.
    """
    points = store.read_points(captured.vectors, CHECKED_PAYLOAD_KEYS, progress)
    entities = store.read_entities(captured.vectors)
    if captured.history_copy is not None:
        contents = history.read_contents(captured.history_copy.dest)
    else:
        contents = history.HistoryContents(present=False, memories={}, rows=0, message_scopes=())
    return _inventory(captured, config, points, entities, contents)


def _inventory(
    captured: Captured,
    config: Config,
    points: dict[str, Point],
    entities: tuple[EntityLink, ...],
    contents: history.HistoryContents,
) -> Inventory:
    return Inventory(
        collection=config.collection,
        qdrant_present=captured.qdrant_present,
        collections=captured.collections,
        points=points,
        history_present=contents.present,
        history=contents.memories,
        history_rows=contents.rows,
        entities=entities,
        message_scopes=contents.message_scopes,
        expected_dims=config.expected_dims,
        window=captured.window,
        legacy_stores=captured.vectors.legacy_files,
    )
