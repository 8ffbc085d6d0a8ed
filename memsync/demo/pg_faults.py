"""Damage a pgvector deployment the way the field does (for the demo and the tests).

Every fault is made on a real PostgreSQL with the tools an operator would use: ``pg_dump`` and
``pg_restore`` (pgserver's bundled binaries unless ``bin_dir`` names others), plain SQL through
psycopg, and mem0's own ``Memory`` for writes. history.db stays SQLite on pgvector, so the
history faults of ``memsync.demo.deployment`` (``delete_with_failing_history``,
``delete_history_rows``) apply unchanged. mem0ai 2.2.1 names the tables ``<collection>`` and
``<collection>_entities`` (``id UUID``, ``vector vector(N)``, ``payload JSONB``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memsync.demo.deployment import Paths

TABLE = "mem0"
ENTITIES = f"{TABLE}_entities"


def bin_dir() -> Path:
    """The directory of pgserver's ``pg_dump``/``pg_restore`` (PostgreSQL 16). Reads only."""
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def _url(paths: Paths) -> str:
    if paths.pg_url is None:
        raise ValueError(f"the deployment at {paths.root} is not on pgvector (no pg_url)")
    return paths.pg_url


def _run(tool: str, *args: str, bin_path: Path | None = None) -> None:
    """Run a PostgreSQL client tool; raise RuntimeError with its stderr's last line on failure."""
    program = (bin_path or bin_dir()) / tool
    done = subprocess.run([str(program), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{tool} failed with exit {done.returncode}: {last}")


def dump_table(paths: Paths, dest: Path, table: str = TABLE, bin_path: Path | None = None) -> Path:
    """``pg_dump -Fc -t <table>`` into ``dest`` (the hourly dump an operator keeps); ``dest``.

    Raises:
        RuntimeError: pg_dump failed (its last error line).
    """
    _run(
        "pg_dump",
        "--format=custom",
        f"--table={table}",
        f"--file={dest}",
        _url(paths),
        bin_path=bin_path,
    )
    return dest


def restore_table(paths: Paths, dump: Path, bin_path: Path | None = None) -> None:
    """``pg_restore --clean --if-exists`` of a dump: the live table replaced by the dumped one.

    The table is dropped and re-created from the dump, its rows and indexes as they were at
    dump time; history.db is left as it is now (a restore of one store only). The app's idle
    pooled connections do not block it (they hold no lock between statements).

    Raises:
        RuntimeError: pg_restore failed (its last error line).
    """
    _run(
        "pg_restore",
        "--clean",
        "--if-exists",
        "--no-owner",
        f"--dbname={_url(paths)}",
        str(dump),
        bin_path=bin_path,
    )


def drop_table(paths: Paths, table: str = TABLE) -> None:
    """``DROP TABLE IF EXISTS <table>`` (a cleanup script, a wrong database, a rollback)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(_url(paths), autocommit=True) as connection:
        connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def untype_vector_column(paths: Paths, table: str = TABLE) -> None:
    """Make ``vector`` an untyped ``vector`` column, as a table created outside mem0 has it.

    A migration or a hand-written ``CREATE TABLE ... (vector vector, ...)`` gives a column
    that takes vectors of any size (mem0's ``CREATE TABLE IF NOT EXISTS`` keeps it); an
    HNSW index needs a fixed size, so such tables have none: the index is dropped first.
    """
    import psycopg
    from psycopg import sql

    with psycopg.connect(_url(paths), autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(f"{table}_hnsw_idx"))
        )
        connection.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN vector TYPE vector").format(sql.Identifier(table))
        )


def memory_with_dims(paths: Paths, dims: int, embedder: str = "memsync_hash") -> Any:
    """``mem0.Memory`` of the deployment under an embedder of ``dims`` dimensions (the switch).

    mem0 creates the memory table as ``vector(dims)`` when it is absent and uses it as it is
    otherwise. The memsync config is left as it was (its ``embedding_model_dims`` unchanged).
    mem0ai 2.2.1 refuses an embedder ``config`` for a plugin provider, so the offline embedder's
    ``embedding_dims`` is set on the built instance (as a real embedder's model fixes it).
    """
    from memsync.demo import deployment

    memory = deployment.open_memory(paths, embedder, dims)
    memory.embedding_model.config.embedding_dims = dims
    return memory


@contextmanager
def export_paused(paths: Paths) -> Iterator[None]:
    """Hold ``LOCK TABLE pg_extension IN ACCESS EXCLUSIVE MODE`` until the block exits (superuser).

    memsync's export reads ``pg_extension`` (the pgvector version) as the first statement of
    its REPEATABLE READ transaction: PostgreSQL takes the transaction's snapshot, then waits
    for this lock. Writes made meanwhile (a DELETE, its history row) are after the export's
    snapshot and before the history copy, as a write landing in that gap on a busy server.
    mem0's writes never read ``pg_extension`` once its tables exist, so they go on.
    """
    import psycopg

    with psycopg.connect(_url(paths)) as connection, connection.transaction():
        connection.execute("LOCK TABLE pg_extension IN ACCESS EXCLUSIVE MODE")
        yield


def waiting_on_lock(paths: Paths) -> int:
    """Sessions of the deployment's database waiting for a lock (``pg_stat_activity``)."""
    import psycopg

    with psycopg.connect(_url(paths), autocommit=True) as connection:
        found = connection.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return int(found[0]) if found else 0
