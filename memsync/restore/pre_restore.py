"""The pre-restore copies a restore moved aside, and their retention (``[restore] keep_pre_restore``).

Each restore of the embedded stores moves the files it replaces to ``<path>.pre-restore-<id>``
(history.db with its ``-journal``, ``-wal``, ``-shm``). They are the user's old data: kept
unless the user sets ``keep_pre_restore``, then the newest N of each store are kept (in the
order they were moved aside, as ``pre-restore.json`` in the state directory records it: a
copy's change time moves when ``forget --erase`` rewrites it) and a restore removes older ones
after its swap, as snapshot retention removes old snapshots. ``state.pre_restore_sets`` lists
them with their size (doctor's ``pre-restore-copy`` too).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import structlog

from memsync.state import PreRestoreCopy, fsync_dir, pre_restore_sets

logger = structlog.get_logger(__name__)


def beyond(found: list[PreRestoreCopy], keep: int | None) -> list[PreRestoreCopy]:
    """The copies retention removes: those a restore made, all but the newest ``keep``. Pure.

    None keeps every copy. Files ``pre-restore.json`` does not name (the user's own, or moved
    aside by a memsync before 0.3) are never removed, nor counted.
    """
    return [] if keep is None else [copy for copy in found if copy.made_by_restore][keep:]


def apply_retention(
    targets: list[Path], keep: int | None, state_dir: Path, moved_now: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Remove each store's pre-restore copies beyond the newest ``keep``; return the paths removed.

    None keeps every copy (the default). ``moved_now``: what this restore just moved aside,
    never removed by it, whatever the ledger says. A copy that cannot be removed is logged and
    left.
    """
    removed: list[str] = []
    for target in targets:
        for copy in beyond(pre_restore_sets(target, state_dir), keep):
            if str(copy.path) in moved_now:
                continue
            try:
                for path in copy.paths:
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
                    removed.append(str(path))
            except OSError as error:
                logger.warning(
                    "pre_restore_copy_not_removed", path=str(copy.path), error=str(error)
                )
                continue
            logger.info("pre_restore_copy_removed", path=str(copy.path), bytes=copy.size_bytes)
        if target.parent.is_dir():
            fsync_dir(target.parent)
    return tuple(removed)
