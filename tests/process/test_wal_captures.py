"""Captures of WAL-mode stores: committed WAL content included, read-only mounts, round trips.

After ``memsync tune --wal`` every capture reads through the WAL: rows a writer committed but
has not checkpointed live only in ``-wal`` and must be in the copy. A reader on a read-only
mount cannot write ``-shm`` (SQLite then maps the WAL index in its own memory). Real mem0
(hash embedder), real SQLite files, a real read-only bind mount in a private mount namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsync.stores.sqlite_files import header_journal_mode
from memsync.utc import parse
from tests.helpers.app import AppProcess

ROOT = Path(__file__).resolve().parents[2]


def sqlite_files(deployment: Any) -> list[Path]:
    paths = deployment.paths
    return sorted([paths.history_db, *paths.qdrant.glob("collection/*/storage.sqlite")])


def main_file_rows(path: Path, table: str) -> int:
    """Rows in the main file alone, WAL ignored (``immutable=1`` reads no -wal)."""
    uri = f"{path.absolute().as_uri()}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608


def test_a_snapshot_of_wal_files_restores_clean_and_in_wal_mode(deployment: Any, cli: Any) -> None:
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    created = cli("snapshot", "create", "--json", config=deployment.config)
    assert created.code == 0, created.err
    points = created.json()["collections"]["mem0"]["points"]
    manifest = json.loads((Path(created.json()["path"]) / "manifest.json").read_text())
    modes = {f["path"]: f.get("journal_mode") for f in manifest["files"]}
    assert modes["history.db"] == "wal" and modes["qdrant/collection/mem0/storage.sqlite"] == "wal"
    assert cli("snapshot", "verify", created.json()["id"], config=deployment.config).code == 0
    restored = cli("restore", created.json()["id"], "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.err
    assert {header_journal_mode(p) for p in sqlite_files(deployment)} == {"wal"}
    checked = cli("check", "--json", config=deployment.config)
    assert checked.code == 0 and checked.json()["counts"]["points"] == points


def test_a_capture_includes_what_a_writer_committed_but_has_not_checkpointed(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    before = cli("check", "--json", config=deployment.config).json()["counts"]
    memory = deployment.reopen()  # the app, in this process: its connections stay open
    memory.db.connection.execute("PRAGMA wal_autocheckpoint=0")
    storage = memory.vector_store.client._client.collections["mem0"].storage.storage
    storage.execute("PRAGMA wal_autocheckpoint=0")
    history_rows = main_file_rows(deployment.paths.history_db, "history")
    added = [
        memory.add(f"lives near harbour {n}", user_id="bob", infer=False)["results"][0]["id"]
        for n in range(12)
    ]
    for path in sqlite_files(deployment):
        assert Path(f"{path}-wal").stat().st_size > 32, path  # frames, not checkpointed
    assert main_file_rows(deployment.paths.history_db, "history") == history_rows
    created = cli("snapshot", "create", "--json", config=deployment.config)
    assert created.code == 0, created.err
    report = created.json()
    assert report["collections"]["mem0"]["points"] == before["points"] + 12
    assert report["history"]["memories"] == before["history_memories"] + 12
    assert report["check"]["errors"] == 0
    assert report["capture_budget"]["near_timeout"] == []
    checked = cli("check", "--json", config=deployment.config)
    assert checked.code == 0 and checked.json()["counts"]["points"] == before["points"] + 12
    copy = Path(report["path"]) / "history.db"
    with sqlite3.connect(copy) as connection:
        rows = {row[0] for row in connection.execute("SELECT memory_id FROM history")}
    assert set(added) <= rows


def _read_only_check(config: Path, store_dirs: list[Path]) -> subprocess.CompletedProcess[str]:
    """``memsync check --json`` in a private mount namespace where ``store_dirs`` are read-only."""
    mounts = " && ".join(
        f"mount --bind {d} {d} && mount -o remount,bind,ro {d} {d}" for d in store_dirs
    )
    command = f"{mounts} && exec {sys.executable} -m memsync check --json --config {config}"
    return subprocess.run(  # noqa: S603 - fixed argv
        [shutil.which("unshare") or "unshare", "-m", "sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root (unshare -m)")
def test_a_read_only_mount_of_a_live_wal_store_is_captured_in_full(
    deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    paths = deployment.paths
    with AppProcess(
        paths.root, agent=tmp_path / "run" / "memsync-agent.sock", interval=0.02
    ) as app:
        # the app keeps -wal and -shm open beside the files; memsync may not write there at all
        result = _read_only_check(deployment.config, [paths.qdrant, paths.mem0_dir])
        stats = app.stop()
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["counts"]["points"] > 0
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert stats["failures"] == 0, stats["errors"]


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root (unshare -m)")
def test_a_read_only_mount_of_a_stopped_wal_store_with_frames_is_captured_in_full(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    before = cli("check", "--json", config=deployment.config).json()["counts"]
    memory = deployment.reopen()
    memory.db.connection.execute("PRAGMA wal_autocheckpoint=0")
    history_rows = main_file_rows(deployment.paths.history_db, "history")
    for n in range(5):
        memory.add(f"reads books about orion {n}", user_id="eun-ji", infer=False)
    # an app killed before it could checkpoint: the main file and a -wal with frames, no -shm
    history = deployment.paths.history_db
    image = history.read_bytes(), Path(f"{history}-wal").read_bytes()
    deployment.close()  # checkpoints; put the crash image back
    history.write_bytes(image[0])
    Path(f"{history}-wal").write_bytes(image[1])
    Path(f"{history}-shm").unlink(missing_ok=True)
    assert main_file_rows(history, "history") == history_rows
    result = _read_only_check(
        deployment.config, [deployment.paths.qdrant, deployment.paths.mem0_dir]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["counts"]["points"] == before["points"] + 5
    assert report["counts"]["history_memories"] == before["history_memories"] + 5
    assert [f for f in report["findings"] if f["severity"] == "error"] == []


def test_a_wal_capture_reads_both_stores_at_one_instant_while_the_app_writes(
    deployment, cli, tmp_path
):
    """In WAL mode the app's writer never waits for a capture, so each file's copy would see its
    own moment; pinned read snapshots make the pair one instant: it settles at once."""
    from tests.helpers.app import AppProcess

    deployment.close()
    assert cli("tune", "--wal", "--json", config=deployment.config).code == 0
    with AppProcess(deployment.paths.root, interval=0.01) as app:  # no agent: not quiesced
        reports = [cli("snapshot", "create", "--json", config=deployment.config) for _ in range(3)]
        stats = app.stop()
    assert stats["failures"] == 0 and stats["writes"] > 0
    for created in reports:
        assert created.code == 0, created.err
        assert created.json()["quiesced"] is False
        assert created.json()["check"]["unsettled"] == []
        capture = json.loads((Path(created.json()["path"]) / "manifest.json").read_text())[
            "capture"
        ]
        vectors_at, history_at = (parse(capture[k]) for k in ("vectors_at", "history_at"))
        vectors_done = parse(capture["vectors_finished_at"])
        assert history_at <= vectors_done  # history's snapshot opened before the vectors copied
        assert (history_at - vectors_at).total_seconds() < 0.5


def _limited_check(config: Path, max_file_bytes: int) -> subprocess.CompletedProcess[str]:
    """``memsync check --json`` in a process that may write no file larger than the limit."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "memsync", "check", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=limit,  # noqa: PLW1509 - only setrlimit, before exec
        check=False,
    )


def test_check_reads_a_live_wal_store_in_place_while_the_app_writes(
    deployment: Any, cli: Any
) -> None:
    """In WAL mode with the app running, check copies nothing: it holds one read snapshot of
    each live file (opened at one instant) and reads them in place, where a reader never blocks
    the app's writer. Seen here from outside: check succeeds in a process that cannot write a
    file a tenth the size of the store, while the app writes and none of its writes fails."""
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    limit = storage.stat().st_size // 10
    assert limit > 4096  # room for the small files check writes itself (last-check.json)
    with AppProcess(deployment.paths.root, interval=0.01) as app:  # no agent: not quiesced
        results = [_limited_check(deployment.config, limit) for _ in range(3)]
        stats = app.stop()
    assert stats["failures"] == 0 and stats["writes"] > 0, stats["errors"]
    for result in results:
        assert result.returncode in (0, 3), result.stderr[-2000:]
        report = json.loads(result.stdout)
        assert [f for f in report["findings"] if f["severity"] == "error"] == []
    settled = cli("check", "--json", config=deployment.config)  # the app stopped: a copy
    assert settled.code == 0 and settled.json()["counts"]["infos"] == 0
