"""Doctor's probes of a pgvector deployment's server (mem0's REST server layout).

Reached through the port (``PgVector.probe_server``); ``memsync.doctor`` never imports it.

``probe_pgvector`` reads the server once (``memsync.stores.pgvector.health``) and judges it:
``pg-server`` (reachable, version), ``pg-extension`` (``vector`` installed), ``pg-table`` (size
and row estimate), ``pg-index`` (the HNSW/DiskANN index mem0 creates), ``pg-dimension`` (the
column's ``vector(N)`` against the config), ``pg-transaction`` (transactions holding back
VACUUM), ``pg-ssl`` (SSL to a server on another host) and ``pg-password-inline`` (a password
written in the config). Codes: docs/reference/commands/doctor.md. Reads only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from memsync.config import PGVectorSettings
from memsync.errors import MemsyncError
from memsync.model import ERROR, OK, WARNING, DoctorResult
from memsync.stores.pgvector import health, load
from memsync.stores.pgvector.connect import where

RESULT_CODES = (
    "pg-server", "pg-extension", "pg-table", "pg-index", "pg-dimension", "pg-transaction",
    "pg-ssl", "pg-password-inline",
)  # fmt: skip
LONG_TRANSACTION_S = 300.0  # a transaction open this long holds back VACUUM of every table
IDLE_IN_TRANSACTION_S = 10.0  # a session idle inside its transaction this long: a leaked one
ANN_METHODS = frozenset({"hnsw", "diskann", "ivfflat"})
DISKANN_MAX_DIMS = 2000  # mem0ai 2.2.1 creates a DiskANN index only under 2000 dimensions
_DIMENSION = re.compile(r"^vector\((\d+)\)$")


def probe_pgvector(
    settings: PGVectorSettings, expected_dims: tuple[tuple[str, int], ...]
) -> list[DoctorResult]:
    """Every ``pg-*`` result for the server ``settings`` name.

    Never raises for a server problem: an unreachable server is one ``pg-server`` error (the
    table, index and session results then say nothing) beside ``pg-password-inline``.
    """
    results = [judge_password(settings)]
    try:
        found = health.read_health(settings)
    except MemsyncError as error:
        return [
            DoctorResult(
                code="pg-server",
                status=ERROR,
                path=where(settings),
                message=error.message,
                fix=error.hint or "check that the server runs and that the config names it",
            ),
            *results,
        ]
    return [*judge_health(found, settings, expected_dims), *results]


def judge_health(
    found: health.ServerHealth,
    settings: PGVectorSettings,
    expected_dims: tuple[tuple[str, int], ...],
) -> list[DoctorResult]:
    """The server, extension, table, index, dimension, transaction and SSL results. Pure."""
    results = [
        DoctorResult(
            code="pg-server",
            status=OK,
            path=found.where,
            message=f"PostgreSQL {found.server_version} reachable",
        ),
        _judge_extension(found),
        *_judge_table(found, settings, expected_dims),
        *judge_sessions(found.where, found.sessions, found.table),
        _judge_ssl(found),
    ]
    return results


def _judge_extension(found: health.ServerHealth) -> DoctorResult:
    if found.vector_version is None:
        return DoctorResult(
            code="pg-extension",
            status=ERROR,
            path=found.where,
            message=f"the vector extension is not installed in {found.where}: mem0 cannot "
            "create or search its table",
            fix="CREATE EXTENSION vector; as a role allowed to (mem0 tries it at its start)",
        )
    return DoctorResult(
        code="pg-extension",
        status=OK,
        path=found.where,
        message=f"pgvector {found.vector_version} installed",
    )


def _judge_table(
    found: health.ServerHealth,
    settings: PGVectorSettings,
    expected_dims: tuple[tuple[str, int], ...],
) -> list[DoctorResult]:
    table, name = found.table, settings.collection_name
    path = f"{found.where} table {name}"
    if table is None:
        return [
            DoctorResult(
                code="pg-table",
                status=WARNING,
                path=path,
                message=f"table {name!r} does not exist: mem0 creates it at its first start; "
                "if the app has run, it was dropped or the config names another database",
                fix="check dbname and collection_name; if it was lost: memsync restore <snapshot>",
            )
        ]
    rows = (
        f"about {table.estimated_rows} rows (estimate)"
        if table.estimated_rows is not None
        else "row estimate unknown (never vacuumed or analysed)"
    )
    return [
        DoctorResult(
            code="pg-table",
            status=OK,
            path=path,
            message=f"table {table.qualified}: {table.size_bytes} bytes with its indexes, {rows}",
        ),
        judge_index(path, name, table.indexes, settings),
        judge_dimension(path, table.vector_type, expected_dims),
    ]


def judge_index(
    path: str, name: str, indexes: tuple[health.Index, ...], settings: PGVectorSettings
) -> DoctorResult:
    """Whether the memory table has the ANN index mem0 creates for ``settings``. Pure."""
    diskann = settings.diskann and settings.embedding_model_dims < DISKANN_MAX_DIMS
    method = "diskann" if diskann else "hnsw" if settings.hnsw else None
    if method is None:
        return DoctorResult(
            code="pg-index",
            status=OK,
            path=path,
            message="no ANN index configured (hnsw = false, diskann = false): every search "
            "scans the whole table",
        )
    expected = f"{name}_{method}_idx"
    valid = [index for index in indexes if index.valid and index.method in ANN_METHODS]
    named = next((index for index in valid if index.name == expected), None)
    if named is not None or valid:
        used = named or valid[0]
        return DoctorResult(
            code="pg-index",
            status=OK,
            path=path,
            message=f"index {used.name} USING {used.method}",
        )
    ddl = (
        f"CREATE INDEX CONCURRENTLY {expected} ON {name} USING diskann (vector)"
        if diskann
        else f"CREATE INDEX CONCURRENTLY {expected} ON {name} USING {method} "
        "(vector vector_cosine_ops)"
    )
    invalid = [index.name for index in indexes if not index.valid]
    return DoctorResult(
        code="pg-index",
        status=WARNING,
        path=path,
        message=f"no valid {method} index {expected} on {name}"
        + (f" ({', '.join(invalid)} invalid)" if invalid else "")
        + ": every search is a sequential scan of the table",
        fix=f"restart the app (mem0 creates it at its start), or: {ddl}",
    )


def judge_dimension(
    path: str, vector_type: str | None, expected_dims: tuple[tuple[str, int], ...]
) -> DoctorResult:
    """The ``vector`` column's declared ``vector(N)`` against the config's dimensions. Pure."""
    match = _DIMENSION.match(vector_type or "")
    if match is None:
        return DoctorResult(
            code="pg-dimension",
            status=ERROR,
            path=path,
            message=f"the table's vector column is {vector_type or 'missing'}, not vector(N): "
            "not a table mem0 made",
            fix="check collection_name; restore the table from a snapshot if it was replaced",
        )
    size = int(match.group(1))
    wrong = [f"{key} = {dims}" for key, dims in expected_dims if dims != size]
    if wrong:
        return DoctorResult(
            code="pg-dimension",
            status=ERROR,
            path=path,
            message=f"the vector column is vector({size}), but the config says "
            f"{', '.join(wrong)}: every add and search fails",
            fix="set embedding_model_dims to the column's size, or go back to the embedder "
            "that made the table",
        )
    return DoctorResult(
        code="pg-dimension",
        status=OK,
        path=path,
        message=f"vector column vector({size}) matches the config",
    )


def judge_sessions(
    server: str, sessions: tuple[health.Session, ...], table: health.Table | None = None
) -> list[DoctorResult]:
    """A warning per long or idle transaction that holds back VACUUM, else one ok result. Pure.

    Only a snapshot (``backend_xmin``) or a transaction id (``backend_xid``) holds back
    VACUUM's horizon: a READ COMMITTED transaction left idle after its reads holds neither, and
    is named in the ok result. ``table`` gives the cost: the memory table's dead rows.
    """
    results, idle_only = [], []
    for session in sessions:
        idle = session.state is not None and session.state.startswith("idle in transaction")
        idle_s = session.state_s or 0.0
        if session.transaction_s < LONG_TRANSACTION_S and not (
            idle and idle_s >= IDLE_IN_TRANSACTION_S
        ):
            continue
        who = f"pid {session.pid} ({session.application_name or 'no application_name'}, "
        who += f"role {session.user or 'unknown'})"
        state = f"{session.state}" + (f" for {idle_s:.0f} s" if idle else "")
        pins = session.pins
        if pins is None:
            idle_only.append(f"{who} {state}")
            continue
        results.append(
            DoctorResult(
                code="pg-transaction",
                status=WARNING,
                path=server,
                message=f"{who} has had a transaction open for {session.transaction_s:.0f} s "
                f"({state}) and holds back VACUUM with {pins}: VACUUM cannot remove rows "
                f"deleted since, so erased memories stay on disk and the tables bloat"
                + _dead_rows(table, held=True),
                fix=f"end it in the application; or SELECT pg_terminate_backend({session.pid}); "
                "set idle_in_transaction_session_timeout to prevent it",
            )
        )
    if results:
        return results
    message = "no transaction holds back VACUUM" + _dead_rows(table, held=False)
    if idle_only:
        message += (
            f"; idle in transaction longer than {IDLE_IN_TRANSACTION_S:.0f} s without a "
            f"snapshot or transaction id (READ COMMITTED after reads: VACUUM is not held "
            f"back, their locks are): {'; '.join(idle_only)}"
        )
    else:
        message += (
            f" ({len(sessions)} open now, none longer than {LONG_TRANSACTION_S:.0f} s or "
            f"idle longer than {IDLE_IN_TRANSACTION_S:.0f} s)"
        )
    return [DoctorResult(code="pg-transaction", status=OK, path=server, message=message)]


def _dead_rows(table: health.Table | None, held: bool) -> str:
    """The memory table's dead rows and VACUUM's verdict on them, as a clause. Pure."""
    if table is None or table.dead_rows is None:
        return ""
    if table.dead_rows == 0:
        return f"; {table.qualified} has no dead rows"
    vacuumed = (
        "never vacuumed"
        if table.vacuumed_s is None
        else f"last vacuumed {table.vacuumed_s:.0f} s ago"
    )
    verdict = (
        "VACUUM cannot remove those deleted since the transaction began"
        if held
        else "the next VACUUM (or autovacuum) can remove them"
    )
    return f"; {table.qualified} has {table.dead_rows} dead rows ({vacuumed}): {verdict}"


def _judge_ssl(found: health.ServerHealth) -> DoctorResult:
    if found.ssl:
        message = f"the session uses SSL ({found.ssl_version or 'version unknown'})"
    elif found.local:
        message = f"no SSL, and none needed: the server is local ({found.host})"
    else:
        return DoctorResult(
            code="pg-ssl",
            status=WARNING,
            path=found.where,
            message=f"the connection to {found.host} is not encrypted"
            + (" (pg_stat_ssl unreadable)" if found.ssl is None else "")
            + ": memories and the password cross the network in clear",
            fix='enable ssl on the server and set sslmode = "require" (or verify-full)',
        )
    return DoctorResult(code="pg-ssl", status=OK, path=found.where, message=message)


def judge_password(settings: PGVectorSettings) -> DoctorResult:
    """A warning when the config itself holds the database password. Pure."""
    key = health.inline_password(settings)
    if key is None:
        return DoctorResult(
            code="pg-password-inline",
            status=OK,
            message="no password written in the config",
        )
    return DoctorResult(
        code="pg-password-inline",
        status=WARNING,
        path=f"[mem0.vector_store.config] {key}",
        message=f"{key} holds the database password inline: whoever reads the config (or a "
        "backup of it) can connect",
        fix=f'{key} = {{env = "PGPASSWORD_VAR"}} or {{file = "/path/readable/by/memsync"}}'
        if key == "password"
        else 'connection_string = {file = "/path/readable/by/memsync"} (or {env = "NAME"})',
    )


def probe_pre_restore_tables(
    connect: Callable[..., Any], tables: list[str], where_: str
) -> list[DoctorResult]:
    """A ``pre-restore-copy`` (ok) per ``<table>_pre_restore_*`` table of ``tables``; [] unreachable.

    ``connect``: ``PgVector.connect``; ``where_``: the store, for the message. Reads only.
    """
    try:
        with connect() as connection:
            found = load.pre_restore_tables(connection, tables)
    except MemsyncError:
        return []  # the server's own results say why it cannot be reached
    return [
        DoctorResult(
            code="pre-restore-copy",
            status=OK,
            path=f"table {table}",
            message=f"a table a restore moved aside on {where_} (kept, never dropped by memsync)",
            fix=f"drop it once the restored deployment is trusted: DROP TABLE {table}",
        )
        for table in found
    ]
