"""Inputs an adversarial tester found: each must give the documented exit and change nothing."""

from __future__ import annotations

import json
import pickle
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.helpers.holders import killed_inside_a_transaction
from tests.process.test_cli import fingerprint

ROOT = Path(__file__).resolve().parents[2]


def test_collection_name_with_dot_dots_is_refused_and_nothing_is_deleted(deployment, cli):
    deployment.close()
    meta_path = deployment.paths.qdrant / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["collections"]["../../collection/mem0"] = meta["collections"]["mem0"]
    meta_path.write_text(json.dumps(meta))
    before = fingerprint(deployment.paths.root)
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 11 and "invalid collection name" in json.loads(result.err)["message"]
    assert fingerprint(deployment.paths.root) == before


def test_wal_mode_store_is_read_without_creating_files_beside_it(deployment, cli):
    deployment.close()
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    for path in (deployment.paths.history_db, storage):
        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
        assert not Path(f"{path}-wal").exists()
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 0, result.err
    for path in (deployment.paths.history_db, storage):
        assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()
    doctor = cli("doctor", "--json", config=deployment.config).json()
    assert {r["message"] for r in doctor["results"] if r["code"] == "journal-mode"} == {"WAL"}


def test_listed_collection_without_its_storage_file_is_unreadable_not_empty(deployment, cli):
    deployment.close()
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    storage.unlink()
    storage.mkdir()
    result = cli("check", config=deployment.config)
    assert result.code == 11 and "not a regular file" in result.err


def test_dangling_history_symlink_is_unreadable_not_missing(deployment, cli):
    deployment.close()
    history = deployment.paths.history_db
    history.unlink()
    history.symlink_to(history.parent / "gone.db")
    assert cli("check", config=deployment.config).code == 11


def test_unenterable_directory_gives_11_for_check_and_an_error_result_for_doctor(deployment):
    deployment.close()
    deployment.paths.mem0_dir.chmod(0o700)
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    state = Path(f"/tmp/memsync-nobody-{uuid.uuid4().hex[:8]}")
    state.mkdir(mode=0o777)
    state.chmod(0o777)
    text = deployment.config.read_text().replace(
        f'state_dir = "{deployment.paths.state}"', f'state_dir = "{state}"'
    )
    config = state / "memsync.toml"
    config.write_text(text)
    config.chmod(0o644)
    for parent in [deployment.paths.root, *deployment.paths.root.parents]:
        parent.chmod(parent.stat().st_mode | 0o005)
    try:
        check = subprocess.run(
            [*prefix, sys.executable, "-m", "memsync", "check", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd="/",
        )
        doctor = subprocess.run(
            [*prefix, sys.executable, "-m", "memsync", "doctor", "--json", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd="/",
        )
    finally:
        deployment.paths.mem0_dir.chmod(0o755)
    if (
        "Permission denied" in check.stderr
        and "python" in check.stderr.lower()
        and check.returncode != 11
    ):
        raise AssertionError(
            f"the interpreter itself is not reachable for uid 65534: {check.stderr}"
        )
    assert check.returncode == 11, check.stderr
    assert doctor.returncode == 3, doctor.stderr
    errors = [r for r in json.loads(doctor.stdout)["results"] if r["status"] == "error"]
    assert any(r["code"] in ("path-permissions", "check") for r in errors)


def test_list_valued_scope_in_a_payload_does_not_crash(deployment, cli):
    deployment.close()
    from qdrant_client.http import models

    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    point = models.PointStruct(
        id=str(uuid.uuid4()),
        vector=[0.0] * 384,
        payload={"data": "x", "hash": "9dd4e461268c8034f5c8564e155c67a6", "user_id": ["alice"]},
    )
    with sqlite3.connect(storage) as connection:
        connection.execute(
            "INSERT INTO points VALUES (?, ?)", (f"key-{point.id}", pickle.dumps(point))
        )
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 3 and "orphan-point" in {f["code"] for f in result.json()["findings"]}


def test_doctor_is_not_healthy_when_the_stores_cannot_be_captured(deployment, cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    text = deployment.config.read_text().replace("plugins =", f'work_dir = "{blocker}"\nplugins =')
    deployment.config.write_text(text)
    result = cli("doctor", "--json", config=deployment.config)
    assert result.code == 3 and result.json()["ok"] is False
    assert cli("check", config=deployment.config).code == 11


def test_out_of_range_timestamps_do_not_crash(deployment, cli):
    deployment.close()
    with sqlite3.connect(deployment.paths.history_db) as connection:
        connection.execute(
            "INSERT INTO messages (id, session_scope, role, content, created_at) "
            "VALUES ('m1', 'user_id=ghost', 'user', 'hi', '0001-01-01T00:00:00+05:00')"
        )
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 0 and "orphan-messages" in {f["code"] for f in result.json()["findings"]}


def test_absurd_config_values_are_config_errors(deployment, cli):
    for bad in ('[daemon]\ncheck_every = "1000000000d"\n', "[daemon]\nstop_timeout_s = nan\n"):
        config = deployment.paths.root / "bad.toml"
        config.write_text(deployment.config.read_text() + "\n" + bad)
        result = cli("check", config=config)
        assert result.code == 10, (bad, result.err)


def test_sigterm_during_check_removes_its_copies_and_exits_130(cli, tmp_path):
    from memsync.demo.bulk import generate

    config = generate(tmp_path, 20_000)
    work = tmp_path / "state" / "tmp"
    process = subprocess.Popen(
        [sys.executable, "-m", "memsync", "check", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(work.glob("capture-*/history.db")):
        time.sleep(0.002)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    assert process.returncode == 130
    assert not list(work.glob("capture-*"))


def test_a_hot_journal_from_a_crashed_writer_is_75_for_check_and_rolled_back_by_reconcile(
    deployment, cli
):
    deployment.close()
    history = deployment.paths.history_db
    killed_inside_a_transaction(history)
    result = cli("check", config=deployment.config)
    assert result.code == 75 and "hot journal" in result.err
    fixed = cli("reconcile", "--json", "--no-snapshot", config=deployment.config)
    assert fixed.code == 0, fixed.err
    assert not Path(f"{history}-journal").exists()
    assert cli("check", config=deployment.config).code == 0
