"""Another process holding the embedded Qdrant store, as the app does while it runs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def app_holding(qdrant: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process (the app) holding the embedded store, as mem0 does while it runs."""
    app = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from qdrant_client import QdrantClient; "
            f"c = QdrantClient(path={str(qdrant)!r}); print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == "ready"
        yield app
    finally:
        app.kill()
        app.wait()


def killed_inside_a_transaction(
    database: Path, table: str = "history", column: str = "new_memory"
) -> None:
    """A writer of ``database`` killed inside its transaction: its hot ``-journal`` stays beside it.

    What an app killed mid-write leaves (a prefork worker's daemon thread as the server stops,
    ``kill -9``, an OOM kill): the pages it changed are in the file, the originals in the journal.
    Every row's ``column`` of ``table`` grows by 4 kB (mem0's history, or embedded Qdrant's
    ``points``: each point then fails to decode if the journal is not rolled back).
    """
    subprocess.run(killed_writer_argv(database, table, column), check=True, timeout=60)
    assert Path(f"{database}-journal").exists()


def killed_writer_argv(
    database: Path, table: str = "history", column: str = "new_memory"
) -> list[str]:
    """The argv of ``killed_inside_a_transaction``'s writer (for an ``[app] stop_command``)."""
    script = (
        f"import os, sqlite3; c = sqlite3.connect({str(database)!r}, isolation_level=None); "
        "c.execute('PRAGMA cache_size=1'); c.execute('BEGIN'); "
        f'c.execute("UPDATE {table} SET {column} = {column} || randomblob(4000)"); os._exit(0)'
    )
    return [sys.executable, "-c", script]


def history_events(database: Path) -> list[tuple[str, str]]:
    """Every history event's id and new_memory, in order (a plain open: rolls back a hot journal)."""
    connection = sqlite3.connect(database)
    try:
        return connection.execute("SELECT id, new_memory FROM history ORDER BY rowid").fetchall()
    finally:
        connection.close()
