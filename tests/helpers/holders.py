"""Another process holding the embedded Qdrant store, as the app does while it runs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memsync.demo import deployment as build


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


@contextmanager
def delete_in_flight(memory: Any, history_db: Path, memory_id: str) -> Iterator[Callable[[], None]]:
    """The app's real ``memory.delete(memory_id)`` stopped between its two writes.

    A second writer holds history.db's write lock (``BEGIN IMMEDIATE``: readers go on), so mem0,
    which removes the point first, waits to write the DELETE event. Yields once the point is
    gone; calling what it yields lets the delete land (the lock released, the delete joined).
    """
    blocker = sqlite3.connect(history_db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    deleting = threading.Thread(target=memory.delete, args=(memory_id,))
    deleting.start()

    def land() -> None:
        if blocker.in_transaction:
            blocker.execute("COMMIT")
        deleting.join(timeout=30)
        assert not deleting.is_alive(), "mem0's delete did not finish once history was free"

    try:
        deadline = time.monotonic() + 30
        while memory_id in build.point_ids(memory):  # the point goes first
            assert time.monotonic() < deadline, "mem0's delete never removed the point"
            time.sleep(0.01)
        yield land
    finally:
        land()
        blocker.close()


def deployment_in_mode(make_deployment: Any, param: str) -> Any:
    """The seeded deployment of ``param`` (``embedded-rollback``, ``pgvector-wal``, ...): on that
    vector store, history.db (and Qdrant's file) in that journal mode."""
    from memsync.stores import journal_mode

    store, mode = param.split("-")
    made = make_deployment(pg=store == "pgvector")
    if mode == "wal":
        paths = made.paths
        for path in [paths.history_db, *paths.qdrant.glob("collection/*/storage.sqlite")]:
            assert journal_mode.switch(path, journal_mode.WAL) == "wal"
    return made


def one_delete_in_flight_per_capture(
    stack: Any,
    memory: Any,
    history_db: Path,
    memory_ids: list[str],
    *,
    last_lands: bool,
    also: Callable[[int], None] | None = None,
) -> Callable[[int], None]:
    """A ``delete_all`` going on under a capturing memsync: ``memory_ids[0]`` is in flight now;
    call what it returns after the ``n``-th capture to land the delete in flight (the last one
    only when ``last_lands``) and start ``memory_ids[n]``, then ``also(n)``. The deletes are
    held on ``stack`` (an ``ExitStack``), which lands what is still in flight when it closes."""
    held = [stack.enter_context(delete_in_flight(memory, history_db, memory_ids[0]))]

    def next_delete(n: int) -> None:
        if n < len(memory_ids) or last_lands:
            held[-1]()
        if n < len(memory_ids):
            held.append(stack.enter_context(delete_in_flight(memory, history_db, memory_ids[n])))
        if also is not None:
            also(n)

    return next_delete
