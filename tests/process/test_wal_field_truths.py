"""What SQLite, mem0ai 2.2.1 and qdrant-client 1.20 do when the journal mode changes under them.

``memsync tune`` rests on these facts (docs/how-to/wal-mode.md): a switch to WAL made from
another process while mem0 keeps its connections open and writes fails none of its writes,
and its connections go on in WAL mode; leaving WAL while another connection is open is
refused at once. A real mem0 process writes throughout (tests/helpers/live_writer.py).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memsync.errors import TryLaterError
from memsync.stores import journal_mode

ROOT = Path(__file__).resolve().parents[2]


def sqlite_files(deployment: Any) -> list[Path]:
    paths = deployment.paths
    return sorted([paths.history_db, *paths.qdrant.glob("collection/*/storage.sqlite")])


def test_a_switch_to_wal_under_a_writing_mem0_fails_none_of_its_writes(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.live_writer", str(deployment.paths.root), "2.5"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    answers = [journal_mode.switch(path, journal_mode.WAL) for path in sqlite_files(deployment)]
    deadline = time.monotonic() + 10
    wal_files: set[str] = set()
    while time.monotonic() < deadline and writer.poll() is None and len(wal_files) < 2:
        wal_files |= {p.name for p in sqlite_files(deployment) if Path(f"{p}-wal").exists()}
        time.sleep(0.01)
    stats = json.loads(writer.stdout.readline())
    writer.wait()
    assert answers == ["wal", "wal"]
    assert wal_files == {"history.db", "storage.sqlite"}  # mem0's own connections use WAL now
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] > 0
    assert [journal_mode.verify(path) for path in sqlite_files(deployment)] == ["wal", "wal"]
    assert cli("check", config=deployment.config).code == 0


def test_leaving_wal_is_refused_at_once_while_mem0_has_the_files_open(deployment: Any) -> None:
    deployment.close()
    for path in sqlite_files(deployment):
        journal_mode.switch(path, journal_mode.WAL)
    memory = deployment.reopen()
    memory.add("plays chess on Thursdays", user_id="dmitri", infer=False)  # connections in use
    started = time.monotonic()
    with pytest.raises(TryLaterError, match="busy"):
        journal_mode.switch(deployment.paths.history_db, journal_mode.ROLLBACK)
    assert time.monotonic() - started < 2.0  # no busy wait: SQLite refuses outright
    assert journal_mode.probe_mode(deployment.paths.history_db) == "wal"
    deployment.close()
    assert journal_mode.switch(deployment.paths.history_db, journal_mode.ROLLBACK) == "delete"


def test_a_switch_to_wal_waits_out_a_writer_sqlite_refuses_at_once(tmp_path: Path) -> None:
    # SQLite answers "locked" without its busy handler when a reader wants to write while
    # another connection holds RESERVED (deadlock avoidance); a CI run hit it with mem0 writing.
    path = tmp_path / "history.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE history (id TEXT)")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE'); c.execute(\"INSERT INTO history VALUES ('a')\")\n"
            "print('held', flush=True); time.sleep(0.6); c.execute('COMMIT')\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    assert journal_mode.switch(path, journal_mode.WAL) == "wal"
    assert time.monotonic() - started >= 0.3  # it waited for the writer, it did not skip it
    assert holder.wait(timeout=10) == 0
    assert journal_mode.verify(path) == "wal"
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT id FROM history").fetchall() == [("a",)]
