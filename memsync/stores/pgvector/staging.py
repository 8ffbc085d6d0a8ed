"""A restore staged inside the server: the snapshot's tables loaded beside the live ones, swapped.

``PgVector.staging()`` returns it; ``memsync.restore.pgvector`` orchestrates the steps (journal,
history.db, the app's route) and reaches the tables only through it. Tables are described by
dicts (the restore journal's ``tables``): ``live``, ``staged`` (None: the snapshot has no such
table), ``aside``, ``had_live`` and ``indexes``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.stores.pgvector import export, load

if TYPE_CHECKING:
    from memsync.stores.pgvector import PgVector


class TableStaging:
    """The staged restore of one pgvector store's memory and entity tables."""

    def __init__(self, store: PgVector) -> None:
        self._store = store

    def require_ready(self) -> None:
        """Refuse (exit 11) a database without the vector extension. Reads only."""
        with self._store.connect(read_only=True) as connection:
            load.require_vector_extension(connection)

    def plan(self, snapshot_id: str) -> list[dict[str, Any]]:
        """The memory and entity tables of a restore: live, staged and aside names. Pure."""
        part = load.tag(snapshot_id)
        return [
            {
                "live": table,
                "staged": load.name(table, f"restore_{part}"),
                "aside": load.name(table, f"pre_restore_{part}"),
                "had_live": True,
                "indexes": {},
            }
            for table in (self._store.collection, self._store.entities_collection)
        ]

    def with_catalog(self, tables: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Record which live tables exist and give each aside a name no table has. Reads only."""
        done = []
        with self._store.connect() as connection:
            for table in tables:
                aside, number = table["aside"], 1
                while load.exists(connection, aside):
                    # the number goes inside the suffix: a cut name keeps its _pre_restore_ mark
                    suffix = "pre_restore_" + table["aside"].rsplit("_pre_restore_", 1)[-1]
                    aside = load.name(table["live"], f"{suffix}_{number}")
                    number += 1
                done.append(
                    {**table, "aside": aside, "had_live": load.exists(connection, table["live"])}
                )
        return done

    def captured_tables(self, root: Path) -> dict[str, Any]:
        """The tables a capture at ``root`` (``<snapshot>/pgvector``) holds, by live name."""
        schema = export.read_schema(root) or {"tables": {}}
        tables: dict[str, Any] = schema["tables"]
        return tables

    def load(self, root: Path, tables: list[dict[str, Any]]) -> None:
        """Load each staged table from the capture at ``root``; sets its ``indexes`` and ``rows``.

        ``rows``: the rows loaded, which are the export's (``load.load_table``).

        Raises:
            UnavailableError, TryLaterError: the role does not own the tables, or a load fails.
        """
        captured = self.captured_tables(root)
        with self._store.connect(read_only=False) as connection:
            load.require_owner(connection, [t["live"] for t in tables])
            for table in tables:
                if table["staged"] is not None:
                    shape = captured[table["live"]]
                    exported = root / shape["file"]
                    table["indexes"], table["rows"] = load.load_table(
                        connection, table["staged"], shape, exported
                    )

    def swap(self, tables: list[dict[str, Any]]) -> None:
        """In ONE transaction: each live table aside, each staged one into place."""
        with self._store.connect(read_only=False) as connection:
            load.swap(connection, tables)

    def drop_staged(self, staged: list[str]) -> None:
        """Drop memsync's own staged tables (a rollback). Idempotent."""
        with self._store.connect(read_only=False) as connection:
            load.drop_tables(connection, staged)

    def written_after(self, moment: datetime) -> tuple[str, str] | None:
        """The memory stamped last after ``moment``, and its stamp; None when none is.

        The stamp is mem0's ``updated_at`` or ``created_at``, the later. Reads the table once.
        """
        from psycopg import sql

        stamp = sql.SQL(
            "CASE WHEN payload->>{key} ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}T' "
            "THEN (payload->>{key})::timestamptz END"
        )
        newest = sql.SQL("greatest({}, {})").format(
            stamp.format(key=sql.Literal("updated_at")), stamp.format(key=sql.Literal("created_at"))
        )
        query = sql.SQL(
            "SELECT id::text, at FROM (SELECT id, {} AS at FROM {}) AS t "
            "WHERE at > %s ORDER BY at DESC LIMIT 1"
        ).format(newest, sql.Identifier(self._store.collection))
        with self._store.connect() as connection:
            row = connection.execute(query, (moment,)).fetchone()
        return None if row is None else (str(row[0]), row[1].isoformat())

    def swapped(self, tables: list[dict[str, Any]]) -> bool:
        """Whether the swap of ``tables`` committed (read from the catalog). Reads only."""
        with self._store.connect() as connection:
            for table in tables:
                if table["staged"] is not None:
                    return not load.exists(connection, table["staged"])
                if table["had_live"]:
                    return bool(load.exists(connection, table["aside"]))
        return False
