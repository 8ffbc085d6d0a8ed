"""restore: both stores back together from a snapshot, or neither; the old files kept aside."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import error_findings, s3_section
from tests.helpers.holders import app_holding, history_events, killed_inside_a_transaction
from tests.process.test_cli import fingerprint

ROOT = Path(__file__).resolve().parents[2]


def snapshot(cli, deployment) -> str:
    deployment.close()
    result = cli("snapshot", "create", "--json", config=deployment.config)
    assert result.code == 0, result.err
    return result.json()["id"]


def test_restore_after_a_lost_disk_brings_both_stores_back(deployment, cli):
    snapshot_id = snapshot(cli, deployment)
    before = fingerprint(deployment.paths.root)
    shutil.rmtree(deployment.paths.qdrant)
    deployment.paths.history_db.unlink()
    result = cli("restore", "--json", snapshot_id, config=deployment.config)
    assert result.code == 0, result.err
    assert result.json()["check_after"]["errors"] == 0
    after = fingerprint(deployment.paths.root)
    for name in ("mem0/history.db", "qdrant/collection/mem0/storage.sqlite"):
        assert after[name] != "" and name in before
    memory = deployment.reopen()
    assert memory.get(deployment.seeded.live[0]) is not None


def test_a_hot_journal_a_killed_app_left_moves_aside_with_its_history_db(deployment, cli):
    snapshot_id = snapshot(cli, deployment)
    history = deployment.paths.history_db
    committed = history_events(history)
    killed_inside_a_transaction(history)
    result = cli("restore", "--force", "--json", snapshot_id, config=deployment.config)
    assert result.code == 0, result.err
    assert not Path(f"{history}-journal").exists()
    aside = Path(f"{history}.pre-restore-{snapshot_id}")
    assert Path(f"{aside}-journal").exists()  # the copy rolls back the killed write when opened
    assert history_events(aside) == committed
    assert error_findings(cli("check", "--json", config=deployment.config).json()) == {}


def test_restore_refuses_a_deployment_with_data_unless_forced_and_keeps_the_old_files(
    deployment, cli
):
    snapshot_id = snapshot(cli, deployment)
    memory = deployment.reopen()
    newer = memory.add("added after the snapshot", user_id="ana", infer=False)["results"][0]["id"]
    deployment.close()
    refused = cli("restore", snapshot_id, config=deployment.config)
    assert refused.code == 2 and "--force" in refused.err
    skipped = cli("restore", "--if-empty", "--json", snapshot_id, config=deployment.config)
    assert skipped.code == 0 and skipped.json()["skipped"] is True
    dry = cli("restore", "--dry-run", snapshot_id, config=deployment.config)
    assert dry.code == 0 and "would move" in dry.out
    result = cli("restore", "--force", "--json", snapshot_id, config=deployment.config)
    assert result.code == 0, result.err
    aside = Path(f"{deployment.paths.qdrant}.pre-restore-{snapshot_id}")
    assert (
        aside.is_dir()
        and Path(f"{deployment.paths.history_db}.pre-restore-{snapshot_id}").is_file()
    )
    memory = deployment.reopen()
    assert memory.get(newer) is None
    deployment.close()
    doctor = cli("doctor", "--json", config=deployment.config).json()
    assert {r["path"] for r in doctor["results"] if r["code"] == "pre-restore-copy"} >= {str(aside)}


def test_restore_refuses_while_the_app_holds_the_store(deployment, cli):
    snapshot_id = snapshot(cli, deployment)
    with app_holding(deployment.paths.qdrant) as app:
        before = fingerprint(deployment.paths.root)
        result = cli("restore", "--force", "--json", snapshot_id, config=deployment.config)
    assert result.code == 12 and f"pid {app.pid}" in json.loads(result.err)["message"]
    assert fingerprint(deployment.paths.root) == before


def test_restore_refuses_a_damaged_or_mismatched_snapshot(deployment, cli):
    snapshot_id = snapshot(cli, deployment)
    root = deployment.paths.root / "snapshots" / snapshot_id
    before = fingerprint(deployment.paths.root)
    history = root / "history.db"
    history.write_bytes(history.read_bytes()[:1000])
    damaged = cli("restore", "--force", snapshot_id, config=deployment.config)
    assert damaged.code == 11 and "checksum-mismatch" in damaged.err
    assert fingerprint(deployment.paths.root) == before
    second = snapshot(cli, deployment)
    deployment.config.write_text(
        deployment.config.read_text().replace(
            "embedding_model_dims = 384", "embedding_model_dims = 1536"
        )
    )
    mismatched = cli("restore", "--force", second, config=deployment.config)
    assert mismatched.code == 10 and "1536" in mismatched.err


def test_restore_from_s3(make_deployment, cli, s3_endpoint, bucket):
    deployment = make_deployment(count=20, extra_config=s3_section(s3_endpoint, bucket))
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config).json()
    shutil.rmtree(deployment.paths.root / "snapshots")
    shutil.rmtree(deployment.paths.qdrant)
    deployment.paths.history_db.unlink()
    result = cli(
        "restore", "--json", f"s3://{bucket}/memsync/test/{made['id']}", config=deployment.config
    )
    assert result.code == 0, result.err
    assert result.json()["check_after"]["points"] == len(deployment.seeded.live)


def test_sigkill_during_restore_leaves_the_old_or_the_new_deployment_never_a_mix(
    make_deployment, cli
):
    deployment = make_deployment(count=300)
    snapshot_id = snapshot(cli, deployment)
    import hashlib

    base = deployment.paths.root / "snapshots" / snapshot_id
    taken = {
        str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in base.rglob("*")
        if p.is_file()
    }
    new_state = {
        **fingerprint(deployment.paths.root),
        "mem0/history.db": taken["history.db"],
        **{k: v for k, v in taken.items() if k.startswith("qdrant/")},
    }
    memory = deployment.reopen()
    for index in range(30):
        memory.add(f"after the snapshot {index}", user_id="bob", infer=False)
    deployment.close()
    old_state = fingerprint(deployment.paths.root)
    journal = deployment.paths.state / "restore-journal.json"
    outcomes = set()
    for trigger in ("staged", "aside", "in", None):
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memsync",
                "restore",
                "--force",
                snapshot_id,
                "--config",
                str(deployment.config),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while trigger and time.monotonic() < deadline and process.poll() is None:
            try:
                text = journal.read_text()
            except FileNotFoundError:  # not written yet, or the restore already finished
                text = ""
            if f'"phase": "{trigger}"' in text:
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(0.0005)
        process.wait()
        recovered = cli("restore", "--resume", "--json", config=deployment.config)
        assert recovered.code == 0
        state = {
            k: v
            for k, v in fingerprint(deployment.paths.root).items()
            if ".pre-restore-" not in k and ".restore-" not in k
        }
        assert state in (old_state, new_state), trigger
        outcomes.add("new" if state == new_state else "old")
        check = cli("check", "--json", config=deployment.config)
        assert check.code == 0, error_findings(check.json())
        if state == new_state:  # put the old deployment back for the next round
            for target in (deployment.paths.qdrant, deployment.paths.history_db):
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink()
                Path(f"{target}.pre-restore-{snapshot_id}").rename(target)
    assert outcomes == {"old", "new"}


def test_restoring_the_same_snapshot_twice_keeps_every_pre_restore_copy(deployment, cli):
    snapshot_id = snapshot(cli, deployment)
    assert cli("restore", "--force", snapshot_id, config=deployment.config).code == 0
    first_aside = Path(f"{deployment.paths.history_db}.pre-restore-{snapshot_id}")
    kept = first_aside.read_bytes()
    memory = deployment.reopen()
    memory.add("added between the restores", user_id="ana", infer=False)
    deployment.close()
    assert cli("restore", "--force", snapshot_id, config=deployment.config).code == 0
    assert first_aside.read_bytes() == kept
    second_aside = Path(f"{deployment.paths.history_db}.pre-restore-{snapshot_id}-1")
    assert second_aside.is_file() and b"added between the restores" in second_aside.read_bytes()


def test_rollback_brings_history_wal_files_back(deployment, cli):
    import sqlite3

    snapshot_id = snapshot(cli, deployment)
    history = deployment.paths.history_db
    with sqlite3.connect(history) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    # a writer killed after its commit: the row lives only in the -wal file
    script = (
        f"import os, sqlite3; c = sqlite3.connect({str(history)!r}); "
        "c.execute('PRAGMA wal_autocheckpoint=0'); "
        "c.execute(\"INSERT INTO history (id, memory_id, event) VALUES ('wal-only', 'x', 'ADD')\"); "
        "c.commit(); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    wal = Path(f"{history}-wal")
    assert wal.exists() and wal.stat().st_size > 0
    wal_bytes = wal.read_bytes()
    # a restore that dies after moving everything aside, before moving anything in
    from memsync import config as config_module
    from memsync import restore
    from memsync.deployment import Deployment

    loaded = config_module.load(deployment.config, {"HOME": str(deployment.paths.root)})
    moves = restore._unique_asides(
        restore._with_existence(restore.plan_restore(Deployment.open(loaded), snapshot_id))
    )
    import shutil as _shutil

    for move in moves:
        Path(move.staged).mkdir() if move.live.endswith("qdrant") else Path(
            move.staged
        ).write_bytes(b"new")
    for move in moves:
        import os

        os.rename(move.live, move.aside)
        for suffix in restore.SIDE_SUFFIXES:
            if Path(move.live + suffix).exists():
                os.rename(move.live + suffix, move.aside + suffix)
    from dataclasses import asdict

    from memsync.state import write_json_atomic

    loaded.state_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        loaded.state_dir / "restore-journal.json",
        {"snapshot_id": snapshot_id, "phase": "aside", "moves": [asdict(m) for m in moves]},
    )
    result = cli("restore", "--resume", "--json", config=deployment.config)
    assert result.code == 0 and "rolled back" in result.json()["recovered"]
    assert wal.read_bytes() == wal_bytes
    with sqlite3.connect(history) as connection:
        assert (
            connection.execute("SELECT count(*) FROM history WHERE id = 'wal-only'").fetchone()[0]
            == 1
        )
    _shutil.rmtree(Path(moves[0].staged), ignore_errors=True)
