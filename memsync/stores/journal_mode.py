"""The journal mode of a live SQLite file: read it, switch it (WAL or rollback), prove it.

mem0ai 2.2.1 (history.db) and qdrant-client 1.20 (each collection's ``storage.sqlite``) open
their files in SQLite's default rollback mode with Python's 5 s busy timeout. In WAL mode a
reader (a capture's ``VACUUM INTO``) and the app's writer never wait for each other. The mode
is stored in the file header (bytes 18 and 19 are 2 in WAL mode), so it persists: a connection
that is already open (the app's) notices the new header at its next transaction and carries on
in WAL mode (measured with SQLite 3.40.1: a mem0 process writing continuously while both files
were switched from another process, zero failed writes; docs/how-to/wal-mode.md).

Only ``memsync.tune`` calls the switches, and only with the store free or the app's writes
paused through its agent. Leaving WAL mode needs every other connection closed (SQLite refuses
it with "database is locked" at once otherwise).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from memsync.errors import UnavailableError
from memsync.stores.sqlite_files import (
    header_journal_mode,
    present,
    require_regular_file,
    roll_back_hot_journal,
    translate,
)
from memsync.stores.vector_store import VectorStore

WAL = "wal"
ROLLBACK = "rollback"
# What ``PRAGMA journal_mode`` answers for each mode memsync sets (DELETE is mem0's default).
PRAGMA_VALUE = {WAL: "wal", ROLLBACK: "delete"}
SWITCH_TIMEOUT_S = 5.0  # a busy file is waited for this long (the app's own busy timeout)
RETRY_PAUSE_S = 0.05  # between tries of a switch SQLite refused at once as busy


def probe_mode(path: Path) -> str:
    """Return ``"wal"`` or ``"rollback"`` from ``path``'s header. Reads 20 bytes, no lock.

    Raises:
        UnavailableError: the file is unreadable or not an SQLite database.
    """
    return header_journal_mode(path)


def switch(path: Path, mode: str, timeout_s: float = SWITCH_TIMEOUT_S) -> str:
    """Set ``path``'s journal mode to ``mode`` (``"wal"`` or ``"rollback"``); return SQLite's answer.

    Opens a read-write connection of its own (never through mem0), runs ``PRAGMA
    journal_mode=WAL`` (or ``=DELETE``), closes it. To WAL: one short write transaction on the
    header, waiting up to ``timeout_s`` (seconds) for the app's transaction to end, and trying
    again every 0.05 s when SQLite refuses at once to avoid a deadlock (a CI run saw it while a
    mem0 process wrote continuously). To rollback: needs
    every other connection closed. Writes the file's header. Idempotent (the mode it already
    has is set again without a write).

    Returns:
        ``PRAGMA journal_mode``'s answer (``"wal"`` / ``"delete"``; another value means the
        file system refused the mode, see ``verify``).

    Raises:
        TryLaterError: the file stayed busy (a writer held it, or another connection is open
            when leaving WAL).
        UnavailableError: the file is missing, unreadable or not a database.
    """
    require_regular_file(path)
    deadline = time.monotonic() + timeout_s
    while True:
        connection = sqlite3.connect(path, timeout=max(deadline - time.monotonic(), 0.0))
        try:
            statement = f"PRAGMA journal_mode={PRAGMA_VALUE[mode].upper()}"
            row = connection.execute(statement).fetchone()
            return str(row[0]).lower() if row else ""
        except sqlite3.OperationalError as error:
            # SQLite answers "locked" at once, without its busy handler, when waiting could
            # deadlock (another connection holds a lock while wanting ours); try again until
            # the deadline. Leaving WAL with another connection open never clears: no retry.
            if not _busy(error) or mode != WAL or time.monotonic() >= deadline:
                raise translate(error, path, f"switch it to {mode} mode") from error
        except sqlite3.Error as error:
            raise translate(error, path, f"switch it to {mode} mode") from error
        finally:
            connection.close()
        time.sleep(RETRY_PAUSE_S)


def _busy(error: sqlite3.OperationalError) -> bool:
    return "locked" in str(error) or "busy" in str(error)


def verify(path: Path, timeout_s: float = SWITCH_TIMEOUT_S) -> str:
    """Re-open ``path`` in a new connection and return its mode: ``"wal"`` or ``"rollback"``.

    Reads ``PRAGMA journal_mode`` (SQLite's own answer, not only the header), so a file system
    that cannot share WAL memory (SQLite falls back to another mode) is caught. A read-write
    open: on a WAL file nobody has open it makes ``-wal``/``-shm`` and removes them on close.
    Reads only.

    Raises:
        UnavailableError: the file cannot be opened or read, or SQLite reports another mode
            (``memory``, ``off``, ``truncate``, ``persist``: the message names it).
        TryLaterError: the file stayed busy for ``timeout_s``.
    """
    require_regular_file(path)
    connection = sqlite3.connect(path, timeout=timeout_s)
    try:
        answer = str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    except sqlite3.Error as error:
        raise translate(error, path, "read its journal mode") from error
    finally:
        connection.close()
    if answer == "wal":
        return WAL
    if answer == "delete":
        return ROLLBACK
    raise UnavailableError(
        f"SQLite file {path} is in journal mode {answer!r}, neither WAL nor rollback (delete)",
        "something other than mem0 set it; set it back with sqlite3 FILE 'PRAGMA journal_mode=DELETE'",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveFile:
    """One live SQLite file of the deployment, as its header and size say now.

    Attributes:
        path: the live file.
        label: ``"history.db"`` or ``"collection <name>"`` (for messages).
        mode: ``"wal"`` or ``"rollback"`` from the header; None when it has no SQLite header yet.
        size_bytes: the main file's size (without ``-wal``/``-journal``).
    """

    path: Path
    label: str
    mode: str | None
    size_bytes: int


def live_files(store: VectorStore, history_db: Path) -> list[LiveFile]:
    """The deployment's live SQLite files: every collection's ``storage.sqlite``, then history.db.

    Collections in capture order (the memory collection first, as ``VectorStore.capture``),
    each listed in the store's metadata and present on disk; history.db when it exists. Reads
    metadata, headers and sizes only (no SQLite open, no lock).

    Raises:
        UnavailableError: the vector store's metadata exists but is unreadable or invalid, or a
            path above a file denies access.
    """
    found: list[tuple[str, Path]] = []
    # a server backend (pgvector) has no live files here: only history.db
    collections = (store.read_collections() or {}) if store.location is not None else {}
    for name in sorted(collections, key=lambda name: (name != store.collection, name)):
        found.append((f"collection {name}", store.collection_file(name)))
    found.append(("history.db", history_db))
    files = []
    for label, path in found:
        if not present(path) or not path.is_file():
            continue
        try:
            mode: str | None = header_journal_mode(path)
        except UnavailableError:
            mode = None
        files.append(LiveFile(path=path, label=label, mode=mode, size_bytes=path.stat().st_size))
    return files


def roll_back_hot_journals(store: VectorStore, history_db: Path) -> None:
    """Roll back the hot journals a killed writer left: history.db's, then the vector store's.

    What any writer's open does (SQLite rolls back only a journal no live writer holds); the
    commands that write, and ``snapshot create`` while no app holds the store, call it before
    they capture. Idempotent.

    Raises:
        TryLaterError: a file is busy; UnavailableError: a file is unreadable.
    """
    if history_db.is_file():
        roll_back_hot_journal(history_db)
    store.prepare_for_writing()
