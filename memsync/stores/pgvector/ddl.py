"""Restore's DDL from a snapshot's ``schema.json``: only what an export writes is accepted.

``schema.json`` is the one file of a snapshot from which restore builds SQL, and a snapshot is
a file anyone with write access to the snapshot store can edit (unsigned snapshots have only
checksums, which an editor rewrites). So a column type must be a type name as ``format_type``
prints it, an index definition ``CREATE [UNIQUE] INDEX name ON table USING method (...)`` as
``pg_indexes`` prints it, and ``load`` runs every statement built here prepared (the server
parses exactly one statement: a second one appended is an error, never run).
"""

from __future__ import annotations

import re
from typing import Any

from memsync.errors import UnavailableError

# a column type as format_type prints one (``uuid``, ``vector(384)``, ``character varying(20)``,
# ``timestamp(6) with time zone``, ``public.vector(8)``, ``text[]``): words, typmods, no expression
_TYPE = re.compile(
    r"^[a-z_][a-z0-9_$]*(\.[a-z_][a-z0-9_$]*)?(\(\d+(,\d+)?\))?"
    r"( [a-z_][a-z0-9_$]*(\(\d+(,\d+)?\))?)*(\[\])*$"
)
_INDEX_DDL = re.compile(
    r'^CREATE (?P<unique>UNIQUE )?INDEX (?P<name>"(?:[^"]|"")+"|\S+) ON (?:ONLY )?'
    r'(?:"(?:[^"]|"")+"|\S+) (?P<rest>USING [a-z_][a-z0-9_]* \(.+)$',
    re.DOTALL,
)
_LITERAL = re.compile(r"'(?:[^']|'')*'")
HINT = "restore another snapshot (memsync snapshot verify ID names the damage)"


def columns(staged: str, shape: dict[str, Any]) -> list[tuple[str, str]]:
    """``schema.json``'s columns of a table as (name, type), each type a plain type name. Pure.

    The type is the only text of a snapshot memsync puts into DDL as it is: anything but a
    type name (a ``DEFAULT``, a ``GENERATED`` expression, a second statement) is refused.

    Raises:
        UnavailableError: the columns are missing or a type is not a type name.
    """
    columns = shape.get("columns")
    indexes = shape.get("indexes", [])
    if not isinstance(columns, list) or not columns or not isinstance(indexes, list):
        raise UnavailableError(
            f"the snapshot's schema.json has no column list for {staged}: it was altered",
            HINT,
        )
    found = []
    for column in columns:
        kind = column.get("type") if isinstance(column, dict) else None
        label = column.get("name") if isinstance(column, dict) else None
        if not isinstance(label, str) or not isinstance(kind, str) or not _TYPE.match(kind):
            raise UnavailableError(
                f"the snapshot's schema.json gives {staged} a column {str(column)[:120]} "
                "that is not a column name and type: it was altered; nothing was restored",
                HINT,
            )
        found.append((label, kind))
    return found


def _match_index(text: Any) -> re.Match[str] | None:
    """``_INDEX_DDL``'s match of one statement (no ``;`` outside a string literal), or None."""
    if not isinstance(text, str) or ";" in _LITERAL.sub("", text):
        return None
    return _INDEX_DDL.match(text.strip())


def index_statement(ddl: str, table: str, index: str) -> tuple[str, Any]:
    """(the recorded index name, the DDL rewritten for ``index`` on ``table``). Pure."""
    from psycopg import sql

    found = _match_index(ddl)
    if found is None:
        raise UnavailableError(
            f"the snapshot's index definition is not one memsync can rebuild: {str(ddl)[:120]}",
            "restore it with pg_restore, or report the definition",
        )
    original = found["name"]
    if original.startswith('"'):
        original = original[1:-1].replace('""', '"')
    statement = sql.SQL("CREATE {}INDEX {} ON {} {}").format(
        sql.SQL("UNIQUE " if found["unique"] else ""),
        sql.Identifier(index),
        sql.Identifier(table),
        sql.SQL(found["rest"]),  # the server's text; run prepared: one statement, nothing more
    )
    return original, statement


def problem(table: str, shape: Any) -> str | None:
    """Why restore would refuse ``schema.json``'s ``shape`` of ``table``; None when it would not.

    The checks of ``columns`` and ``index_statement``, for ``snapshot verify``. Pure.
    """
    try:
        if not isinstance(shape, dict):
            raise UnavailableError(f"the snapshot's schema.json has no description of {table}")
        columns(table, shape)
        for text in shape.get("indexes") or []:
            if _match_index(text) is None:
                raise UnavailableError(
                    f"the snapshot's index definition is not one memsync can rebuild: "
                    f"{str(text)[:120]}"
                )
    except UnavailableError as error:
        return error.message
    return None
