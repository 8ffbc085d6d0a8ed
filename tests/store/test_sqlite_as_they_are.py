"""SQLite files as the field leaves them (issue 11, point 6).

(a) a ``-wal`` holding committed frames with no ``-shm`` beside it: files copied by hand while
the app ran, or an app stopped uncleanly. Every read must see the rows the WAL holds, and create
nothing beside the user's files. (b) a snapshot of a WAL-mode history.db restores in WAL mode.
(c) the restore report names every path it moved aside, and none it never created.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
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
    assert not list(Path(tempfile.gettempdir()).glob("memsync-wal-*"))


def _journal_mode(path: Path) -> str:
    header = path.read_bytes()[:20]
    return "wal" if header[18:20] == b"\x02\x02" else "rollback"


def test_a_wal_mode_history_db_is_restored_in_wal_mode(deployment, cli):
    history = deployment.paths.history_db
    deployment.close()
    switch = sqlite3.connect(history)
    assert switch.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    switch.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    snapshot_id = made.json()["id"]
    manifest = json.loads(
        (deployment.paths.root / "snapshots" / snapshot_id / "manifest.json").read_text()
    )
    modes = {entry["path"]: entry.get("journal_mode") for entry in manifest["files"]}
    assert modes["history.db"] == "wal"
    assert {m for p, m in modes.items() if p.endswith("storage.sqlite")} == {"rollback"}
    assert cli("snapshot", "verify", snapshot_id, config=deployment.config).code == 0
    result = cli("restore", "--force", "--json", snapshot_id, config=deployment.config)
    assert result.code == 0, result.err
    assert _journal_mode(history) == "wal"
    assert _journal_mode(Path(f"{history}.pre-restore-{snapshot_id}")) == "wal"
    memory = deployment.reopen()
    added = memory.add("written after the restore", user_id="ana", infer=False)
    assert memory.history(added["results"][0]["id"])[0]["event"] == "ADD"


def test_the_restore_report_names_what_it_moved_aside_and_nothing_else(deployment, cli):
    history = deployment.paths.history_db
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    snapshot_id = made.json()["id"]
    shutil.rmtree(deployment.paths.qdrant)
    history.unlink()
    onto_empty = cli("restore", "--json", snapshot_id, config=deployment.config)
    assert onto_empty.code == 0, onto_empty.err
    report = onto_empty.json()
    assert [m["aside"] for m in report["moves"]] == [None, None]
    assert report["moved_aside"] == []
    text = cli("restore", "--force", snapshot_id, config=deployment.config)
    assert text.code == 0, text.err
    # an app stopped uncleanly leaves history.db's side files: they move aside too
    qdrant_aside = f"{deployment.paths.qdrant}.pre-restore-{snapshot_id}"
    assert qdrant_aside in text.out
    Path(f"{history}-journal").write_bytes(b"")
    Path(f"{history}-wal").write_bytes(b"")
    Path(f"{history}-shm").write_bytes(b"")
    forced = cli("restore", "--force", "--json", snapshot_id, config=deployment.config)
    assert forced.code == 0, forced.err
    moved = forced.json()["moved_aside"]
    aside = f"{history}.pre-restore-{snapshot_id}-1"
    assert set(moved) == {
        f"{qdrant_aside}-1",
        aside,
        f"{aside}-journal",
        f"{aside}-wal",
        f"{aside}-shm",
    }
    assert all(Path(path).exists() for path in moved)


def test_a_purged_snapshot_keeps_the_journal_mode_its_files_had(deployment, cli):
    history = deployment.paths.history_db
    victim = deployment.seeded.live[0]
    deployment.close()
    switch = sqlite3.connect(history)
    assert switch.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    switch.close()
    snapshot_id = cli("snapshot", "create", "--json", config=deployment.config).json()["id"]
    assert cli("snapshot", "purge-memory", victim, "--yes", config=deployment.config).code == 0
    manifest = json.loads(
        (deployment.paths.root / "snapshots" / snapshot_id / "manifest.json").read_text()
    )
    assert {e["path"]: e.get("journal_mode") for e in manifest["files"]}["history.db"] == "wal"
