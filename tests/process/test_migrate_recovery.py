"""A migration recovers from what stops it: a kill, a hot target journal, a wrong size, a full
disk, a damaged journal, a damaged source, and the app's writes between two runs.

Real parts throughout: the migration runs as ``python -m memsync migrate`` when it is killed
(SIGKILL) or its target's disk fills (a small tmpfs mounted in a private mount namespace).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from memsync import config as config_module
from memsync.stores import history
from tests.helpers.migrate import qdrant_points, scroll_points, target_config

ROOT = Path(__file__).resolve().parents[2]


def _migrate(source, new: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "memsync", "migrate", "--to", str(new), *extra,
         "--config", str(source.config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _work_dir(source) -> Path:
    return config_module.load(source.config, os.environ).work_dir


def _kill_once(process: subprocess.Popen, ready, what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ready():
            process.send_signal(signal.SIGKILL)
            process.wait()
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.005)
    raise AssertionError(f"never saw {what}")


def _journal(source) -> dict:
    return json.loads((source.paths.state / "migrate.json").read_text())


def test_a_killed_migration_leaves_no_store_copy_after_the_next_command(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=40)
    new = target_config(source.paths, tmp_path / "new", embedder="migrate_slow", dims=256)
    process = _migrate(source, new, "--batch-size", "5")
    journal = source.paths.state / "migrate.json"
    _kill_once(process, lambda: journal.is_file() and _journal(source)["batches_done"] >= 1,
               "a written batch")  # fmt: skip
    left = list(_work_dir(source).glob("capture-*"))
    assert len(left) == 1 and (left[0] / "source" / "history.db").is_file()  # personal data
    assert cli("check", config=source.config).code in (0, 3)
    assert not left[0].exists()


def test_forget_erase_removes_a_killed_migrations_copies_and_names_its_target(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=20)
    new = target_config(source.paths, tmp_path / "new", embedder="migrate_slow", dims=256)
    process = _migrate(source, new, "--batch-size", "5")
    journal = source.paths.state / "migrate.json"
    _kill_once(process, lambda: journal.is_file() and _journal(source)["batches_done"] >= 1,
               "a written batch")  # fmt: skip
    (left,) = _work_dir(source).glob("capture-*")
    user = source.memory.vector_store.client.retrieve(
        "mem0", [source.seeded.live[0]], with_payload=True
    )[0].payload["user_id"]
    source.close()  # the app stops: forget writes through mem0
    result = cli("forget", "--user", user, "--erase", "--yes", "--json", config=source.config)
    assert result.code == 0, result.err
    assert not left.exists()  # forget's capture, or erase's purge of own copies, removed it
    report = result.json()
    (entry,) = [c for c in report["erased"]["copies"] if c["kind"] == "migration-target"]
    assert entry["where"] == str(tmp_path / "new" / "qdrant")
    assert "memsync migrate again" in entry["remove"] and str(journal) in entry["remove"]


def test_a_target_left_with_a_hot_journal_is_rolled_back_and_the_migration_resumes(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=20)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    storage = tmp_path / "new" / "qdrant" / "collection" / "mem0" / "storage.sqlite"
    # a writer killed mid-transaction: pages spilled into the file, the journal left hot
    writer = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('PRAGMA cache_size = 1'); c.execute('BEGIN')\n"
         "c.execute('UPDATE points SET point = zeroblob(length(point))')\n"
         "print('ready', flush=True); time.sleep(60)\n", str(storage)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert writer.stdout.readline() == "ready\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert Path(f"{storage}-journal").stat().st_size > 0
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["verified"] is True and report["copied"] == 0
    assert not Path(f"{storage}-journal").exists()


def test_a_wrong_size_is_refused_before_the_target_is_created(make_deployment, tmp_path, cli):
    source = make_deployment(count=5)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=300)
    result = cli("migrate", "--to", str(new), config=source.config)
    assert result.code == 10
    assert str(new) in result.err and "returned 256 dimensions" in result.err
    assert "embedding_model_dims" in result.err
    assert not (tmp_path / "new" / "qdrant").exists()
    assert not (source.paths.state / "migrate.json").exists()
    new.write_text(new.read_text().replace("= 300", "= 256"))
    fixed = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert fixed.code == 0 and fixed.json()["verified"] is True, fixed.err


def test_resuming_into_a_target_of_another_size_is_refused_naming_it(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=5)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    new.write_text(new.read_text().replace("= 256", "= 300"))
    result = cli("migrate", "--to", str(new), config=source.config)
    assert result.code == 10
    assert str(new) in result.err and "created with 256-dimension vectors" in result.err
    target = str(tmp_path / "new" / "qdrant")
    assert f"remove the target {target}" in result.err and "migrate.json" in result.err


@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux unshare is needed")
def test_a_full_target_disk_exits_75_naming_the_target_and_the_re_run_resumes(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=40)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    target = tmp_path / "new" / "qdrant"
    target.mkdir()
    command = [sys.executable, "-m", "memsync", "migrate", "--to", str(new), "--batch-size",
               "5", "--config", str(source.config)]  # fmt: skip
    script = 'mount -t tmpfs -o size=160k tmpfs "$1" && shift && exec "$@"'
    full = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(target),
         *command],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert full.returncode == 75, full.stderr
    assert f"the target {target} has no space left" in full.stderr
    assert "run the same memsync migrate again" in full.stderr
    assert "this is a bug" not in full.stderr
    assert _journal(source)["phase"] == "copy"
    # the tmpfs went with its namespace: the target is an empty directory again; with a
    # journal there, the re-run resumes into it
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 0 and result.json()["verified"] is True, result.err


@pytest.mark.parametrize(
    "change",
    [{"batches_done": "x"}, {"points_copied": None}, {"target": 7}, None],
    ids=["batches-text", "points-null", "target-number", "empty-object"],
)
def test_a_journal_with_wrongly_typed_fields_is_refused_and_left_as_it_is(
    make_deployment, tmp_path, cli, change
):
    source = make_deployment(count=5)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    path = source.paths.state / "migrate.json"
    document = {} if change is None else {**json.loads(path.read_text()), **change}
    path.write_text(json.dumps(document))
    before = path.read_bytes()
    result = cli("migrate", "--to", str(new), config=source.config)
    assert result.code == 11
    assert f"migration journal {path} is damaged" in result.err and "move it aside" in result.err
    assert path.read_bytes() == before


def test_a_damaged_source_point_is_named_in_the_live_store_not_the_copy(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=5)
    storage = source.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    connection = sqlite3.connect(storage)
    with connection:
        connection.execute(
            "INSERT INTO points (id, point) VALUES (?, ?)", (str(uuid.uuid4()), b"not a pickle")
        )
    connection.close()
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    result = cli("migrate", "--to", str(new), "--dry-run", config=source.config)
    assert result.code == 11, result.err
    assert f"{storage} (read from a fresh copy)" in result.err
    assert str(_work_dir(source)) not in result.err


def test_history_ids_since_a_row_are_normalised_and_skip_null(tmp_path):
    database = tmp_path / "history.db"
    connection = sqlite3.connect(database)
    memory_id = str(uuid.uuid4())
    with connection:
        connection.execute("CREATE TABLE history (id TEXT, memory_id TEXT, event TEXT)")
        connection.execute("INSERT INTO history VALUES ('a', 'before', 'ADD')")
        connection.executemany(
            "INSERT INTO history VALUES (?, ?, 'UPDATE')",
            [("b", memory_id.upper()), ("c", None), ("d", "{" + memory_id + "}"), ("e", "x-1")],
        )
    connection.close()
    assert history.memory_ids_since(database, 1) == {memory_id, "x-1"}


def test_a_re_run_after_the_app_deleted_and_updated_catches_the_target_up(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=10)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    deleted, updated = source.seeded.live[0], source.seeded.live[1]
    source.memory.delete(deleted)
    source.memory.update(updated, "now prefers green tea to coffee")
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["verified"] is True and report["resumed"] is True
    assert report["removed"] == [deleted] and updated in report["replaced"]
    assert report["copied"] == len(report["replaced"])  # the rest was skipped, not rewritten
    live = scroll_points(source.memory.vector_store.client)
    target = qdrant_points(tmp_path / "new" / "qdrant")
    assert set(target) == set(live) and deleted not in target
    assert target[updated][0]["data"] == "now prefers green tea to coffee"
    # only the target changed: the app's store still has what the app wrote
    assert live[updated][0]["data"] == "now prefers green tea to coffee"


def test_a_refused_history_path_gets_its_own_hint(make_deployment, tmp_path, cli):
    source = make_deployment(count=5)
    new = target_config(
        source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256,
        history=tmp_path / "other.db",
    )  # fmt: skip
    result = cli("migrate", "--to", str(new), config=source.config)
    assert result.code == 10
    assert f"history_db_path in the new config to {source.paths.history_db}" in result.err
    assert "name a new directory" not in result.err
