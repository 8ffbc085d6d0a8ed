"""mem0's ``history.db`` (mem0ai 2.2.1 schema), read from copies only.

``history(id, memory_id, old_memory, new_memory, event, created_at, updated_at, is_deleted,
actor_id, role)`` and ``messages(id, session_scope, role, content, name, created_at)``. Older
databases may lack columns; missing ones read as NULL. Never open history.db through mem0:
its ``SQLiteManager`` migrates the table on every open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from memsync.model import HistoryEvent, MemoryHistory, MessageScope, parse_time
from memsync.stores.point_ids import normalize_point_id
from memsync.stores.sqlite_files import (
    CopyResult,
    connect_readonly,
    table_names,
    translate,
    vacuum_into,
)

HISTORY_COLUMNS = (
    "id", "memory_id", "old_memory", "new_memory", "event",
    "created_at", "updated_at", "is_deleted", "actor_id", "role",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryContents:
    """What a captured history.db holds, grouped for ``check``.

    Attributes:
        present: the file has a ``history`` table.
        memories: per memory_id, its last event (highest rowid) and row count. A UUID is
            keyed by its canonical spelling (lower case, hyphenated), as Qdrant and
            PostgreSQL return it: mem0 records the id as the caller spelt it, so an UPDATE
            or DELETE by ``ABC...`` is the same memory as the ADD of ``abc...``.
        rows: rows in ``history``.
        message_scopes: ``messages`` grouped by session scope, sorted by scope.
    """

    present: bool
    memories: dict[str, MemoryHistory]
    rows: int
    message_scopes: tuple[MessageScope, ...]


def capture(history_path: Path, dest: Path) -> CopyResult:
    """Copy history.db into ``dest`` with one ``VACUUM INTO``. Writes ``dest`` only.

    Raises:
        UnavailableError, TryLaterError: as ``vacuum_into``.
    """
    return vacuum_into(history_path, dest)


def _select_list(
    connection: sqlite3.Connection, alias: str, skip: frozenset[str] = frozenset()
) -> str:
    present = {str(row[1]) for row in connection.execute("PRAGMA table_info(history)")} - skip
    return ", ".join(
        f"{alias}.{column}" if column in present else "NULL" for column in HISTORY_COLUMNS
    )


def _event(row: tuple[object, ...]) -> HistoryEvent:
    rowid, hid, memory_id, old, new, event, created, updated, deleted, actor, role = row
    return HistoryEvent(
        int(rowid),  # type: ignore[call-overload]
        str(hid),
        str(memory_id),
        old if isinstance(old, str) else None,  # inline: once per row of a large file
        new if isinstance(new, str) else None,
        str(event).upper() if event is not None else "",
        created if isinstance(created, str) else None,
        updated if isinstance(updated, str) else None,
        deleted if isinstance(deleted, int) else None,
        actor if isinstance(actor, str) else None,
        role if isinstance(role, str) else None,
    )


def read_contents(copy: Path) -> HistoryContents:
    """Read a captured history.db: last event per memory, row count, message scopes.

    ``read_summary`` plus ``iter_memories`` gathered by memory_id. Runs on a copy; its queries
    may take a while on a large file. The events returned carry no ``old_memory`` (None),
    which check never reads. Reads only.

    Raises:
        UnavailableError: the file is not a valid SQLite database.
    """
    summary = read_summary(copy)
    if not summary.present:
        return summary
    memories = {memory.memory_id: memory for memory in iter_memories(copy)}
    return replace(summary, memories=memories)


def read_summary(copy: Path) -> HistoryContents:
    """``read_contents`` without the memories (``memories`` is {}): rows and message scopes.

    What a streaming check needs before ``iter_memories`` yields the memories one at a time.
    Reads only.

    Raises:
        UnavailableError: the file is not a valid SQLite database.
    """
    connection = connect_readonly(copy)
    try:
        tables = table_names(connection)
        scopes = _message_scopes(connection) if "messages" in tables else ()
        if "history" not in tables:
            return HistoryContents(present=False, memories={}, rows=0, message_scopes=scopes)
        rows = int(connection.execute("SELECT count(*) FROM history").fetchone()[0])
        return HistoryContents(present=True, memories={}, rows=rows, message_scopes=scopes)
    except sqlite3.Error as error:
        raise translate(error, copy, "read its history") from error
    finally:
        connection.close()


def iter_memories(copy: Path) -> Iterator[MemoryHistory]:
    """Yield ``read_contents``'s memories in ascending canonical memory_id order, one at a time.

    The same values as ``read_contents(copy).memories`` (last event by rowid, row count, keyed
    by ``normalize_point_id``), grouped and sorted by SQLite (its sorter spills to temporary
    files, so memory stays flat at any size): the order ``VectorStore.points_in_order``
    yields points in, for check's merge. Nothing when the file has no history table. Reads
    only.

    Raises:
        UnavailableError: the file is not a valid SQLite database (raised while iterating).
    """
    connection = connect_readonly(copy)
    try:
        if "history" not in table_names(connection):
            return
        connection.create_function("memsync_memory_id", 1, _canonical_id, deterministic=True)
        select = _select_list(connection, "h", frozenset({"old_memory"}))
        # One pass and one sort: SQLite takes a bare column of an aggregate query from the row
        # its one max() chose, so each group's columns are those of its last event.
        query = (
            f"SELECT {_KEY} AS k, count(*), max(h.rowid), {select} "  # noqa: S608
            "FROM history AS h WHERE memory_id IS NOT NULL GROUP BY k ORDER BY k"
        )
        for row in connection.execute(query):
            yield MemoryHistory(memory_id=row[0], last=_event(row[2:]), row_count=int(row[1]))
    except sqlite3.Error as error:
        raise translate(error, copy, "read its history") from error
    finally:
        connection.close()


# ``iter_memories``' key in SQL: a memory_id ``normalize_point_id`` keeps as it is (mem0's own,
# nearly every row) is its own key without a call into Python; any other goes through
# ``_canonical_id``. A text in lower case whose length is none of a UUID's other spellings (32
# hex digits, 38 with braces, 45 with ``urn:uuid:``) is kept: at 36 characters it is either the
# canonical spelling or no UUID at all. (Cheaper for SQLite than a GLOB of the UUID's pattern.)
_KEY = (
    "CASE WHEN typeof(memory_id) = 'text' AND length(memory_id) NOT IN (32, 38, 45) "
    "AND lower(memory_id) = memory_id THEN memory_id ELSE memsync_memory_id(memory_id) END"
)


def _canonical_id(memory_id: object) -> str:
    """``read_contents``'s key of a ``memory_id`` cell (never NULL here). Pure."""
    return normalize_point_id(str(memory_id))


def iter_events(copy: Path, memory_id: str | None = None) -> Iterator[HistoryEvent]:
    """Yield history events in rowid order (all, or one memory's). Reads only.

    One memory's events are matched in every spelling of its UUID mem0 may have recorded (mem0
    writes the id as its caller spelt it: capitals, no hyphens, braces, ``urn:uuid:``), as
    ``read_contents`` keys them.

    Raises:
        UnavailableError: the file is not a valid database or has no history table.
    """
    connection = connect_readonly(copy)
    try:
        select = f"SELECT h.rowid, {_select_list(connection, 'h')} FROM history AS h"
        if memory_id is None:
            cursor = connection.execute(f"{select} ORDER BY h.rowid")
        else:
            spellings = _spellings(memory_id)
            marks = ", ".join("?" * len(spellings))
            cursor = connection.execute(
                f"{select} WHERE lower(memory_id) IN ({marks}) ORDER BY h.rowid", spellings
            )
        for row in cursor:
            yield _event(row)
    except sqlite3.Error as error:
        raise translate(error, copy, "read its history") from error
    finally:
        connection.close()


def memory_ids_since(copy: Path, rowid: int) -> set[str]:
    """The memory ids of history rows after ``rowid``, keyed as ``iter_memories`` keys them.

    NULL ids are skipped; every other cell is normalised (``normalize_point_id``). Reads only.

    Raises:
        UnavailableError: the file is not a valid database or has no history table.
    """
    connection = connect_readonly(copy)
    try:
        cursor = connection.execute(
            "SELECT DISTINCT memory_id FROM history WHERE rowid > ? AND memory_id IS NOT NULL",
            (rowid,),
        )
        return {_canonical_id(row[0]) for row in cursor}
    except sqlite3.Error as error:
        raise translate(error, copy, "read its history") from error
    finally:
        connection.close()


def _spellings(memory_id: str) -> tuple[str, ...]:
    """The lower-case spellings of a memory id a history row may carry. Pure."""
    canonical = normalize_point_id(memory_id)
    if canonical == memory_id and "-" not in canonical:
        return (memory_id.lower(),)  # not a UUID: compared as written, case aside
    bare = canonical.replace("-", "")
    return (canonical, bare, "{" + canonical + "}", "urn:uuid:" + canonical)


def _message_scopes(connection: sqlite3.Connection) -> tuple[MessageScope, ...]:
    rows = connection.execute(
        "SELECT session_scope, COUNT(*), MAX(created_at) FROM messages "
        "GROUP BY session_scope ORDER BY session_scope"
    ).fetchall()
    return tuple(
        MessageScope(scope=str(scope or ""), row_count=int(count), newest_at=parse_time(newest))
        for scope, count, newest in rows
    )


def insert_repair_events(history_db: Path, events: list[HistoryEvent]) -> int:
    """Insert history rows that record a repair, in one short transaction.

    Rows follow docs/reference/contract.md ("The direct writes memsync may make"):
    ``memsync-<uuid4>`` ids, ``actor_id = "memsync"``. ``INSERT OR IGNORE``: re-inserting an id
    is a no-op, so a resumed plan never writes a row twice.
    Returns the rows inserted.

    Raises:
        TryLaterError: the database stays locked for 5 s.
        UnavailableError: it cannot be written.
    """
    connection = sqlite3.connect(history_db, timeout=5.0)
    try:
        with connection:
            cursor = connection.executemany(
                "INSERT OR IGNORE INTO history (id, memory_id, old_memory, new_memory, event, "
                "created_at, updated_at, is_deleted, actor_id, role) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        e.id,
                        e.memory_id,
                        e.old_memory,
                        e.new_memory,
                        e.event,
                        e.created_at,
                        e.updated_at,
                        e.is_deleted,
                        e.actor_id,
                        e.role,
                    )
                    for e in events
                ],
            )
            return int(cursor.rowcount)
    except sqlite3.Error as error:
        raise translate(error, history_db, "record repair events") from error
    finally:
        connection.close()


def delete_message_scope(history_db: Path, scope: str) -> int:
    """Delete the raw ``messages`` rows of one session scope. Returns rows deleted.

    Raises:
        TryLaterError, UnavailableError: as ``insert_repair_events``.
    """
    connection = sqlite3.connect(history_db, timeout=5.0)
    try:
        with connection:
            return int(
                connection.execute(
                    "DELETE FROM messages WHERE session_scope = ?", (scope,)
                ).rowcount
            )
    except sqlite3.Error as error:
        raise translate(error, history_db, "delete raw messages") from error
    finally:
        connection.close()


def last_rowid(history_db: Path) -> int:
    """The highest rowid of the ``history`` table; 0 when it is empty or absent. Reads only.

    mem0 only appends history rows, so rows above it are the ones written after this call.
    """
    if not history_db.exists():
        return 0
    connection = connect_readonly(history_db)
    try:
        if "history" not in table_names(connection):
            return 0
        found = connection.execute("SELECT max(rowid) FROM history").fetchone()[0]
    except sqlite3.Error as error:
        raise translate(error, history_db, "read the last history row") from error
    finally:
        connection.close()
    return int(found or 0)


def carry_rows_after(source: Path, target: Path, rowid: int) -> int:
    """Copy ``source``'s history rows above ``rowid`` into ``target``, in order; returns rows copied.

    ``INSERT OR IGNORE`` by row id: idempotent. Writes ``target`` in one transaction; reads
    ``source`` only.

    Raises:
        TryLaterError, UnavailableError: as ``insert_repair_events``.
    """
    if not source.exists():
        return 0
    columns = ", ".join(HISTORY_COLUMNS)
    connection = sqlite3.connect(f"file:{quote(str(target))}", uri=True, timeout=5.0)
    try:
        connection.execute("ATTACH DATABASE ? AS old", (f"file:{quote(str(source))}?mode=ro",))
        with connection:
            return int(
                connection.execute(
                    f"INSERT OR IGNORE INTO main.history ({columns}) SELECT {columns} "  # noqa: S608
                    "FROM old.history WHERE rowid > ? ORDER BY rowid",
                    (rowid,),
                ).rowcount
            )
    except sqlite3.Error as error:
        raise translate(error, target, "carry history rows over") from error
    finally:
        connection.close()
