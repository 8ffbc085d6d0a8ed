"""memsync's state directory: the operation lock and small atomic JSON files.

Mutating commands take ``operation.lock`` (an flock) for their duration; a second one gets
``LockedError`` (exit 12) naming the holder's pid and command line, read from the lock file.
"""

from __future__ import annotations

import glob
import json
import math
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from memsync import flock, utc
from memsync.errors import LockedError, TryLaterError
from memsync.model import CheckReport, Severity

logger = structlog.get_logger(__name__)

OPERATION_LOCK = "operation.lock"
RESTORE_JOURNAL = "restore-journal.json"


@contextmanager
def operation_lock(state_dir: Path, what: str) -> Iterator[None]:
    """Hold ``<state_dir>/operation.lock`` while the block runs (``memsync.flock``).

    Writes the holder's pid and command line into the file (for the next one's message).

    Raises:
        LockedError: another process holds it.
        TryLaterError: the state directory cannot be created or written.
    """
    path = state_dir / OPERATION_LOCK
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = flock.acquire(path)
    except flock.LockHeld as held:
        raise LockedError(
            f"{what}: another memsync operation holds {path} ({held.holder or 'an unknown process'})",
            "wait for it to finish, or stop it; the lock is released when it exits",
        ) from None
    except OSError as error:
        raise TryLaterError(
            f"state directory {state_dir} cannot be written: {error.strerror}",
            "set state_dir to a writable directory",
        ) from error
    with handle:
        yield


def write_json_atomic(path: Path, document: Any, mode: int = 0o600) -> None:
    """Write ``document`` as JSON to ``path`` atomically (temp file, fsync, rename, fsync dir)."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(temporary, mode)
    os.replace(temporary, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Flush a directory to disk (fsync) so a rename inside it is durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def unfinished_restore(state_dir: Path) -> str | None:
    """The snapshot id of a restore that died (its journal is still there), or None. Reads only."""
    path = state_dir / RESTORE_JOURNAL
    if not path.is_file():
        return None
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("snapshot_id"))
    except (OSError, ValueError):
        return "unknown"


def pre_restore_copies(targets: list[Path]) -> list[Path]:
    """The ``<target>.pre-restore-*`` copies beside each target. Reads only."""
    found: list[Path] = []
    for target in targets:
        if target.parent.is_dir():
            found += sorted(target.parent.glob(f"{glob.escape(target.name)}.pre-restore-*"))
    return found


PRE_RESTORE_SIDES = ("-journal", "-wal", "-shm")


@dataclass(frozen=True, slots=True, kw_only=True)
class PreRestoreCopy:
    """One pre-restore copy of a store: its path, bytes (with its side files), when moved aside."""

    path: Path
    size_bytes: int
    moved_at: float  # when a restore moved it aside (pre-restore.json; else its st_ctime)
    made_by_restore: bool = False  # pre-restore.json names it: retention may remove it

    @property
    def paths(self) -> tuple[Path, ...]:
        """The copy and each of its side files that exists."""
        sides = [Path(f"{self.path}{suffix}") for suffix in PRE_RESTORE_SIDES]
        return (self.path, *(side for side in sides if side.exists()))


# {"copies": [[aside path, when restore moved it aside (epoch s)], ...]}, oldest first
PRE_RESTORE_LEDGER = "pre-restore.json"


def record_pre_restore(state_dir: Path, asides: list[str], moved_at: float) -> None:
    """Note in ``<state_dir>/pre-restore.json`` that a restore moves ``asides`` aside now.

    Written before the move, so a copy a restore made is never missing from it (one whose
    restore rolled back is simply not there). The file's order is the order copies were moved
    aside (new paths are appended; paths gone are dropped): retention goes by it, not by a
    clock, nor by change times, which ``forget --erase`` refreshes when it rewrites a copy.
    """
    ledger = {
        path: at
        for path, at in pre_restore_ledger(state_dir).items()
        if (Path(path).exists() or Path(path).is_symlink()) and path not in asides
    }
    ledger.update(dict.fromkeys(asides, moved_at))
    copies = [[path, at] for path, at in ledger.items()]  # a list: JSON objects' keys get sorted
    write_json_atomic(state_dir / PRE_RESTORE_LEDGER, {"copies": copies})


def pre_restore_ledger(state_dir: Path) -> dict[str, float]:
    """``pre-restore.json``'s paths, oldest first, each with when it was moved aside (epoch s).

    {} when absent or unreadable; an entry whose time is not a finite number is dropped.
    Reads only.
    """
    try:
        document = json.loads((state_dir / PRE_RESTORE_LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    copies = document.get("copies") if isinstance(document, dict) else None
    ledger: dict[str, float] = {}
    for entry in copies if isinstance(copies, list) else []:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
            continue
        try:
            moved_at = float(entry[1])
        except (TypeError, ValueError, OverflowError):
            continue
        if math.isfinite(moved_at) and not isinstance(entry[1], bool):
            ledger.pop(entry[0], None)  # listed twice: the later place counts
            ledger[entry[0]] = moved_at
    return ledger


def pre_restore_sets(target: Path, state_dir: Path | None = None) -> list[PreRestoreCopy]:
    """The pre-restore copies of one store (``target``: its live path), newest first. Reads only.

    The copies ``pre-restore.json`` in ``state_dir`` names come first, newest moved aside
    first (the file's order); ``made_by_restore`` is True for them, the only ones retention
    removes. Other ``<target>.pre-restore-*`` files (moved aside by a memsync before 0.3, or the
    user's own) follow, by change time.
    """
    ledger = pre_restore_ledger(state_dir) if state_dir is not None else {}
    order = {path: index for index, path in enumerate(ledger)}
    found = []
    for path in pre_restore_copies([target]):
        if path.name.endswith(PRE_RESTORE_SIDES) or path.is_symlink():
            continue  # a side file goes with its copy; a symlink is nothing a restore made
        try:
            moved_at = ledger.get(str(path), path.stat().st_ctime)
            size = _tree_size(path) + sum(
                _tree_size(Path(f"{path}{suffix}"))
                for suffix in PRE_RESTORE_SIDES
                if Path(f"{path}{suffix}").exists()
            )
        except OSError:
            continue  # removed meanwhile
        copy = PreRestoreCopy(
            path=path, size_bytes=size, moved_at=moved_at, made_by_restore=str(path) in ledger
        )
        found.append(copy)
    return sorted(
        found,
        key=lambda copy: (
            copy.made_by_restore,
            order.get(str(copy.path), -1),
            copy.moved_at,
            str(copy.path),
        ),
        reverse=True,
    )


def _tree_size(path: Path) -> int:
    if path.is_dir() and not path.is_symlink():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return path.stat().st_size


RESTORED_TO = "restored-to.json"


def record_restored_to(state_dir: Path, dest: Path) -> None:
    """Note in ``<state_dir>/restored-to.json`` that ``restore --to`` writes a copy at ``dest``.

    Written before the copy, so ``forget --erase`` lists every copy memsync made
    (``erase.copies``); paths no longer there are dropped.
    """
    known = [path for path in restored_to(state_dir) if path.exists() and path != dest]
    write_json_atomic(state_dir / RESTORED_TO, {"copies": [*map(str, known), str(dest)]})


def restored_to(state_dir: Path) -> list[Path]:
    """The copies ``restore --to`` made (``record_restored_to``), oldest first. Reads only."""
    try:
        document = json.loads((state_dir / RESTORED_TO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    copies = document.get("copies") if isinstance(document, dict) else None
    return [Path(p) for p in copies if isinstance(p, str)] if isinstance(copies, list) else []


LAST_CHECK = "last-check.json"
_LAST_CHECK_MAX_BYTES = 64 * 1024 * 1024  # counts per scope: far more than any real one holds


def record_check(state_dir: Path, report: CheckReport) -> None:
    """Write ``<state_dir>/last-check.json``: when a check's capture was made and what it counted.

    ``{"checked_at": the vector capture's start, "memories": points of the memory collection,
    "scopes": count_scopes of them, "errors": error findings}``. Best effort: a state directory
    that cannot be written (a read-only user's check) is passed over, logged.
    """
    if report.scopes is None:
        return
    document = {
        "checked_at": utc.iso(report.window.vectors_at),
        "memories": report.points,
        "scopes": dict(report.scopes),
        "errors": report.count(Severity.ERROR),
    }
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_json_atomic(state_dir / LAST_CHECK, document)
    except OSError as error:
        logger.info("last_check_not_recorded", state_dir=str(state_dir), error=str(error))


def last_check(state_dir: Path) -> dict[str, Any] | None:
    """The ``last-check.json`` document (``checked_at`` parsed to a datetime), or None. Reads only.

    None when absent, unreadable or not of that shape (a lost or foreign state directory).
    """
    path = state_dir / LAST_CHECK
    try:
        found = path.stat()
        if not stat.S_ISREG(found.st_mode) or found.st_size > _LAST_CHECK_MAX_BYTES:
            return None  # a FIFO, a device (/dev/zero through a symlink) or no file check wrote
        document = json.loads(path.read_text(encoding="utf-8"))
        checked_at = utc.parse(document["checked_at"])
        memories, scopes = document["memories"], document["scopes"]
    except (OSError, ValueError, KeyError, TypeError, OverflowError, AttributeError):
        return None
    if type(memories) is not int or not isinstance(scopes, dict):
        return None
    return {**document, "checked_at": checked_at}


WINDOW_FILE = "window.json"


def window_left_open(state_dir: Path) -> dict[str, Any] | None:
    """The marker of a maintenance window whose memsync is gone, or None. Reads only.

    ``<state_dir>/window.json`` (``pid``, ``what``, ``opened_at``) is written before a window
    stops the app and removed once ``[app] start_command`` returned: when it is there and its
    pid no longer runs (or is this process: the start failed), the app may be down. An
    unreadable marker counts as left open (``{}``).
    """
    try:
        document = json.loads((state_dir / WINDOW_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict):
        return {}
    pid = document.get("pid")
    if isinstance(pid, int) and pid != os.getpid() and _running(pid):
        return None
    return document


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
