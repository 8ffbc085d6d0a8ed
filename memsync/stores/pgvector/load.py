"""Restore's SQL: a snapshot's table files loaded into new tables, swapped in by renames in one transaction.

A restore of table ``T`` from snapshot ``S`` (``restore.pgvector`` orchestrates):

1. ``load_table``: ``T_restore_<s>`` is created from ``schema.json``'s columns, filled by
   ``COPY ... FROM STDIN`` in the file's format (binary, or CSV with a header) and given ``schema.json``'s indexes under
   staged names (the primary key becomes a constraint again), then ANALYZEd.
2. ``swap``: ONE transaction renames the live ``T`` aside to ``T_pre_restore_<s>`` (its indexes
   and constraints too, so their names are free), then the staged table and its indexes to the
   names the snapshot recorded: mem0's ``CREATE INDEX IF NOT EXISTS T_hnsw_idx`` finds the
   restored table's. Nothing is ever dropped but memsync's own staged tables (``drop_tables``).

Erasure reaches the tables moved aside: ``pre_restore_tables``, ``erase_rows``.
Every name is at most 63 bytes (PostgreSQL's limit): a longer one is cut and given a hash.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memsync.errors import TryLaterError, UnavailableError
from memsync.stores.pgvector import ddl, rows
from memsync.stores.pgvector.connect import first_line

MAX_NAME_BYTES = 63
DOES_NOT_LOAD = (  # the hint when the server refuses a snapshot's rows: the file's fault
    "the snapshot's export does not load: memsync snapshot verify ID names the damage; "
    "restore another snapshot"
)
LOCK_TIMEOUT_S = 10
_EXISTS = "SELECT to_regclass(quote_ident(%s)) IS NOT NULL"
_INDEX_NAMES = """
SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
WHERE x.indrelid = to_regclass(quote_ident(%s)) ORDER BY i.relname"""
# the live table's owner and its grants (PUBLIC is grantee 0), before it moves aside
_OWNER = """
SELECT pg_get_userbyid(c.relowner), current_user FROM pg_class c
WHERE c.oid = to_regclass(quote_ident(%s))"""
_MEMBER = """
SELECT pg_get_userbyid(c.relowner), current_user, pg_has_role(current_user, c.relowner, 'MEMBER')
FROM pg_class c WHERE c.oid = to_regclass(quote_ident(%s))"""
_GRANTS = """
SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,
       a.privilege_type
FROM pg_class c, aclexplode(c.relacl) a
WHERE c.oid = to_regclass(quote_ident(%s)) AND a.grantee <> c.relowner
ORDER BY 1, 2"""
_PRIMARY_KEY = """
SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(quote_ident(%s)) AND contype = 'p'"""
_ASIDE = """
SELECT c.relname FROM pg_class c
WHERE c.relkind = 'r' AND pg_table_is_visible(c.oid)
  AND (starts_with(c.relname, %s) OR strpos(c.relname, %s) > 0)
ORDER BY c.relname"""


def name(base: str, suffix: str) -> str:
    """``<base>_<suffix>`` as a PostgreSQL name of at most 63 bytes. Pure.

    A longer one keeps ``suffix`` whole and cuts ``base``, adding a hash of all of ``base``
    (``<cut base>_<hash>_<suffix>``): ``_pre_restore_<id>`` stays findable (``aside_marks``).
    """
    whole = f"{base}_{suffix}"
    if len(whole.encode()) <= MAX_NAME_BYTES:
        return whole
    room = MAX_NAME_BYTES - len(suffix.encode()) - 10  # "_" + 8 hex digits + "_"
    cut = base.encode()[: max(room, 0)].decode(errors="ignore")
    return f"{cut}_{_digest(base)}_{suffix}"[-MAX_NAME_BYTES:]


def _digest(base: str) -> str:
    return hashlib.sha256(base.encode()).hexdigest()[:8]


def tag(snapshot_id: str) -> str:
    """A snapshot id as a lower-case name part (``20261201T1925Z`` -> ``20261201t1925z``). Pure."""
    return re.sub(r"[^a-z0-9]+", "_", snapshot_id.lower()).strip("_")


def aside_prefix(table: str) -> str:
    """The prefix of every table a restore moved ``table`` aside to, when its name fits. Pure."""
    return f"{table}_pre_restore_"


def aside_marks(table: str) -> tuple[str, str]:
    """(the prefix of a fitting aside name, the mark inside a cut one: ``_<hash>_pre_restore_``)."""
    return aside_prefix(table), f"_{_digest(table)}_pre_restore_"


def exists(connection: Any, table: str) -> bool:
    """Whether ``table`` exists (resolved as mem0 resolves it). Reads only."""
    found = _run(
        connection, f"looking up {table}", lambda c: c.execute(_EXISTS, (table,)).fetchone()
    )
    return bool(found[0])


def load_table(
    connection: Any, staged: str, shape: dict[str, Any], path: Path
) -> tuple[dict[str, str], int]:
    """Create ``staged`` from ``shape`` (a ``schema.json`` table), COPY ``path`` in (binary or CSV), index it.

    The indexes are built after the rows are in. A ``staged`` table a former attempt left is
    dropped first (it is memsync's own). Commits. Returns ``{staged index name: the name the
    snapshot recorded}`` and the rows the COPY loaded, which are the rows the export recorded
    (``shape["rows"]``).

    Raises:
        UnavailableError: a statement fails (the message names the table and the server's error).
        UnavailableError: reading ``path`` fails (missing, unreadable), or it loads another
            number of rows than the export recorded (nothing committed).
    """
    import psycopg
    from psycopg import sql

    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t))
        for n, t in ddl.columns(staged, shape)
    )
    renames: dict[str, str] = {}
    loaded = [0]

    def work(cursor: Any) -> None:
        cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(staged)))
        # prepared: the server runs exactly one statement (a snapshot's text cannot add another)
        cursor.execute(
            sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(staged), columns), prepare=True
        )
        try:
            binary = rows.is_binary(path)
            statement = sql.SQL(
                "COPY {} FROM STDIN (FORMAT binary)"
                if binary
                else "COPY {} FROM STDIN (FORMAT csv, HEADER)"
            ).format(sql.Identifier(staged))
            with path.open("rb") as source, cursor.copy(statement) as copy:
                while block := source.read(1 << 20):
                    copy.write(block)
        except OSError as error:  # the snapshot's file: missing or unreadable (exit 11)
            raise UnavailableError(
                f"reading {path} for {staged} failed: {error.strerror or error}",
                "memsync snapshot verify ID names the damage; restore another snapshot",
            ) from None
        except psycopg.Error as error:  # what the server refused to load is the file's
            if cursor.connection.broken:
                raise  # the connection, not the file
            raise UnavailableError(
                f"loading {staged} from {path.name}{_where(error, binary)} failed: "
                f"{first_line(error)}",
                DOES_NOT_LOAD,
            ) from None
        loaded[0] = cursor.rowcount
        if isinstance(shape.get("rows"), int) and loaded[0] != shape["rows"]:
            raise UnavailableError(
                f"loading {staged}: {path} gave {loaded[0]} rows, but its export recorded "
                f"{shape['rows']}; nothing was changed",
                "memsync snapshot verify ID names the damage; restore another snapshot",
            )
        for number, ddl_text in enumerate(shape.get("indexes") or []):
            original, statement = ddl.index_statement(ddl_text, staged, name(staged, f"i{number}"))
            renames[name(staged, f"i{number}")] = original
            try:
                cursor.execute(statement, prepare=True)
                if original.endswith("_pkey"):
                    index = sql.Identifier(name(staged, f"i{number}"))
                    cursor.execute(
                        sql.SQL(
                            "ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY USING INDEX {}"
                        ).format(sql.Identifier(staged), index, index)
                    )
            except psycopg.errors.IntegrityError as error:  # a NULL or twice-listed id: the file's
                raise UnavailableError(
                    f"loading {staged} from {path.name} failed: {first_line(error)}",
                    DOES_NOT_LOAD,
                ) from None
        cursor.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(staged)))

    _run(connection, f"loading {staged}", work)
    return renames, loaded[0]


def swap(connection: Any, tables: Sequence[dict[str, Any]]) -> list[str]:
    """In ONE transaction: each live table (and its indexes) aside, each staged one into place.

    ``tables``: ``{"live", "staged" (None: the snapshot has no such table), "aside",
    "indexes": {staged index: name to give it}}``. A live table that does not exist is not
    moved. Waits at most ``LOCK_TIMEOUT_S`` for the app's transactions on the tables.
    Returns the tables moved aside. Commits; on any error nothing changed.

    Raises:
        TryLaterError: a lock was not granted in time (exit 75: the app holds a transaction open).
        UnavailableError: a statement fails.
    """
    from psycopg import sql

    moved: list[str] = []

    def work(cursor: Any) -> None:
        cursor.execute(
            sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{LOCK_TIMEOUT_S}s"))
        )
        access: dict[str, tuple[str, str, list[tuple[str, str]]]] = {}
        for table in tables:
            if bool(cursor.execute(_EXISTS, (table["live"],)).fetchone()[0]):
                owner, me = cursor.execute(_OWNER, (table["live"],)).fetchone()
                grants = cursor.execute(_GRANTS, (table["live"],)).fetchall()
                access[table["live"]] = (owner, me, grants)
                _rename_aside(cursor, table["live"], table["aside"])
                moved.append(table["aside"])
        for table in tables:
            if table["staged"] is None:
                continue
            for staged_index, final in sorted(table["indexes"].items()):
                cursor.execute(
                    sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                        sql.Identifier(staged_index), sql.Identifier(final)
                    )
                )
            cursor.execute(
                sql.SQL("ALTER TABLE {} RENAME TO {}").format(
                    sql.Identifier(table["staged"]), sql.Identifier(table["live"])
                )
            )
            if table["live"] in access:
                _give_access(cursor, table["live"], *access[table["live"]])

    _run(connection, "swapping the restored tables in", work)
    return moved


def require_vector_extension(connection: Any) -> None:
    """Refuse (exit 11) a database without pgvector's ``vector`` type: nothing could be loaded.

    A database created since the snapshot (a new server, a dropped database) has no extension
    until a superuser creates it. Reads the catalog only.

    Raises:
        UnavailableError: the extension is not installed in this database.
    """
    found = _run(
        connection,
        "restore",
        lambda c: c.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone(),
    )
    if found is None:
        raise UnavailableError(
            "restore: this database has no vector extension (pgvector), so no table of the "
            "snapshot can be created; nothing was changed",
            "CREATE EXTENSION vector (as a superuser, in this database), then run the restore "
            "again",
        )


def require_owner(connection: Any, live: Sequence[str]) -> None:
    """Refuse before loading anything when memsync's role may not replace the live tables.

    Renaming a table aside needs its owner's rights, and giving the restored one to that owner
    needs membership in its role: ``pg_has_role(current_user, owner, 'MEMBER')`` (true for a
    superuser). Reads the catalog only.

    Raises:
        UnavailableError: a live table's owner is a role memsync's role is not a member of.
    """

    def work(cursor: Any) -> None:
        for table in live:
            row = cursor.execute(_MEMBER, (table,)).fetchone()
            if row is not None and not row[2]:
                owner, me = row[0], row[1]
                raise _OwnerError(
                    f"{me} may not replace {table}, which belongs to {owner}, the role the app "
                    f"writes as; connect memsync as {owner}, or GRANT {owner} TO {me}"
                )

    _run(connection, "restore", work)


def _give_access(
    cursor: Any, table: str, owner: str, me: str, grants: Sequence[tuple[str, str]]
) -> None:
    """The restored ``table`` gets the owner and grants of the table it replaces (the app's).

    memsync created it, so its role owns it; the app's role (the old owner) must keep writing.
    Raises (through ``_run``) when memsync's role may not give it away: it must be a superuser
    or a member of the owner's role, or be that role.
    """
    from psycopg import sql

    if owner != me:
        try:
            cursor.execute(
                sql.SQL("ALTER TABLE {} OWNER TO {}").format(
                    sql.Identifier(table), sql.Identifier(owner)
                )
            )
        except Exception as error:  # noqa: BLE001 - re-raised with the roles named
            raise _OwnerError(
                f"the restored {table} would belong to {me}, not to {owner}, the role the app "
                f"writes as ({first_line(error)}); connect memsync as {owner}, or GRANT {owner} "
                f"TO {me}"
            ) from None
    for grantee, privilege in grants:
        target = sql.SQL("PUBLIC") if grantee == "PUBLIC" else sql.Identifier(grantee)
        cursor.execute(
            sql.SQL("GRANT {} ON {} TO {}").format(
                sql.SQL(privilege), sql.Identifier(table), target
            )
        )


class _OwnerError(Exception):
    """The restored table cannot be given to the live table's owner (raised as UnavailableError)."""


def _rename_aside(cursor: Any, live: str, aside: str) -> None:
    """Rename ``live``'s indexes (a primary key's constraint follows) and then ``live`` to ``aside``."""
    from psycopg import sql

    for number, (index,) in enumerate(cursor.execute(_INDEX_NAMES, (live,)).fetchall()):
        cursor.execute(
            sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                sql.Identifier(index), sql.Identifier(name(aside, f"i{number}"))
            )
        )
    cursor.execute(
        sql.SQL("ALTER TABLE {} RENAME TO {}").format(sql.Identifier(live), sql.Identifier(aside))
    )


def drop_tables(connection: Any, staged: Sequence[str]) -> None:
    """Drop memsync's own staged tables (a rolled-back restore's). Idempotent. Commits."""
    from psycopg import sql

    def work(cursor: Any) -> None:
        for table in staged:
            cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))

    _run(connection, "dropping staged tables", work)


def pre_restore_tables(connection: Any, tables: Sequence[str]) -> list[str]:
    """The ``<table>_pre_restore_*`` tables of each of ``tables`` (visible ones). Reads only."""

    def work(cursor: Any) -> list[str]:
        return [
            row[0]
            for table in tables
            for row in cursor.execute(_ASIDE, aside_marks(table)).fetchall()
        ]

    found: list[str] = _run(connection, "listing pre-restore tables", work)
    return found


def pre_restore_scope_ids(
    connect: Callable[..., Any], tables: Sequence[str], scope: Mapping[str, str]
) -> set[str]:
    """Ids of the rows whose payload holds ``scope`` in every ``<table>_pre_restore_*`` table.

    ``connect``: ``PgVector.connect``. Reads only.

    Raises:
        UnavailableError: the server refuses a statement.
    """
    import json

    from psycopg import sql

    found: set[str] = set()
    wanted = json.dumps(dict(scope))
    with connect() as connection:
        for table in pre_restore_tables(connection, tables):
            query = sql.SQL("SELECT id::text FROM {} WHERE payload @> %s::jsonb").format(
                sql.Identifier(table)
            )

            def work(cursor: Any, statement: Any = query) -> list[Any]:
                return list(cursor.execute(statement, (wanted,)).fetchall())

            found |= {row[0] for row in _run(connection, f"reading {table}", work)}
    return found


def erase_rows(connection: Any, table: str, ids: Sequence[str]) -> int:
    """Delete rows whose ``id`` is in ``ids`` from ``table``, then ``VACUUM FULL`` it.

    VACUUM FULL rewrites the table into new files (no app uses a table moved aside), so the
    deleted rows' bytes leave its data files. Returns the rows deleted. Idempotent.
    """
    from psycopg import sql

    def work(cursor: Any) -> int:
        query = sql.SQL("DELETE FROM {} WHERE id::text = ANY(%s)").format(sql.Identifier(table))
        return int(cursor.execute(query, (list(ids),)).rowcount)

    deleted: int = _run(connection, f"erasing rows of {table}", work)
    autocommit = connection.autocommit
    connection.autocommit = True  # VACUUM cannot run in a transaction block
    try:
        _run(
            connection,
            f"VACUUM FULL of {table}",
            lambda c: c.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table))),
        )
    finally:
        connection.autocommit = autocommit
    return deleted


def _where(error: Any, binary: bool) -> str:
    """`` at row N`` (binary) or `` at line N`` (CSV) from the server's COPY context, or ""."""
    context = str(getattr(error.diag, "context", None) or "")
    found = re.search(r"\bCOPY [^,]*, line (\d+)", context)
    return f" at {'row' if binary else 'line'} {found.group(1)}" if found else ""


def _run(connection: Any, what: str, work: Callable[[Any], Any]) -> Any:
    """Run ``work(cursor)`` in one committed transaction (outside autocommit); errors translated."""
    import psycopg

    try:
        if not connection.autocommit:
            with connection.transaction(), connection.cursor() as cursor:
                return work(cursor)
        with connection.cursor() as cursor:
            return work(cursor)
    except _OwnerError as error:
        raise UnavailableError(f"{what}: {error}") from None
    except psycopg.errors.LockNotAvailable as error:
        open_sessions = _sessions_in_transaction(connection)
        raise TryLaterError(
            f"{what}: a lock on the tables was not granted within {LOCK_TIMEOUT_S} s "
            f"({first_line(error)})"
            + (f"; open transactions: {open_sessions}" if open_sessions else ""),
            "run again once that session ends its transaction (pg_stat_activity; "
            "pg_terminate_backend(pid) ends it)",
        ) from None
    except psycopg.errors.UndefinedObject as error:  # type "vector" does not exist
        raise UnavailableError(
            f"{what} failed: {first_line(error)}",
            "the database needs the vector extension: CREATE EXTENSION vector (as a superuser), "
            "then run the restore again",
        ) from None
    except psycopg.errors.DataError as error:  # the snapshot's data, not the role's rights
        raise UnavailableError(
            f"{what} failed: {first_line(error)}",
            "the snapshot's export does not load: memsync snapshot verify ID, or restore "
            "another snapshot",
        ) from None
    except psycopg.Error as error:
        raise UnavailableError(
            f"{what} failed: {first_line(error)}",
            "the role needs CREATE on the schema and to own mem0's tables",
        ) from None


def _sessions_in_transaction(connection: Any) -> str:
    """The other sessions of this database with a transaction open, oldest first (at most 5).

    ``pid N (application_name, state, transaction open S s)``; "" when the catalog cannot say.
    """
    query = """
SELECT pid, coalesce(application_name, ''), coalesce(state, ''),
       extract(epoch FROM now() - xact_start)::bigint
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
ORDER BY xact_start LIMIT 5"""
    try:
        if not connection.autocommit:
            connection.rollback()
        rows = connection.execute(query).fetchall()
        if not connection.autocommit:
            connection.rollback()
    except Exception:  # noqa: BLE001 - the sessions are a courtesy; the error stands without them
        return ""
    return "; ".join(
        f"pid {pid} ({name or 'no application_name'}, {state or 'no state'}, "
        f"transaction open {age} s)"
        for pid, name, state, age in rows
    )


def erase_pre_restore(
    connect: Callable[..., Any], tables: Sequence[str], ids: Sequence[str]
) -> list[str]:
    """Erase ``ids`` from every ``<table>_pre_restore_*`` table of ``tables`` (``erase_rows``).

    ``connect``: ``PgVector.connect``. Returns the tables rewritten (each one found, whether it
    held the ids or not). Idempotent.

    Raises:
        UnavailableError: the server refuses a statement (the role must own the tables).
    """
    with connect(read_only=False) as connection:
        found = pre_restore_tables(connection, tables)
        for table in found:
            erase_rows(connection, table, ids)
    return found
