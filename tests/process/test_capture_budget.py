"""The capture budget on real deployments: warned before a capture, recommended by doctor.

A 200,000-point store is not built here: the measured copy rate is injected through the state
file (``<state_dir>/capture-rate.json``) the way ``snapshot create`` records it, slow enough
that the test deployment's few hundred KB take longer than 2.5 s to copy.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsync import capture_budget
from memsync.demo import bulk
from tests.helpers.app import AppProcess

SLOW = capture_budget.CopyRate(
    bytes_per_s=10_000.0,
    measured_at=datetime(2026, 11, 30, tzinfo=UTC),
    source="collections",
    sample_bytes=5_000_000,
    sample_s=500.0,
)


def events(stderr: str, name: str) -> list[dict[str, Any]]:
    """The JSON log lines named ``name`` (``--log-format json``)."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == name:
                found.append(record)
    return found


def test_snapshot_create_warns_before_a_capture_estimated_near_the_busy_timeout(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    capture_budget.record_samples(deployment.paths.state, [SLOW])
    created = cli("snapshot", "create", "--json", "--log-format", "json", config=deployment.config)
    assert created.code == 0, created.err
    budget = created.json()["capture_budget"]
    near = {Path(item["path"]).name: item for item in budget["near_timeout"]}
    assert sorted(near) == ["history.db", "storage.sqlite"]
    assert all(item["fix"] == "memsync tune --wal" for item in near.values())
    assert all(item["estimated_hold_s"] > 2.5 for item in near.values())
    assert budget["rate"]["bytes_per_s"] == 10_000.0 and budget["agent"] is False
    logged = events(created.err, "capture_near_busy_timeout")
    assert {Path(record["path"]).name for record in logged} == set(near)
    assert {record["level"] for record in logged} == {"warning"}
    text = cli("snapshot", "create", config=deployment.config).out
    assert text.count("memsync tune --wal") == 2


def test_snapshot_create_does_not_warn_for_wal_files(deployment: Any, cli: Any) -> None:
    deployment.close()
    capture_budget.record_samples(deployment.paths.state, [SLOW])
    assert cli("tune", "--wal", config=deployment.config).code == 0
    created = cli("snapshot", "create", "--json", "--log-format", "json", config=deployment.config)
    assert created.code == 0, created.err
    budget = created.json()["capture_budget"]
    assert budget["near_timeout"] == []
    assert {item["journal_mode"] for item in budget["files"]} == {"wal"}
    assert events(created.err, "capture_near_busy_timeout") == []


def test_snapshot_create_does_not_warn_when_the_agent_pauses_the_app(
    deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment.close()
    capture_budget.record_samples(deployment.paths.state, [SLOW])
    with AppProcess(deployment.paths.root, agent=tmp_path / "run" / "memsync-agent.sock") as app:
        created = cli("snapshot", "create", "--json", config=deployment.config)
        app.stop()
    assert created.code == 0, created.err
    report = created.json()
    assert report["quiesced"] is True
    assert report["capture_budget"]["agent"] is True
    assert report["capture_budget"]["near_timeout"] == []


def test_snapshot_create_dry_run_reports_the_budget(deployment: Any, cli: Any) -> None:
    deployment.close()
    capture_budget.record_samples(deployment.paths.state, [SLOW])
    planned = cli("snapshot", "create", "--dry-run", "--json", config=deployment.config)
    assert planned.code == 0, planned.err
    assert len(planned.json()["capture_budget"]["near_timeout"]) == 2
    assert (
        "memsync tune --wal" in cli("snapshot", "create", "--dry-run", config=deployment.config).out
    )


def test_doctor_recommends_wal_when_a_capture_would_come_close_to_the_timeout(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    capture_budget.record_samples(deployment.paths.state, [SLOW])
    report = cli("doctor", "--json", config=deployment.config).json()
    recommended = [r for r in report["results"] if r["code"] == "wal-recommended"]
    assert sorted(Path(r["path"]).name for r in recommended) == ["history.db", "storage.sqlite"]
    assert {r["status"] for r in recommended} == {"warning"}
    assert all(r["fix"].startswith("memsync tune --wal") for r in recommended)
    journal = [r for r in report["results"] if r["code"] == "journal-mode"]
    assert {r["message"].split(" (")[0] for r in journal} == {"rollback journal"}


def test_doctor_reports_wal_and_the_sqlite_wal_bug_after_tune(deployment: Any, cli: Any) -> None:
    deployment.close()
    capture_budget.record_samples(deployment.paths.state, [SLOW])
    assert cli("tune", "--wal", config=deployment.config).code == 0
    report = cli("doctor", "--json", config=deployment.config).json()
    by_code: dict[str, list[dict[str, Any]]] = {}
    for result in report["results"]:
        by_code.setdefault(result["code"], []).append(result)
    assert [(r["status"], r["path"]) for r in by_code["wal-recommended"]] == [("ok", None)]
    assert {r["message"] for r in by_code["journal-mode"]} == {"WAL"}
    [version] = by_code["sqlite-version"]
    library = tuple(int(part) for part in version["message"].split()[2].split("."))
    if library < (3, 51, 3):  # this machine's Python links SQLite 3.40.1
        assert version["status"] == "warning" and "3.7.0 to 3.51.2" in version["message"]


def test_snapshot_create_records_the_copy_rate_it_measured(tmp_path: Path, cli: Any) -> None:
    config = bulk.generate(tmp_path / "big", 2000)  # an 8 MB storage.sqlite: a real sample
    with config.open("a", encoding="utf-8") as handle:
        handle.write(f'\n[snapshot]\ndirectory = "{tmp_path / "snapshots"}"\n')
    created = cli("snapshot", "create", "--json", config=config)
    assert created.code == 0, created.err
    assert created.json()["capture_budget"]["rate"]["source"] == "default"
    samples = capture_budget.load_samples(tmp_path / "big" / "state")
    assert [s.source for s in samples] == ["collections"]
    assert samples[0].sample_bytes >= capture_budget.MIN_SAMPLE_BYTES and samples[0].bytes_per_s > 0
    again = cli("snapshot", "create", "--json", config=config).json()["capture_budget"]["rate"]
    assert again["source"] == "collections"


def test_a_wal_capture_records_no_copy_rate(tmp_path: Path, cli: Any) -> None:
    """WAL files are read from snapshots pinned together: their times are not a copy rate."""
    config = bulk.generate(tmp_path / "big", 2000)
    with config.open("a", encoding="utf-8") as handle:
        handle.write(f'\n[snapshot]\ndirectory = "{tmp_path / "snapshots"}"\n')
    assert cli("tune", "--wal", "--json", config=config).code == 0
    created = cli("snapshot", "create", "--json", config=config)
    assert created.code == 0, created.err
    assert capture_budget.load_samples(tmp_path / "big" / "state") == []
