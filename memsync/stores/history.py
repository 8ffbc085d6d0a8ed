"""mem0's ``history.db`` (mem0ai 2.2.1 schema), read from copies only.

``history(id, memory_id, old_memory, new_memory, event, created_at, updated_at, is_deleted,
actor_id, role)`` and ``messages(id, session_scope, role, content, name, created_at)``. Older
databases may lack columns; missing ones read as NULL. Never open history.db through mem0:
its ``SQLiteManager`` migrates the table on every open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memsync.model import HistoryEvent, MemoryHistory, MessageScope
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
        memories: per memory_id, its last event (highest rowid) and row count.
        rows: rows in ``history``.
        message_scopes: ``messages`` grouped by session scope, sorted by scope.
    """

    present: bool
    memories: dict[str, MemoryHistory]
    rows: int
    message_scopes: tuple[MessageScope, ...]


def parse_time(value: object) -> datetime | None:
    """Parse a stored ISO 8601 timestamp to aware UTC; naive values are taken as UTC.

    Returns None for NULL or unparseable values (they never count as "in the window").
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def capture(history_path: Path, dest: Path) -> CopyResult:
    """Copy history.db into ``dest`` with one ``VACUUM INTO``. Writes ``dest`` only.

    Raises:
        UnavailableError, TryLaterError: as ``vacuum_into``.
    """
    return vacuum_into(history_path, dest)


def _select_list(connection: sqlite3.Connection, alias: str) -> str:
    present = {str(row[1]) for row in connection.execute("PRAGMA table_info(history)")}
    return ", ".join(
        f"{alias}.{column}" if column in present else "NULL" for column in HISTORY_COLUMNS
    )


def _event(row: tuple[object, ...]) -> HistoryEvent:
    rowid, hid, memory_id, old, new, event, created, updated, deleted, actor, role = row
    return HistoryEvent(
        rowid=int(rowid),  # type: ignore[call-overload]
        id=str(hid),
        memory_id=str(memory_id),
        old_memory=old if isinstance(old, str) else None,
        new_memory=new if isinstance(new, str) else None,
        event=str(event).upper() if event is not None else "",
        created_at=parse_time(created),
        updated_at=parse_time(updated),
        is_deleted=deleted if isinstance(deleted, int) else None,
        actor_id=actor if isinstance(actor, str) else None,
        role=role if isinstance(role, str) else None,
    )


def read_contents(copy: Path) -> HistoryContents:
    """Read a captured history.db: last event per memory, row count, message scopes.

    Runs on a copy; its queries may take a while on a large file. Reads only.

    Raises:
        UnavailableError: the file is not a valid SQLite database.
    """
    connection = connect_readonly(copy)
    try:
        tables = table_names(connection)
        scopes = _message_scopes(connection) if "messages" in tables else ()
        if "history" not in tables:
            return HistoryContents(present=False, memories={}, rows=0, message_scopes=scopes)
        query = (
            f"SELECT h.rowid, {_select_list(connection, 'h')}, g.n FROM history AS h "
            "JOIN (SELECT MAX(rowid) AS last, COUNT(*) AS n FROM history "
            "WHERE memory_id IS NOT NULL GROUP BY memory_id) AS g ON h.rowid = g.last"
        )
        memories: dict[str, MemoryHistory] = {}
        rows = 0
        for row in connection.execute(query):
            event = _event(row[:-1])
            memories[event.memory_id] = MemoryHistory(
                memory_id=event.memory_id, last=event, row_count=int(row[-1])
            )
            rows += int(row[-1])
        return HistoryContents(present=True, memories=memories, rows=rows, message_scopes=scopes)
    except sqlite3.Error as error:
        raise translate(error, copy, "read its history") from error
    finally:
        connection.close()


def iter_events(copy: Path, memory_id: str | None = None) -> Iterator[HistoryEvent]:
    """Yield history events in rowid order (all, or one memory's). Reads only.

    Raises:
        UnavailableError: the file is not a valid database or has no history table.
    """
    connection = connect_readonly(copy)
    try:
        select = f"SELECT h.rowid, {_select_list(connection, 'h')} FROM history AS h"
        if memory_id is None:
            cursor = connection.execute(f"{select} ORDER BY h.rowid")
        else:
            cursor = connection.execute(f"{select} WHERE memory_id = ? ORDER BY h.rowid", (memory_id,))
        for row in cursor:
            yield _event(row)
    except sqlite3.Error as error:
        raise translate(error, copy, "read its history") from error
    finally:
        connection.close()


def _message_scopes(connection: sqlite3.Connection) -> tuple[MessageScope, ...]:
    rows = connection.execute(
        "SELECT session_scope, COUNT(*), MAX(created_at) FROM messages "
        "GROUP BY session_scope ORDER BY session_scope"
    ).fetchall()
    return tuple(
        MessageScope(scope=str(scope or ""), row_count=int(count), newest_at=parse_time(newest))
        for scope, count, newest in rows
    )
