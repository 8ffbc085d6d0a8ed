"""SQLite file helpers shared by the store adapters: read-only opens, VACUUM INTO, checks.

Every read transaction on a live file is kept as short as one statement: mem0's writers
(mem0ai 2.2.1, Python's default 5 s busy timeout) fail with "database is locked" when a reader
holds a shared lock longer than that, and a failed history write is exactly the drift memsync
exists to find.
"""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog

from memsync.errors import MemsyncError, TryLaterError, UnavailableError
from memsync.model import Point

logger = structlog.get_logger(__name__)

SLOW_READ_S = 2.0
_SPILL_BATCH = 1_000
SQLITE_VERSION = sqlite3.sqlite_version  # the library this Python links
SQLITE_HEADER = b"SQLite format 3\x00"
WAL_HEADER_BYTES = 32  # a -wal this size or smaller holds no frame


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyResult:
    """One ``VACUUM INTO`` copy: where it went, when its read snapshot began (UTC), seconds."""

    source: Path
    dest: Path
    started_at: datetime
    finished_at: datetime
    duration_s: float
    size_bytes: int
    journal_mode: str | None = None  # the source's: "wal" or "rollback" (None: no header yet)

    @classmethod
    def at_rest(
        cls, dest: Path, started_at: datetime, finished_at: datetime, source: Path | None = None
    ) -> CopyResult:
        """A copy already on disk (a snapshot's file): the given UTC instants, 0 s, its size.

        ``source``: where it was copied from, for messages (default: ``dest``). Reads one stat.
        """
        return cls(
            source=dest if source is None else source,
            dest=dest,
            started_at=started_at,
            finished_at=finished_at,
            duration_s=0.0,
            size_bytes=dest.stat().st_size,
        )


def readonly_uri(path: Path, immutable: bool = False) -> str:
    """Return the ``file:`` URI that opens ``path`` read-only (percent-encoded)."""
    return f"{path.absolute().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")


def wal_without_writer(path: Path) -> bool:
    """True for a WAL-mode file whose ``-shm`` does not exist (no connection has it open).

    Opening such a file, even read-only, would create ``-wal`` and ``-shm`` beside it, owned by
    memsync's user (the app may then fail to write). ``connect_readonly`` reads it without
    creating anything there; the copy is then checked like any other.
    """
    try:
        return header_journal_mode(path) == "wal" and not Path(f"{path}-shm").exists()
    except UnavailableError:
        return False


def wal_has_frames(path: Path) -> bool:
    """True when ``path``'s ``-wal`` exists and is longer than its 32-byte header. Reads only.

    Such a WAL may hold committed transactions the main file does not (files copied by hand,
    an app stopped uncleanly): ``immutable=1`` would ignore them.
    """
    try:
        return Path(f"{path}-wal").stat().st_size > WAL_HEADER_BYTES
    except OSError:
        return False


class _PrivateCopy(sqlite3.Connection):
    """A connection to memsync's own copy of a database and its ``-wal``; closing removes it."""

    private_dir: Path | None = None

    def close(self) -> None:
        super().close()
        if self.private_dir is not None:
            shutil.rmtree(self.private_dir, ignore_errors=True)
            self.private_dir = None

    def __del__(self) -> None:  # a connection dropped without close(): still remove the copy
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - nothing to report from a finalizer
            pass


def _open_private_copy(path: Path) -> sqlite3.Connection:
    """Copy ``path`` and its ``-wal`` into a new private directory and open that copy.

    SQLite replays the WAL's committed frames on the copy (creating its ``-shm`` there, never
    beside the user's files). The directory goes when the connection is closed.
    """
    directory = Path(tempfile.mkdtemp(prefix="memsync-wal-"))
    try:
        copy = directory / "copy.db"
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        connection = sqlite3.connect(copy, timeout=1.0, factory=_PrivateCopy)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    assert isinstance(connection, _PrivateCopy)
    connection.private_dir = directory
    return connection


def connect_readonly(
    path: Path, factory: type[sqlite3.Connection] = sqlite3.Connection
) -> sqlite3.Connection:
    """Open ``path`` read-only with a short busy timeout; never creates files beside it.

    A WAL-mode file without ``-shm`` (no connection open) is opened ``immutable=1`` when its
    ``-wal`` holds no frame, and through a private copy of the file and its ``-wal`` when it
    does, so committed rows that live only in the WAL are read too.

    Inside ``read_in_place``, a file it holds is answered with its held read snapshot (closing
    it there leaves it open).

    Raises:
        UnavailableError: the file cannot be opened (or copied).
    """
    held = (_HELD.get() or {}).get(path)
    if held is not None:
        return held[0]
    try:
        if wal_without_writer(path):
            if wal_has_frames(path):
                return _open_private_copy(path)
            return sqlite3.connect(readonly_uri(path, True), uri=True, timeout=1.0)
        return sqlite3.connect(readonly_uri(path), uri=True, timeout=1.0, factory=factory)
    except (sqlite3.Error, OSError) as error:
        raise UnavailableError(
            f"SQLite file {path} cannot be opened: {error}",
            "check that the path exists and is readable by this user",
        ) from error


def translate(error: sqlite3.Error, path: Path, action: str) -> MemsyncError:
    """Map a sqlite3 error on ``path`` to the memsync error (and exit code) it means."""
    text = str(error)
    lowered = text.lower()
    if "readonly database" in lowered and Path(f"{path}-journal").exists():
        return TryLaterError(
            f"SQLite file {path} has a hot journal left by a writer that crashed; a read-only "
            "reader cannot roll it back",
            "the app's next start rolls it back; with the app stopped, memsync snapshot "
            "create does too (and takes a snapshot), as every memsync command that writes does",
        )
    if "locked" in lowered or "busy" in lowered:
        return TryLaterError(
            f"SQLite file {path} is busy ({text}) while trying to {action}",
            "a writer holds it; run the command again in a moment",
        )
    if "disk is full" in lowered:
        return TryLaterError(
            f"no space left to {action} for {path} ({text})",
            "free space in memsync's work_dir (or point work_dir elsewhere) and retry",
        )
    if (
        "not a database" in lowered
        or "malformed" in lowered
        or "corrupt" in lowered
        or "no such" in lowered
    ):
        return UnavailableError(
            f"SQLite file {path} is not a valid database ({text})",
            "the file is damaged: move it aside and restore it from a snapshot "
            "(memsync snapshot list); memsync changed nothing",
        )
    if "readonly" in lowered or "read-only" in lowered:
        return UnavailableError(
            f"SQLite file {path} cannot be written to {action} ({text})",
            "check the file's permissions, attributes (lsattr) and mount; memsync changed "
            "nothing in this file",
        )
    return UnavailableError(
        f"SQLite file {path} could not be read to {action} ({text})",
        "check the file's permissions and the disk; memsync changed nothing",
    )


def vacuum_into(source: Path, dest: Path, in_place: bool = True) -> CopyResult:
    """Copy ``source`` into the new file ``dest`` with ``VACUUM INTO``, in one read transaction.

    The copy is consistent (one snapshot), compact (no free pages, so no deleted text) and
    made without taking any lock a writer would wait on for long. Writes ``dest`` only.
    Inside ``read_in_place`` (and ``in_place``), a file held there is not copied: the result's
    ``dest`` is ``source`` itself, read through the held snapshot (duration: its opening).

    Raises:
        UnavailableError: ``source`` is missing, unreadable or not a valid database.
        TryLaterError: ``source`` is locked by a writer, or ``dest``'s disk is full.
    """
    require_regular_file(source)
    held = (_HELD.get() or {}).get(source)
    if held is not None and in_place:
        _connection, started, opened_s = held
        return CopyResult(
            source=source,
            dest=source,
            started_at=started,
            finished_at=started + timedelta(seconds=opened_s),
            duration_s=opened_s,
            size_bytes=source.stat().st_size,
            journal_mode=source_journal_mode(source),
        )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise work_dir_error(dest.parent, error) from error
    if dest.exists():
        raise UnavailableError(
            f"capture target {dest} already exists", "memsync refuses to overwrite it"
        )
    journal_mode = source_journal_mode(source)
    pinned = (_PINS.get() or {}).pop(source, None)
    if held is not None:  # a copy of the held snapshot (its close below leaves it open)
        pinned = (held[0], held[1], time.monotonic())
    connection = pinned[0] if pinned else connect_readonly(source)
    try:
        started = pinned[1] if pinned else datetime.now(UTC)
        clock = pinned[2] if pinned else time.monotonic()
        if pinned:  # the read snapshot opened by ``pinned_snapshots``: copy exactly that
            _copy_snapshot(connection, dest)
        else:
            connection.execute("VACUUM INTO ?", (str(dest),))
        duration = time.monotonic() - clock
        finished = datetime.now(UTC)
    except sqlite3.Error as error:
        dest.unlink(missing_ok=True)  # ours: it did not exist before
        raise translate(error, source, "copy it") from error
    finally:
        connection.close()
    if duration > SLOW_READ_S:
        logger.info(
            "capture_slow",
            path=str(source),
            duration_s=round(duration, 3),
            limit_s=SLOW_READ_S,
            hint="mem0's writers give up after 5 s; consider WAL mode (memsync doctor)",
        )
    logger.debug("file_captured", path=str(source), duration_s=round(duration, 4))
    return CopyResult(
        source=source,
        dest=dest,
        started_at=started,
        finished_at=finished,
        duration_s=duration,
        size_bytes=dest.stat().st_size,
        journal_mode=journal_mode,
    )


_PINS: ContextVar[dict[Path, tuple[sqlite3.Connection, datetime, float]] | None] = ContextVar(
    "memsync_sqlite_pins", default=None
)


@contextmanager
def pinned_snapshots(paths: Sequence[Path]) -> Iterator[bool]:
    """Open one read snapshot of each live WAL file, in order, back to back; yields True if so.

    In WAL mode a reader never blocks the app's writer, so each ``VACUUM INTO`` of a capture
    reads its file as of its own start: a write landing between the vector copy and the
    history copy shows as in flight. Pinned, every file is read as of (nearly) one instant,
    the vector files first: ``vacuum_into`` then copies from the pinned snapshot (SQLite's
    backup API honours an open read transaction) and ``VACUUM``s the copy, so it is as compact
    as ``VACUUM INTO``'s. Only when every file is in WAL mode with its ``-shm`` (a live app):
    a rollback-mode reader held that long would block the writer. Yields False (and pins
    nothing) otherwise. Connections not used by a copy are closed at the end.

    Raises:
        UnavailableError: a file cannot be opened.
    """
    held = _HELD.get() or {}
    if paths and all(path in held for path in paths):  # ``read_in_place`` pinned them already
        yield True
        return
    if not paths or not _pinnable(paths):
        yield False
        return
    pins: dict[Path, tuple[sqlite3.Connection, datetime, float]] = {}
    token = _PINS.set(pins)
    try:
        for path in paths:
            pins[path] = _open_read_snapshot(path)
        yield True
    finally:
        _PINS.reset(token)
        for connection, _started, _clock in pins.values():
            connection.close()


def _pinnable(paths: Sequence[Path]) -> bool:
    """Every file in WAL mode with its ``-shm`` (a live app's): a long read blocks no writer."""
    return all(
        source_journal_mode(path) == "wal" and Path(f"{path}-shm").exists() for path in paths
    )


class _Held(sqlite3.Connection):
    """A read snapshot ``read_in_place`` holds for its whole block: a reader's ``close`` keeps it."""

    released = False

    def close(self) -> None:
        if self.released:
            super().close()

    def release(self) -> None:
        """Close it for good (the end of ``read_in_place``)."""
        self.released = True
        super().close()


_HELD: ContextVar[dict[Path, tuple[_Held, datetime, float]] | None] = ContextVar(
    "memsync_sqlite_held", default=None
)


@contextmanager
def read_in_place(paths: Sequence[Path]) -> Iterator[bool]:
    """Hold one read snapshot of each live WAL file for the whole block; yields True if so.

    As ``pinned_snapshots`` (the files' snapshots opened back to back, the vector files first,
    only when every file is in WAL mode with its ``-shm``), but held until the block ends, and
    every reader inside it (``connect_readonly``, ``vacuum_into``) reads the live file through
    its held snapshot instead of a copy: in WAL mode a reader never blocks the app's writer
    (SQLite only keeps the ``-wal`` from being reset past it until the block ends). Yields
    False, holding nothing, otherwise: a rollback-mode reader held that long would block the
    writer, so those files are copied as before. Reads only.

    Raises:
        UnavailableError, TryLaterError: a file cannot be opened (as ``translate``).
    """
    if not paths or not _pinnable(paths):
        yield False
        return
    held: dict[Path, tuple[_Held, datetime, float]] = {}
    try:
        for path in paths:
            connection, started, clock = _open_read_snapshot(path, _Held)
            if not isinstance(connection, _Held):  # the app closed its last connection since
                connection.close()  # _pinnable looked: read as without an app, a copy
                break
            held[path] = (connection, started, time.monotonic() - clock)
    except BaseException:
        for connection, _started, _opened_s in held.values():
            connection.release()
        raise
    if len(held) < len(paths):
        for connection, _started, _opened_s in held.values():
            connection.release()
        yield False
        return
    token = _HELD.set(held)
    try:
        yield True
    finally:
        _HELD.reset(token)
        for connection, _started, _opened_s in held.values():
            connection.release()


def _open_read_snapshot(
    path: Path, factory: type[sqlite3.Connection] = sqlite3.Connection
) -> tuple[sqlite3.Connection, datetime, float]:
    """A read-only connection to ``path`` holding a read snapshot (BEGIN and one read), its instants.

    Raises:
        UnavailableError, TryLaterError: as ``translate``.
    """
    connection = connect_readonly(path, factory)
    connection.isolation_level = None
    started, clock = datetime.now(UTC), time.monotonic()
    try:
        connection.execute("BEGIN")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as error:
        connection.close()
        raise translate(error, path, "open a read snapshot of it") from error
    return connection, started, clock


def _copy_snapshot(connection: sqlite3.Connection, dest: Path) -> None:
    """Copy the read snapshot ``connection`` holds into ``dest``, then compact ``dest``.

    The backup API copies free pages too (deleted text); the ``VACUUM`` of the private copy
    drops them, as ``VACUUM INTO`` would have.
    """
    target = sqlite3.connect(dest)
    try:
        connection.backup(target)
        target.execute("PRAGMA journal_mode=DELETE").fetchone()  # as VACUUM INTO writes it
        target.execute("VACUUM")
    finally:
        target.close()


def source_journal_mode(path: Path) -> str | None:
    """``"wal"`` or ``"rollback"`` from ``path``'s header; None when it has no SQLite header yet.

    ``VACUUM INTO`` always writes a rollback-mode copy (SQLite 3.40), so a snapshot records the
    live file's mode for restore to put back. Reads 20 bytes.
    """
    try:
        return header_journal_mode(path)
    except UnavailableError:
        return None


def set_wal_mode(path: Path) -> None:
    """Switch the database at ``path`` (memsync's own staged copy) to WAL mode.

    Writes the header; SQLite removes the ``-wal`` and ``-shm`` it made when the connection
    closes.

    Raises:
        UnavailableError, TryLaterError: as ``translate``.
    """
    connection = sqlite3.connect(path, timeout=5.0)
    try:
        connection.execute("PRAGMA journal_mode=WAL").fetchone()
    except sqlite3.Error as error:
        raise translate(error, path, "set its journal mode to WAL") from error
    finally:
        connection.close()


def present(path: Path) -> bool:
    """Tell whether a store file is there at all. Reads only.

    A dangling symlink counts as there (and then fails to read, exit 11), never as absent.

    Raises:
        UnavailableError: the path is unreachable (a directory above it denies access).
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


def require_regular_file(path: Path) -> None:
    """Raise UnavailableError unless ``path`` is a regular file memsync can open for reading.

    A directory, FIFO, device, dangling symlink or unreadable file is "unreadable", not "absent".
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise UnavailableError(f"SQLite file {path} does not exist", None) from None
    except OSError as error:
        raise UnavailableError(
            f"SQLite file {path} is not reachable: {error.strerror}",
            "run memsync as the app's user, or give its group access to the directories (see doctor)",
        ) from error
    if not stat.S_ISREG(info.st_mode):
        raise UnavailableError(
            f"{path} is not a regular file", "it should be an SQLite database file"
        )
    try:
        with path.open("rb"):
            pass
    except OSError as error:
        raise UnavailableError(
            f"SQLite file {path} is not readable: {error.strerror}",
            "run memsync as the app's user, or give its group read access (see doctor)",
        ) from error


def work_dir_error(directory: Path, error: OSError) -> MemsyncError:
    """The error for a work or snapshot directory that cannot be written."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return TryLaterError(
            f"no space left in {directory} ({error.strerror})",
            "free space there, or point work_dir (or snapshot.directory) at a larger disk",
        )
    missing = directory
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    if not directory.exists() and error.errno in (errno.EACCES, errno.EPERM):
        # Not there yet, and memsync's user cannot create it (systemd's StateDirectory= makes
        # /var/lib/memsync only when the unit first starts): create it, not another work_dir.
        return UnavailableError(
            f"cannot write to {directory}: {missing} does not exist and memsync (uid "
            f"{os.getuid()}) cannot create it in {missing.parent}",
            f"create it for memsync's user (sudo install -d -m 0700 -o USER {missing}); with "
            "the memsync.service unit, StateDirectory= creates /var/lib/memsync when the unit "
            "first starts (systemctl start memsync)",
        )
    return UnavailableError(
        f"cannot write to {directory}: {error.strerror}",
        "set work_dir (or snapshot.directory) to a directory memsync can write",
    )


def roll_back_hot_journal(path: Path) -> None:
    """Let SQLite roll back a hot ``-journal`` a crashed writer left, as any writer's open does.

    Only commands that write to the deployment call this (before they capture it).

    Raises:
        TryLaterError, UnavailableError: as ``translate``.
    """
    if not Path(f"{path}-journal").exists():
        return
    connection = sqlite3.connect(path, timeout=5.0)
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as error:
        raise translate(error, path, "roll back its hot journal") from error
    finally:
        connection.close()


# How much of a fresh copy ``integrity`` reads through a memory map (SQLite caps it at its
# SQLITE_MAX_MMAP_SIZE, 2 GB by default, and reads the rest with read calls).
FRESH_MMAP_BYTES = 1 << 40


def integrity(path: Path, quick: bool = True, *, fresh: bool = False) -> str:
    """Run ``PRAGMA quick_check`` (or ``integrity_check``) on a copy; return ``"ok"`` or problems.

    Never call this on a live file: it reads every page in one transaction. Reads only.
    ``fresh``: a copy this process has just written (a capture's, still in the page cache),
    read through a memory map, which halves the check's CPU (no read call and no copy per
    page); the verdict is the same. Not for files at rest (a snapshot being verified): on a
    failing disk a mapped read kills the process (SIGBUS) where a read call lets SQLite
    report the error as the verdict.

    Raises:
        UnavailableError: the file cannot be opened at all.
    """
    connection = connect_readonly(path)
    try:
        if fresh:
            connection.execute(f"PRAGMA mmap_size = {FRESH_MMAP_BYTES}").fetchall()
        pragma = "quick_check" if quick else "integrity_check"
        rows = connection.execute(f"PRAGMA {pragma}").fetchall()
    except sqlite3.Error as error:
        return f"{error}"
    finally:
        connection.close()
    messages = [str(row[0]) for row in rows]
    return "ok" if messages == ["ok"] else "; ".join(messages[:5])


def vacuum(path: Path) -> None:
    """Rewrite an SQLite file (``VACUUM``) so no free page keeps deleted content.

    Writes the file (one exclusive transaction; 5 s busy timeout).

    Raises:
        TryLaterError: the file stays busy; UnavailableError: it cannot be rewritten.
    """
    connection = sqlite3.connect(path, timeout=5.0)
    try:
        connection.execute("VACUUM")
    except sqlite3.Error as error:
        raise translate(error, path, "rewrite it") from error
    finally:
        connection.close()


def header_journal_mode(path: Path) -> str:
    """Return ``"wal"`` or ``"rollback"`` from the file header, without opening it in SQLite.

    Reads the first 20 bytes only (no lock). Raises UnavailableError if the file is not SQLite.
    """
    try:
        with path.open("rb") as handle:
            header = handle.read(20)
    except OSError as error:
        raise UnavailableError(f"{path} is not readable: {error.strerror}") from error
    if len(header) < 20 or not header.startswith(SQLITE_HEADER):
        raise UnavailableError(
            f"SQLite file {path} is not a valid database (bad header)",
            "move it aside and restore it from a snapshot",
        )
    return "wal" if header[18] == 2 and header[19] == 2 else "rollback"


def table_names(connection: sqlite3.Connection) -> set[str]:
    """Names of the tables in an open database."""
    rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(row[0]) for row in rows}


def in_id_order(rows: Iterable[tuple[Point, int]]) -> Iterator[Point]:
    """Points by ascending id (Python ``str`` order); of several with one id, the highest ``row``'s.

    Sorted by a private temporary SQLite database (``sqlite3.connect("")``: SQLite removes its
    file as soon as it is open, so nothing outlives the process), whose sorter spills to disk:
    what is held is a batch of ``rows``, not all of them. Each point (payload, vector size) is
    pickled into it and unpickled back by this process only. ``rows`` is read to its end
    before the first point is yielded; its errors pass through.

    Raises:
        TryLaterError: the temporary directory (``SQLITE_TMPDIR``, else ``TMPDIR``, else
            ``/var/tmp`` or ``/tmp``) is full or cannot be written.
    """
    spill = sqlite3.connect("")
    try:
        spill.execute("CREATE TABLE spilled (id TEXT NOT NULL, row INTEGER NOT NULL, point BLOB)")
        batch: list[tuple[str, int, bytes]] = []
        for point, row in rows:
            held = pickle.dumps((point.payload, point.vector_size), pickle.HIGHEST_PROTOCOL)
            batch.append((point.id, row, held))
            if len(batch) == _SPILL_BATCH:
                spill.executemany("INSERT INTO spilled VALUES (?, ?, ?)", batch)
                batch.clear()
        spill.executemany("INSERT INTO spilled VALUES (?, ?, ?)", batch)
        # SQLite takes a bare column of an aggregate query from the row max() chose; TEXT in
        # BINARY collation (UTF-8 bytes) sorts as Python sorts str.
        query = "SELECT id, max(row), point FROM spilled GROUP BY id ORDER BY id"
        for point_id, _row, held in spill.execute(query):
            payload, vector_size = pickle.loads(held)  # noqa: S301 - written above, by us
            yield Point(id=point_id, payload=payload, vector_size=vector_size)
    except sqlite3.Error as error:
        raise TryLaterError(
            f"points could not be sorted in a temporary SQLite database: {error}",
            "free space in the temporary directory (SQLITE_TMPDIR or TMPDIR), then try again",
        ) from error
    finally:
        spill.close()
