"""The files a PostgreSQL database keeps its rows in, for tests that search them for bytes."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest


def database_files(url: str) -> list[Path]:
    """Every file of the database ``url`` names, after a CHECKPOINT (dirty pages, unlinks done).

    Skips the test when the server's data directory is not on this machine
    (``$MEMSYNC_TEST_PG_URL`` naming a remote server).
    """
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CHECKPOINT")
        (data,) = connection.execute("SHOW data_directory").fetchone()
        (oid,) = connection.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    directory = Path(data) / "base" / str(oid)
    if not directory.is_dir():
        pytest.skip("the server's data directory is not on this machine")
    return [p for p in directory.iterdir() if p.is_file()]
