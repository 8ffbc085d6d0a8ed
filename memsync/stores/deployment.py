"""Capture a whole embedded deployment (vectors first, then history) and read it into values.

This is the pipeline's first two stages (DESIGN.md): ``capture`` copies every store file in one
short job, ``read_inventory`` turns the copies into an ``Inventory`` for ``check``.
"""

from __future__ import annotations

import fcntl
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from memsync.config import Config
from memsync.errors import UnavailableError
from memsync.model import CaptureWindow, CollectionInfo, Inventory
from memsync.stores import history, local_qdrant
from memsync.stores.sqlite_files import CopyResult, work_dir_error

logger = structlog.get_logger(__name__)
CAPTURING_LOCK = ".capturing"

# The payload keys check reads (mem0ai 2.2.1 payload); the rest is dropped while reading.
CHECKED_PAYLOAD_KEYS = frozenset(
    {"data", "hash", "created_at", "updated_at", "user_id", "agent_id", "run_id", "expiration_date"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Captured:
    """A capture of both stores under ``root`` (``qdrant/`` and ``history.db``).

    Attributes:
        root: the capture directory.
        qdrant_present: the embedded Qdrant directory had a meta.json.
        collections: parameters of every collection in meta.json.
        collection_copies: each copied collection's copy result, by name.
        history_copy: the history.db copy, or None when history.db does not exist.
        window: the capture instants (UTC).
    """

    root: Path
    qdrant_present: bool
    collections: dict[str, CollectionInfo]
    collection_copies: dict[str, CopyResult]
    history_copy: CopyResult | None
    window: CaptureWindow

    @property
    def qdrant_dir(self) -> Path:
        """The captured Qdrant directory."""
        return self.root / "qdrant"

    @property
    def history_path(self) -> Path:
        """The captured history.db (may not exist)."""
        return self.root / "history.db"


def capture(config: Config, dest: Path) -> Captured:
    """Copy the deployment's stores into ``dest``: every collection first, then history.db.

    Takes no lock; each live file is read in one short transaction (``VACUUM INTO``).
    Writes under ``dest`` only.

    Raises:
        UnavailableError: neither store exists, or a store file is unreadable or damaged.
        TryLaterError: a store is busy, or ``dest``'s disk is full.
    """
    qdrant_dir = dest / "qdrant"
    meta_text = _read_meta_text(config.qdrant_path)
    collections = (
        local_qdrant.parse_meta(meta_text, config.qdrant_path / local_qdrant.META_FILE)
        if meta_text is not None
        else {}
    )
    history_present = _present(config.history_db_path)
    if meta_text is None and not history_present:
        raise UnavailableError(
            f"neither the Qdrant directory {config.qdrant_path} nor history.db "
            f"{config.history_db_path} exists",
            "check the [mem0] paths and mem0_dir in the memsync config",
        )
    clock_start = datetime.now(UTC)
    copies: dict[str, CopyResult] = {}
    if meta_text is not None:
        local_qdrant.write_meta_copy(meta_text, qdrant_dir)
        ordered = sorted(collections, key=lambda name: (name != config.collection, name))
        copies = local_qdrant.capture(config.qdrant_path, qdrant_dir, ordered)
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
    )
    logger.info(
        "capture_finished",
        collections=len(copies),
        size_bytes=sum(c.size_bytes for c in all_copies),
        duration_s=round((history_end - clock_start).total_seconds(), 3),
        longest_read_s=round(window.longest_read_s, 3),
    )
    return Captured(
        root=dest,
        qdrant_present=meta_text is not None,
        collections=collections,
        collection_copies=copies,
        history_copy=history_copy,
        window=window,
    )


def from_directory(root: Path, window: CaptureWindow) -> Captured:
    """Describe an existing capture layout (a snapshot's plaintext files) as a ``Captured``.

    Reads meta.json only. Raises UnavailableError when meta.json is unreadable.
    """
    meta_text = _read_meta_text(root / "qdrant")
    collections = (
        local_qdrant.parse_meta(meta_text, root / "qdrant" / local_qdrant.META_FILE)
        if meta_text is not None
        else {}
    )
    copies = {}
    for name in collections:
        storage = local_qdrant.storage_path(root / "qdrant", name)
        if storage.is_file():
            copies[name] = CopyResult(
                source=storage,
                dest=storage,
                started_at=window.vectors_at,
                finished_at=window.vectors_finished_at,
                duration_s=0.0,
                size_bytes=storage.stat().st_size,
            )
    history_file = root / "history.db"
    history_copy = None
    if history_file.is_file():
        history_copy = CopyResult(
            source=history_file,
            dest=history_file,
            started_at=window.history_at,
            finished_at=window.history_finished_at,
            duration_s=0.0,
            size_bytes=history_file.stat().st_size,
        )
    return Captured(
        root=root,
        qdrant_present=meta_text is not None,
        collections=collections,
        collection_copies=copies,
        history_copy=history_copy,
        window=window,
    )


def _present(path: Path) -> bool:
    """Tell whether a store file is there at all.

    A dangling symlink counts as there (and then fails to read, exit 11), never as absent.
    """
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError as error:
        raise UnavailableError(
            f"{path} is not reachable: {error.strerror}",
            "run memsync as the app's user, or give its group access to the directories (see doctor)",
        ) from error
    return True


def _read_meta_text(qdrant_path: Path) -> str | None:
    meta = qdrant_path / local_qdrant.META_FILE
    if not _present(meta):
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


@contextmanager
def temporary_capture(config: Config) -> Iterator[Captured]:
    """Capture into a fresh directory under ``work_dir``, removed (with its copies) on exit.

    Raises:
        TryLaterError: ``work_dir`` cannot be created or written.
        UnavailableError: as ``capture``.
    """
    dest = config.work_dir / f"capture-{uuid.uuid4().hex[:12]}"
    try:
        config.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        remove_stale_captures(config.work_dir)
        dest.mkdir(mode=0o700)
        holder = (dest / CAPTURING_LOCK).open("w")
    except OSError as error:
        raise work_dir_error(config.work_dir, error) from error
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        yield capture(config, dest)
    finally:
        holder.close()
        shutil.rmtree(dest, ignore_errors=True)


def remove_stale_captures(work_dir: Path, max_age_s: float = 60) -> list[Path]:
    """Remove ``capture-*`` directories left by a memsync that died (their flock is free).

    They hold full copies of the stores (personal data), so they must not outlive a crash.
    """
    removed = []
    for child in sorted(work_dir.glob("capture-*")):
        lock = child / CAPTURING_LOCK
        try:
            if not lock.exists():
                if time.time() - child.stat().st_mtime < max_age_s:
                    continue  # just made by a check that has not locked it yet
            else:
                with lock.open("a") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a running check owns it
        except OSError:
            continue
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
    return removed


def read_inventory(
    captured: Captured, config: Config, progress: Callable[[int, int], None] | None = None
) -> Inventory:
    """Read a capture into an ``Inventory`` (see ``_read_inventory``).

    Errors name the live file the copy was made from, not the temporary copy.
    """
    try:
        return _read_inventory(captured, config, progress)
    except UnavailableError as error:
        message = error.message
        for copy in [*captured.collection_copies.values(), captured.history_copy]:
            if copy is not None and copy.source != copy.dest:
                message = message.replace(str(copy.dest), f"{copy.source} (read from a fresh copy)")
        raise UnavailableError(message, error.hint) from error


def _read_inventory(
    captured: Captured, config: Config, progress: Callable[[int, int], None] | None = None
) -> Inventory:
    """Read a capture into an ``Inventory``. Reads the copies only.

    ``progress(points_read, points_total)`` is called while the memory collection is decoded.

    Raises:
        UnavailableError: a copied file is damaged or a point undecodable.
    """
    points = {}
    copy = captured.collection_copies.get(config.collection)
    if copy is not None:
        points = local_qdrant.read_points(copy.dest, CHECKED_PAYLOAD_KEYS, progress)
    entity_copy = captured.collection_copies.get(config.entities_collection)
    entities = local_qdrant.read_entities(entity_copy.dest) if entity_copy else ()
    if captured.history_copy is not None:
        contents = history.read_contents(captured.history_copy.dest)
    else:
        contents = history.HistoryContents(present=False, memories={}, rows=0, message_scopes=())
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
    )
