"""Doctor's reads of a pgvector deployment's server: versions, the memory table, sessions, SSL.

Every statement here reads the catalog or the statistics views (``pg_class``, ``pg_index``,
``pg_stat_activity``, ``pg_stat_ssl``) in one read-only session; nothing reads a table's rows
and nothing takes a lock the app's writes wait for. ``memsync.stores.pgvector.doctor`` judges the
result. A role without ``pg_read_all_stats`` (or ``pg_monitor``) sees other roles' sessions
without their transaction times, so their transactions go unreported.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsync.config import PGVectorSettings
from memsync.config.mem0_dict import Secret
from memsync.errors import UnavailableError
from memsync.stores.pgvector.connect import connect, first_line, where

if TYPE_CHECKING:
    import psycopg

LOCAL_HOSTS = frozenset({"localhost", ""})

_TABLE = """
SELECT c.oid::regclass::text, c.reltuples::bigint, {size},
       (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
        WHERE a.attrelid = c.oid AND a.attname = 'vector' AND NOT a.attisdropped)
FROM pg_class c WHERE c.oid = to_regclass(quote_ident(%s))"""
_SIZE = "pg_total_relation_size(c.oid)"  # takes ACCESS SHARE: waits behind ALTER/VACUUM FULL
# the size as of the last VACUUM/ANALYZE from the catalog alone (no lock): for a locked table
_SIZE_UNLOCKED = """(c.relpages::bigint
  + coalesce((SELECT t.relpages FROM pg_class t WHERE t.oid = c.reltoastrelid), 0)
  + coalesce((SELECT sum(i.relpages) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
              WHERE x.indrelid = c.oid), 0)) * current_setting('block_size')::bigint"""
# doctor must answer while a session holds the table locked (that session is what it reports)
DOCTOR_LOCK_TIMEOUT_S = 2
_INDEXES = """
SELECT i.relname, am.amname, x.indisvalid, {definition}
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam
WHERE x.indrelid = to_regclass(quote_ident(%s)) ORDER BY i.relname"""
# Other sessions of this database with a transaction open. One holds back VACUUM's horizon only
# through a snapshot (backend_xmin: REPEATABLE READ, SERIALIZABLE, an open cursor or a running
# statement) or a transaction id (backend_xid: it has written); a READ COMMITTED transaction
# idle after its reads has neither.
_SESSIONS = """
SELECT pid, coalesce(application_name, ''), coalesce(usename::text, ''), state,
       extract(epoch FROM now() - xact_start)::float8,
       extract(epoch FROM now() - state_change)::float8,
       age(backend_xmin), age(backend_xid)
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
ORDER BY xact_start"""
# the memory table's dead rows (VACUUM's or the stats collector's count) and its last vacuum
_DEAD = """
SELECT n_dead_tup, extract(epoch FROM now() - greatest(last_vacuum, last_autovacuum))::float8
FROM pg_stat_user_tables WHERE relid = to_regclass(quote_ident(%s))"""
_SSL = "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


@dataclass(frozen=True, slots=True)
class Index:
    """One index of the memory table: ``method`` is the access method (``hnsw``, ``btree``...)."""

    name: str
    method: str
    valid: bool
    definition: str  # "" when the table was locked by another session (not read)


@dataclass(frozen=True, slots=True)
class Table:
    """The memory table: ``estimated_rows`` is ``pg_class.reltuples`` (None: never analysed)."""

    qualified: str
    size_bytes: int
    estimated_rows: int | None
    vector_type: str | None
    indexes: tuple[Index, ...]
    dead_rows: int | None = None  # pg_stat_user_tables.n_dead_tup; None: no statistics
    vacuumed_s: float | None = None  # since the last VACUUM or autovacuum; None: never


@dataclass(frozen=True, slots=True)
class Session:
    """Another session of the database with a transaction open; ages in seconds.

    ``xmin_age`` and ``xid_age`` are ``age(backend_xmin)`` and ``age(backend_xid)`` in
    transactions: the snapshot or transaction id that holds back VACUUM; None: it holds none.
    """

    pid: int
    application_name: str
    user: str
    state: str | None
    transaction_s: float
    state_s: float | None
    xmin_age: int | None = None
    xid_age: int | None = None

    @property
    def pins(self) -> str | None:
        """What holds back VACUUM's horizon: its snapshot, its transaction id, or None."""
        if self.xmin_age is not None:
            return f"its snapshot ({self.xmin_age} transactions old)"
        if self.xid_age is not None:
            return f"its transaction id ({self.xid_age} transactions old: it has written)"
        return None


@dataclass(frozen=True, slots=True)
class ServerHealth:
    """What doctor reads from the server in one session.

    Attributes:
        where: ``postgresql://user@host:port/dbname`` (never the password).
        server_version: ``SHOW server_version``.
        vector_version: the ``vector`` extension's version in this database; None: not installed.
        host: the host libpq connected to (a directory for a Unix socket).
        local: a Unix socket or a loopback host.
        ssl: whether this session uses SSL (``pg_stat_ssl``); None when the view is unreadable.
        ssl_version: the TLS version in use, or None.
        table: the memory table, or None when it does not exist.
        sessions: other sessions of this database with a transaction open, oldest first.
    """

    where: str
    server_version: str
    vector_version: str | None
    host: str
    local: bool
    ssl: bool | None
    ssl_version: str | None
    table: Table | None
    sessions: tuple[Session, ...]


def read_health(
    settings: PGVectorSettings, environ: Mapping[str, str] | None = None
) -> ServerHealth:
    """Read the server's versions, the memory table, open transactions and SSL. Reads only.

    Raises:
        UnavailableError: the server cannot be reached or refuses a catalog read (exit 11;
            the message names the server, never the password).
        ConfigError: a secret cannot be resolved.
    """
    import psycopg

    environ = os.environ if environ is None else environ
    server = where(settings, environ)
    with connect(settings, read_only=True, environ=environ) as connection:
        connection.autocommit = True  # no transaction of our own left open between reads
        host = connection.info.host
        try:
            with connection.cursor() as cursor:
                version = cursor.execute("SHOW server_version").fetchone()
                vector = cursor.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()
                table = _read_table(cursor, settings.collection_name)
                sessions = tuple(Session(*row) for row in cursor.execute(_SESSIONS).fetchall())
                ssl = cursor.execute(_SSL).fetchone()
        except psycopg.Error as error:
            raise UnavailableError(
                f"reading the catalog of PostgreSQL {server} failed: {first_line(error)}",
                "grant the role CONNECT on the database (docs/how-to/pgvector.md lists the grants)",
            ) from None
    return ServerHealth(
        where=server,
        server_version=str(version[0]) if version else "unknown",
        vector_version=str(vector[0]) if vector else None,
        host=host,
        local=is_local_host(host),
        ssl=bool(ssl[0]) if ssl else None,
        ssl_version=ssl[1] if ssl else None,
        table=table,
        sessions=sessions,
    )


def _read_table(cursor: psycopg.Cursor[Any], name: str) -> Table | None:
    """The memory table; a table locked by another session is sized from the catalog."""
    import psycopg

    cursor.execute(f"SET lock_timeout = '{DOCTOR_LOCK_TIMEOUT_S}s'")
    size, definition = _SIZE, "pg_get_indexdef(i.oid)"  # both wait for the table's lock
    try:
        found = cursor.execute(_TABLE.format(size=size), (name,)).fetchone()
    except psycopg.errors.LockNotAvailable:  # autocommit: the session goes on
        size, definition = _SIZE_UNLOCKED, "''"
        found = cursor.execute(_TABLE.format(size=size), (name,)).fetchone()
    if found is None:
        return None
    qualified, reltuples, size, vector_type = found
    indexes = tuple(
        Index(*row)
        for row in cursor.execute(_INDEXES.format(definition=definition), (name,)).fetchall()
    )
    dead = cursor.execute(_DEAD, (name,)).fetchone()
    return Table(
        qualified=qualified,
        size_bytes=int(size),
        estimated_rows=int(reltuples) if reltuples >= 0 else None,
        vector_type=vector_type,
        indexes=indexes,
        dead_rows=int(dead[0]) if dead and dead[0] is not None else None,
        vacuumed_s=dead[1] if dead else None,
    )


def is_local_host(host: str) -> bool:
    """Whether libpq's ``host`` is this machine: a Unix socket directory or a loopback. Pure."""
    if host.startswith(("/", "@")) or host.lower() in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def inline_password(settings: PGVectorSettings) -> str | None:
    """The key holding a password written in the config itself, or None. Reads nothing.

    ``password`` given as a string, or a ``connection_string`` given as a string that carries
    a password (URI ``user:password@`` or ``password=``); ``{env}``/``{file}`` secrets are not
    inline. A string that libpq cannot parse counts as inline when it mentions a password.
    """
    if isinstance(settings.password, str) and settings.password:
        return "password"
    text = settings.connection_string
    if not isinstance(text, str) or isinstance(text, Secret):
        return None
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        parsed = conninfo_to_dict(text)
    except ProgrammingError:
        return "connection_string" if "password" in text.lower() else None
    return "connection_string" if parsed.get("password") else None
