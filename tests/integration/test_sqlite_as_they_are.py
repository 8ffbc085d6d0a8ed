"""SQLite files as the field leaves them (issue 11, point 6).

(a) a ``-wal`` holding committed frames with no ``-shm`` beside it: files copied by hand while
the app ran, or an app stopped uncleanly. Every read must see the rows the WAL holds, and create
nothing beside the user's files.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tests.conftest import error_findings

ADDED = 10


def _history_rows(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        return int(connection.execute("SELECT count(*) FROM history").fetchone()[0])
    finally:
        connection.close()


def wal_copied_by_hand(deployment, tmp_path: Path) -> tuple[int, list[str]]:
    """Put history.db in WAL mode, add ADDED memories while a reader keeps the WAL from being
    checkpointed, copy history.db and its -wal (not -shm) by hand, and put that copy back in
    place once everything is closed. Returns (history rows in the copy, the added ids)."""
    history = deployment.paths.history_db
    deployment.close()
    setup = sqlite3.connect(history)
    assert setup.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    setup.close()
    holder = sqlite3.connect(history)  # an open connection: no checkpoint on mem0's close
    holder.execute("PRAGMA wal_autocheckpoint=0")
    holder.execute("SELECT count(*) FROM history").fetchone()
    memory = deployment.reopen()
    added = [
        memory.add(f"written into the WAL {n}", user_id="ana", infer=False)["results"][0]["id"]
        for n in range(ADDED)
    ]
    by_hand = tmp_path / "by-hand"
    by_hand.mkdir()
    shutil.copyfile(history, by_hand / "history.db")
    shutil.copyfile(f"{history}-wal", by_hand / "history.db-wal")
    deployment.close()
    holder.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{history}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(by_hand / "history.db", history)
    shutil.copyfile(by_hand / "history.db-wal", f"{history}-wal")
    assert Path(f"{history}-wal").stat().st_size > 32 and not Path(f"{history}-shm").exists()
    rows = _history_rows(by_hand / "history.db")  # replays the WAL on the scratch copy
    return rows, added


def test_a_wal_with_frames_and_no_shm_is_read_in_full(deployment, cli, tmp_path):
    rows, added = wal_copied_by_hand(deployment, tmp_path)
    history = deployment.paths.history_db
    wal_before = Path(f"{history}-wal").read_bytes()
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 0, result.out
    assert error_findings(result.json()) == {}
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    snapshot_id = made.json()["id"]
    copy = deployment.paths.root / "snapshots" / snapshot_id / "history.db"
    assert _history_rows(copy) == rows
    plan = cli("reconcile", "--dry-run", "--json", config=deployment.config)
    assert plan.code == 0, plan.out
    assert not [a for a in plan.json()["actions"] if a.get("memory_id") in added]
    assert not Path(f"{history}-shm").exists()
    assert Path(f"{history}-wal").read_bytes() == wal_before
    assert not list(Path("/tmp").glob("memsync-wal-*"))
