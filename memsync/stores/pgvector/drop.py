"""Drop a pgvector store's two tables: the old store a migration left (``migrate --cleanup``)."""

from __future__ import annotations

from typing import Any

from memsync.errors import UnavailableError
from memsync.stores.pgvector.connect import first_line


def drop_tables(connect: Any, tables: tuple[str, ...], where: str, *, dry_run: bool) -> int:
    """Drop ``tables`` (those that exist) in one transaction; return their bytes before.

    ``connect``: ``PgVector.connect``. The bytes are ``pg_total_relation_size`` of each
    (heap, TOAST and indexes). Absent tables count 0. Idempotent.

    Raises:
        UnavailableError: the server cannot be reached, or the role may not drop the tables.
    """
    import psycopg
    from psycopg import sql

    try:
        with connect(read_only=dry_run) as connection, connection.transaction():
            size = 0
            present = []
            for table in tables:
                row = connection.execute(
                    "SELECT pg_total_relation_size(to_regclass(quote_ident(%s)))", (table,)
                ).fetchone()
                if row is not None and row[0] is not None:
                    present.append(table)
                    size += int(row[0])
            if present and not dry_run:
                names = sql.SQL(", ").join(sql.Identifier(t) for t in present)
                connection.execute(sql.SQL("DROP TABLE {}").format(names))
    except psycopg.Error as error:
        raise UnavailableError(
            f"dropping the tables of {where} failed: {first_line(error)}",
            "the role needs to own the tables (or be a superuser) to drop them",
        ) from None
    return size
