"""Connections to the deployment's PostgreSQL: conninfo from mem0's keys, psycopg 3, errors.

mem0ai 2.2.1's pgvector provider (``mem0/vector_stores/pgvector.py``) builds its pool from
``connection_string`` when given (``sslmode`` replacing the string's own), else from
``postgresql://user:password@host:port/dbname``; memsync builds the same conninfo, with the
separate keys passed as libpq keywords so a Unix socket directory works as ``host``. Secrets
are resolved here and nowhere else on this path; ``where`` never shows a password.
psycopg is imported only in this package, and only for a pgvector store.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memsync.config import PGVectorSettings, resolve_secrets
from memsync.config.mem0_dict import Secret
from memsync.errors import ConfigError, TryLaterError, UnavailableError

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT_S = 10
# A server that let a connection time out is not asked again by this process for this long:
# each later connection fails at once with the same error (doctor's probes, a check's reads),
# instead of waiting CONNECT_TIMEOUT_S each. A daemon's next job, minutes later, asks again.
TIMED_OUT_MEMORY_S = 60.0
_timed_out: dict[str, tuple[float, str]] = {}  # server (``where``) -> (monotonic, message)
# a read-only session waits at most this long for a table lock (another session's ALTER TABLE,
# LOCK TABLE, VACUUM FULL, or a transaction holding one): then the statement fails, said as such
READ_LOCK_TIMEOUT_S = 30
_HOLDERS = """
SELECT l.pid, coalesce(a.application_name, ''), coalesce(a.state, ''), l.mode,
       coalesce(extract(epoch FROM now() - a.xact_start)::bigint, 0)
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND l.locktype = 'relation' AND l.relation = to_regclass(quote_ident(%s))
  AND l.mode IN ('AccessExclusiveLock', 'ExclusiveLock') AND l.pid <> pg_backend_pid()
ORDER BY l.pid"""
INSTALL_HINT = "install psycopg 3 beside memsync: pip install 'psycopg[binary]' psycopg-pool"


def conninfo(settings: PGVectorSettings, environ: Mapping[str, str]) -> str:
    """The libpq conninfo mem0 would connect with (a URI or ``key=value`` string). Reads secret files.

    Raises:
        ConfigError: a secret's environment variable is unset or its file unreadable, a
            ``connection_string`` secret is empty, or it is not a libpq connection string.
    """
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    resolved = resolve_secrets(
        {"password": settings.password, "connection_string": settings.connection_string},
        environ,
    )
    base, given = resolved["connection_string"], settings.connection_string
    source = given.source if isinstance(given, Secret) and given.source else "[mem0.vector_store]"
    if isinstance(given, Secret) and not base:  # else libpq would try its default server
        raise ConfigError(
            source, ["mem0.vector_store.config.connection_string: the secret is empty"]
        )
    if base:
        try:
            conninfo_to_dict(base)
        except ProgrammingError as error:
            # libpq quotes the faulty part, which may be the password: never shown
            fault = re.sub(r'"[^"]*"', '"..."', first_line(error))
            raise ConfigError(
                source,
                [
                    "mem0.vector_store.config.connection_string: not a libpq connection "
                    f"string ({fault})"
                ],
            ) from None
        return str(make_conninfo(base, sslmode=settings.sslmode) if settings.sslmode else base)
    keywords = {
        "dbname": settings.dbname,
        "user": settings.user,
        "password": resolved["password"],
        "host": settings.host,
        "port": settings.port,
        "sslmode": settings.sslmode,
    }
    return str(make_conninfo("", **{k: v for k, v in keywords.items() if v is not None}))


def where(settings: PGVectorSettings, environ: Mapping[str, str] | None = None) -> str:
    """``postgresql://user@host:port/dbname`` for messages: never the password. Pure.

    A ``connection_string`` given as a secret is parsed only when it resolves (else
    ``PostgreSQL (connection_string from {env|file})``).
    """
    try:
        from psycopg.conninfo import conninfo_to_dict

        text = conninfo(settings, os.environ if environ is None else environ)
        parts: dict[str, Any] = conninfo_to_dict(text)
    except (ImportError, ConfigError, Exception):  # noqa: BLE001 - a description, never an error
        secret = settings.connection_string
        if isinstance(secret, Secret):
            return f"PostgreSQL (connection_string from {'$' + secret.env if secret.env else secret.file})"
        parts = {
            "dbname": settings.dbname,
            "user": settings.user,
            "host": settings.host,
            "port": settings.port,
        }
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = parts.get("host") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    return (
        f"postgresql://{user}{host}{port}/{parts.get('dbname') or parts.get('user') or 'postgres'}"
    )


@contextmanager
def connect(
    settings: PGVectorSettings, *, read_only: bool, environ: Mapping[str, str] | None = None
) -> Iterator[psycopg.Connection[Any]]:
    """Open one connection (closed on exit); read-only sessions refuse every write.

    ``read_only`` sets ``default_transaction_read_only`` for the session, so a role with
    SELECT suffices (docs/how-to/pgvector.md lists the grants), and ``lock_timeout`` to
    ``READ_LOCK_TIMEOUT_S``: a table another session holds locked fails the read
    (``psycopg.errors.LockNotAvailable``, see ``locked``) instead of waiting for ever.

    Raises:
        UnavailableError: psycopg is not installed, or the server refuses or cannot be reached
            (exit 11; the message names the server, never the password).
        ConfigError: a secret cannot be resolved.
    """
    try:
        import psycopg
        from psycopg.conninfo import make_conninfo
    except ImportError:
        raise UnavailableError(
            "the pgvector store needs psycopg 3, which is not installed", INSTALL_HINT
        ) from None
    environ = os.environ if environ is None else environ
    info = conninfo(settings, environ)
    extra = {"options": _read_only_options(info, environ)} if read_only else {}
    server = where(settings, environ)
    hint = (
        "check that the server runs and that [mem0.vector_store.config] names it "
        "(host, port, dbname, user, password or connection_string)"
    )
    earlier = _timed_out.get(server)
    if earlier is not None and time.monotonic() - earlier[0] < TIMED_OUT_MEMORY_S:
        raise UnavailableError(f"{earlier[1]} (not asked again: it timed out in this run)", hint)
    try:
        connection = psycopg.connect(
            make_conninfo(
                info, connect_timeout=CONNECT_TIMEOUT_S, application_name="memsync", **extra
            )
        )
    except psycopg.Error as error:
        message = f"cannot connect to PostgreSQL {server}: {first_line(error)}"
        if "timeout expired" in str(error):
            _timed_out[server] = (time.monotonic(), message)
        raise UnavailableError(message, hint) from None
    _timed_out.pop(server, None)
    try:
        yield connection
    finally:
        connection.close()


def _read_only_options(info: str, environ: Mapping[str, str]) -> str:
    """The ``options`` of a read-only session: the deployment's own, then memsync's. Pure.

    The deployment's own are the conninfo's, else ``$PGOPTIONS`` (a ``search_path`` naming
    mem0's schema). Giving ``options`` replaces both, so they are carried over: without them
    memsync would look for the tables in another schema than the app's.
    """
    from psycopg.conninfo import conninfo_to_dict

    own = conninfo_to_dict(info).get("options") or environ.get("PGOPTIONS") or ""
    mine = f"-c default_transaction_read_only=on -c lock_timeout={READ_LOCK_TIMEOUT_S}s"
    return f"{own} {mine}".strip()


def first_line(error: BaseException) -> str:
    """The first line of a psycopg error's text (the server's message), for one-line errors."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def locked(connection: psycopg.Connection[Any], table: str, what: str) -> TryLaterError:
    """The error for a read of ``table`` that waited ``READ_LOCK_TIMEOUT_S`` for a lock (exit 75).

    Names the sessions holding the table locked (pid, application_name, state, lock mode,
    transaction age in seconds) when the catalog says; call after the failed transaction ended.
    """
    holders = ""
    try:
        connection.rollback()  # the failed transaction, when the caller's is still open
        rows = connection.execute(_HOLDERS, (table,)).fetchall()
        connection.commit()
        holders = "; ".join(
            f"pid {pid} ({name or 'no application_name'}, {state or 'no state'}, {mode}, "
            f"transaction open {age} s)"
            for pid, name, state, mode, age in rows
        )
    except Exception:  # noqa: BLE001 - the holders are a courtesy; the error stands without them
        holders = ""
    return TryLaterError(
        f"{what}: the table {table} stayed locked by another session for "
        f"{READ_LOCK_TIMEOUT_S} s{': ' + holders if holders else ''}",
        "run again once that session ends its transaction (pg_stat_activity; "
        "pg_terminate_backend(pid) ends it)",
    )
