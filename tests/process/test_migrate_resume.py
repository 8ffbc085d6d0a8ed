"""A migration killed mid-way resumes; an embedder that fails transiently is retried.

The migration runs as ``python -m memsync migrate`` and is SIGKILLed once its journal records
written batches; the app (a real Memory in this process) holds the source throughout.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from qdrant_client.models import PointStruct

from tests.helpers import migrate_plugin as plugin
from tests.helpers.migrate import qdrant_points, scroll_points, target_config

ROOT = Path(__file__).resolve().parents[2]
HASH_DIMS = 384  # the test deployments' (memsync.demo.deployment's default)


def _journal(state: Path) -> dict | None:
    try:
        return json.loads((state / "migrate.json").read_text())
    except (OSError, ValueError):
        return None


def _kill_after_batches(process: subprocess.Popen, state: Path, batches: int) -> dict:
    """SIGKILL ``process`` once its journal records ``batches`` written; return that journal."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        journal = _journal(state)
        if journal and journal.get("batches_done", 0) >= batches:
            process.send_signal(signal.SIGKILL)
            process.wait()
            return journal
        assert process.poll() is None, process.communicate()
        time.sleep(0.005)
    raise AssertionError("the migration recorded no batch in time")


def _rows(storage: Path) -> int:
    connection = sqlite3.connect(f"file:{storage}?mode=ro", uri=True)
    try:
        return int(connection.execute("SELECT count(*) FROM points").fetchone()[0])
    finally:
        connection.close()


def test_a_migration_killed_mid_way_resumes_without_a_duplicate_point(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=60)
    new = target_config(source.paths, tmp_path / "new", embedder="migrate_slow", dims=256)
    process = subprocess.Popen(
        [sys.executable, "-m", "memsync", "migrate", "--to", str(new), "--batch-size", "5",
         "--config", str(source.config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    killed = _kill_after_batches(process, source.paths.state, 2)
    assert process.returncode == -signal.SIGKILL and killed["phase"] == "copy"
    storage = tmp_path / "new" / "qdrant" / "collection" / "mem0" / "storage.sqlite"
    written = _rows(storage)
    total = len(source.seeded.live)
    assert 10 <= written < total  # killed mid-way: some batches in the target, not all
    result = cli("migrate", "--to", str(new), "--batch-size", "5", "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["resumed"] is True and report["verified"] is True
    assert report["skipped"] == written and report["copied"] == total - written
    assert _rows(storage) == total  # one row per point: nothing written twice
    live = scroll_points(source.memory.vector_store.client)
    target = qdrant_points(tmp_path / "new" / "qdrant")
    assert set(target) == set(live) and all(target[i][0] == live[i][0] for i in live)
    journal = _journal(source.paths.state)
    assert journal["phase"] == "verified" and journal["points_copied"] == total


def test_another_target_is_refused_while_a_migration_journal_is_there(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=10)
    first = target_config(source.paths, tmp_path / "first", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(first), config=source.config).code == 0
    second = target_config(source.paths, tmp_path / "second", embedder="memsync_hash256", dims=256)
    result = cli("migrate", "--to", str(second), config=source.config)
    assert result.code == 10
    assert str(first) in result.err and "migrate.json" in result.err
    assert not (tmp_path / "second" / "qdrant").exists()


def test_an_embedder_failing_transiently_is_retried_until_it_answers(
    make_deployment, tmp_path, cli, monkeypatch
):
    source = make_deployment(count=10)
    new = target_config(source.paths, tmp_path / "new", embedder="migrate_flaky", dims=256)
    monkeypatch.setenv(plugin.FLAKY_FAILS_ENV, "3")
    calls = tmp_path / "embedder-calls"
    monkeypatch.setenv(plugin.FLAKY_LOG_ENV, str(calls))
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    total = len(source.seeded.live)
    assert report["verified"] is True and report["re_embedded"] == total
    # Two writer processes (the size probe's, the copy's), each failing three times first;
    # then the probe, one embedding per point, and verify's sampled searches.
    lines = calls.read_text().split()
    assert lines.count("fail") == 3 + 3
    assert lines.count("ok") == 1 + total + report["search_sampled"]


def test_re_embedding_asks_the_embedder_once_per_batch(make_deployment, tmp_path, cli, monkeypatch):
    source = make_deployment(count=10)
    new = target_config(source.paths, tmp_path / "new", embedder="migrate_counted", dims=256)
    calls = tmp_path / "embedder-calls"
    monkeypatch.setenv(plugin.FLAKY_LOG_ENV, str(calls))
    result = cli("migrate", "--to", str(new), "--batch-size", "4", "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    total = len(source.seeded.live)
    assert report["verified"] is True and report["re_embedded"] == total
    lines = calls.read_text().splitlines()
    batches = [int(line.split()[1]) for line in lines if line.startswith("batch ")]
    assert batches == [4] * (total // 4) + ([total % 4] if total % 4 else [])
    # one text each: the size probe, and verify's sampled searches
    assert lines.count("one") == 1 + report["search_sampled"]


def test_an_embedder_that_keeps_failing_stops_with_exit_11_naming_it_before_writing(
    make_deployment, tmp_path, cli, monkeypatch
):
    source = make_deployment(count=10)
    new = target_config(source.paths, tmp_path / "new", embedder="migrate_flaky", dims=256)
    monkeypatch.setenv(plugin.FLAKY_FAILS_ENV, "-1")
    result = cli("migrate", "--to", str(new), config=source.config)
    assert result.code == 11 and result.out == ""
    assert "embedder migrate_flaky failed 6 times embedding point" in result.err
    assert "429 Too Many Requests" in result.err
    # the size probe failed before anything was written: no journal, no target
    assert _journal(source.paths.state) is None and not (tmp_path / "new" / "qdrant").exists()
    monkeypatch.setenv(plugin.FLAKY_FAILS_ENV, "0")  # the service answers again
    again = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert again.code == 0 and again.json()["verified"] is True


def test_a_target_point_changed_behind_migrate_is_copied_again_by_the_re_run(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=10)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    from qdrant_client import QdrantClient

    damaged = source.seeded.live[0]
    client = QdrantClient(path=str(tmp_path / "new" / "qdrant"))
    client.set_payload("mem0", payload={"data": "not what the user said"}, points=[damaged])
    client.close()
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["verified"] is True and report["copied"] == 1
    assert report["replaced"] == [damaged] and report["removed"] == []
    live = scroll_points(source.memory.vector_store.client)
    assert qdrant_points(tmp_path / "new" / "qdrant")[damaged][0] == live[damaged][0]
    assert _journal(source.paths.state)["phase"] == "verified"


def test_verification_names_a_target_vector_that_differs_and_exits_3_with_a_hint(
    make_deployment, tmp_path, cli
):
    """Vectors copied as they are (same embedder, new directory): a changed vector stays."""
    source = make_deployment(count=10)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash", dims=HASH_DIMS)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    from qdrant_client import QdrantClient

    damaged = source.seeded.live[0]
    client = QdrantClient(path=str(tmp_path / "new" / "qdrant"))
    (record,) = client.retrieve("mem0", [damaged], with_vectors=True, with_payload=True)
    vector = record.vector.get("") if isinstance(record.vector, dict) else record.vector
    client.upsert("mem0", [PointStruct(id=damaged, vector=[-x for x in vector],
                                       payload=record.payload)])  # fmt: skip
    client.close()
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 3
    report = result.json()
    assert report["verified"] is False and report["copied"] == 0
    assert {(d["point_id"], d["what"]) for d in report["differences"]} >= {(damaged, "vector")}
    assert _journal(source.paths.state)["phase"] == "differs"
    text = cli("migrate", "--to", str(new), config=source.config)
    assert text.code == 3
    assert "run the same memsync migrate again" in text.out
    assert f"remove the target {tmp_path / 'new' / 'qdrant'}" in text.out


def test_a_migration_whose_new_config_now_names_another_target_is_refused(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=10)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    new.write_text(new.read_text().replace(str(tmp_path / "new" / "qdrant"), str(tmp_path / "q2")))
    result = cli("migrate", "--to", str(new), config=source.config)
    assert result.code == 10 and str(tmp_path / "new" / "qdrant") in result.err
    assert not (tmp_path / "q2").exists()
