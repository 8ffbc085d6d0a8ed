"""The pre-restore copies a restore moved aside, and their retention (``[restore] keep_pre_restore``).

Each restore of the embedded stores moves the files it replaces to ``<path>.pre-restore-<id>``
(history.db with its ``-journal``, ``-wal``, ``-shm``). They are the user's old data: kept
unless the user sets ``keep_pre_restore``, then the newest N of each store are kept (by when
they were moved aside, as ``pre-restore.json`` in the state directory records it: a copy's
change time moves when ``forget --erase`` rewrites it) and a restore removes older ones
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
    """The copies retention removes: all but the newest ``keep`` (none when ``keep`` is None). Pure."""
    return [] if keep is None else found[keep:]


def apply_retention(targets: list[Path], keep: int | None, state_dir: Path) -> tuple[str, ...]:
    """Remove each store's pre-restore copies beyond the newest ``keep``; return the paths removed.

    None keeps every copy (the default). A copy that cannot be removed is logged and left.
    """
    removed: list[str] = []
    for target in targets:
        for copy in beyond(pre_restore_sets(target, state_dir), keep):
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
