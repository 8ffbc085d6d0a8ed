"""mem0's history connection, let go and taken again so memsync can swap history.db under the app.

mem0ai 2.2.1's ``Memory.db`` is a ``SQLiteManager``: one ``sqlite3`` connection
(``connection``, opened with ``check_same_thread=False``) used under one ``threading.Lock``
(``_lock``) by every history read and write. ``release`` takes that lock and keeps it, closes the
connection (SQLite checkpoints a WAL file and removes its ``-wal``/``-shm`` when the last
connection closes) and sets ``connection`` to None: every history call of the app then waits
on the lock, none fails. ``reopen`` opens the file at the same path again (whatever file is there
then), puts back the journal mode, and lets the lock go.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .protocol import WAIT_FOR_APP_S, AgentRequestError

logger = logging.getLogger("memsync.agent")

JOURNAL_MODES = ("delete", "truncate", "persist", "memory", "wal", "off")


class HistoryConnection:
    """Releases and reopens ``memory.db``'s connection; thread-safe, each step idempotent."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self.released: dict[str, Any] | None = None  # path and journal mode while released
        self._inode: int | None = None  # the file the last reopen opened
        self._guard = threading.Lock()

    def _manager(self) -> Any:
        db = getattr(self.memory, "db", None)
        if db is None or not hasattr(db, "_lock") or not hasattr(db, "db_path"):
            raise AgentRequestError("failed", "this Memory has no SQLite history (Memory.db)")
        if str(db.db_path) == ":memory:":
            raise AgentRequestError("failed", "this Memory's history is in memory, not a file")
        return db

    def release(self) -> dict[str, Any]:
        """Close the history connection and hold mem0's history lock until ``reopen``.

        Returns ``{"released": bool, "path": str, "journal_mode": str}`` (``released`` False:
        released already). Raises AgentRequestError ("busy") when the lock stays taken 30 s.
        """
        with self._guard:
            if self.released is not None:
                return {"released": False, **self.released}
            self._close(self._manager())
            assert self.released is not None
            logger.info("memsync agent: history connection released (%s)", self.released["path"])
            return {"released": True, **self.released}

    def reopen(self, journal_mode: str | None = None) -> dict[str, Any]:
        """Open the file at the history path now, journal mode back; let history calls go on.

        ``journal_mode``: the mode to put back (default: the mode at ``release``). Not released
        but the path names another file than the one last opened: close and open it again.
        Returns ``{"reopened": bool, "path": str, "inode": int, "journal_mode": str}``.

        Raises:
            AgentRequestError: ("failed") no file is at the path (a swap half done): history
                stays released, the app's history calls wait; ("bad-request") a bad mode.
        """
        if journal_mode is not None and str(journal_mode).lower() not in JOURNAL_MODES:
            raise AgentRequestError("bad-request", f"journal_mode must be one of {JOURNAL_MODES}")
        with self._guard:
            db = self._manager()
            path = str(Path(db.db_path).resolve())
            if self.released is None:
                if self._inode is None or self._inode == _inode(path):
                    return {"reopened": False, "path": path, "inode": _inode(path),
                            "journal_mode": None}  # fmt: skip
                self._close(db)  # a file was swapped in without a release: take it too
            assert self.released is not None
            mode = str(journal_mode or self.released["journal_mode"]).lower()
            try:  # mode=rw: never create an empty history.db where the swap left none
                connection = sqlite3.connect(
                    f"file:{quote(path)}?mode=rw", uri=True, check_same_thread=False
                )
            except sqlite3.Error as error:
                raise AgentRequestError("failed", f"cannot open history {path}: {error}") from None
            try:
                if str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower() != mode:
                    connection.execute(f"PRAGMA journal_mode={mode}")
            except sqlite3.Error as error:  # busy: the file keeps its own mode, history works
                logger.warning(
                    "memsync agent: journal mode %s not set on %s: %s", mode, path, error
                )
            db.connection = connection
            self._inode = _inode(path)
            self.released = None
            db._lock.release()
            logger.info("memsync agent: history connection reopened (%s, %s)", path, mode)
            return {"reopened": True, "path": path, "inode": self._inode, "journal_mode": mode}

    def _close(self, db: Any) -> None:
        """Take mem0's history lock (kept), close the connection, record path and mode."""
        if not db._lock.acquire(timeout=WAIT_FOR_APP_S):
            raise AgentRequestError("busy", "mem0's history lock stayed taken for 30 s")
        try:
            mode = "delete"
            if db.connection is not None:
                mode = str(db.connection.execute("PRAGMA journal_mode").fetchone()[0])
                db.connection.close()
                db.connection = None
        except BaseException:
            db._lock.release()
            raise
        self.released = {"path": str(Path(db.db_path).resolve()), "journal_mode": mode.lower()}


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
