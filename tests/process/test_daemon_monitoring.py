"""Monitoring tells the truth: a job that cannot run is failing, with its reason, everywhere.

The daemon and ``memsync job`` as real processes, a real process holding the embedded store (as
the app does), the real queue file, the real textfile, and ``status`` and ``doctor`` judging the
same state.
"""

from __future__ import annotations

import json
import os
import re
import stat
from datetime import UTC, datetime, timedelta

import pytest

from memsync.routes import queue as pending
from tests.helpers.holders import app_holding
from tests.process.test_daemon import Notify, start, state, stop, with_daemon


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def row(status: dict, name: str) -> dict:
    return next(r for r in status["jobs"] if r["job"] == name)


def gauge(text: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert found, f"{series} not in the textfile:\n{text}"
    return float(found.group(1))


def test_a_prune_the_app_blocks_is_failing_until_a_run_by_hand_succeeds(deployment, cli, tmp_path):
    deployment.close()
    textfile = tmp_path / "memsync.prom"
    with_daemon(deployment, f'prune_every = "2s"\ntextfile_path = "{textfile}"\n')
    with app_holding(deployment.paths.qdrant) as app:
        process = start(deployment.config, Notify(tmp_path))
        try:
            finished = process.wait_event("job_finished")[0]
            assert finished["job"] == "prune" and finished["outcome"] in ("locked", "queued")
            assert finished["reason"] and finished["next_step"]
            status = cli("status", "--json", config=deployment.config)
            prune = row(status.json(), "prune")
            assert status.code == 3 and prune["failing"] is True
            assert prune["last_outcome"] in ("locked", "queued") and prune["next_step"]
            if prune["last_outcome"] == "locked":  # this branch: the store's holder is named
                assert f"pid {app.pid}" in prune["reason"]
            text = textfile.read_text()
            assert gauge(text, 'memsync_job_failing{memsync_job="prune"}') == 1
            assert (
                gauge(text, 'memsync_job_last_success_timestamp_seconds{memsync_job="prune"}') == 0
            )
            assert stat.S_IMODE(textfile.stat().st_mode) == 0o644
            doctor = cli("doctor", "--json", config=deployment.config)
            results = [r for r in doctor.json()["results"] if r["code"] == "daemon-job"]
            assert doctor.code == 3
            # prune failed (queued); apply-pending too when it ran meanwhile (same queue)
            assert {r["status"] for r in results} == {"error"}
            assert any(r["message"].startswith("job prune is") for r in results)
            assert not any("None" in r["message"] for r in results)
        finally:
            assert stop(process)[0] == 0
    by_hand = cli("job", "prune", "--json", config=deployment.config)  # the app has stopped
    assert by_hand.code == 0, by_hand.err
    assert by_hand.json()["command"] == "prune"
    status = cli("status", "--json", config=deployment.config).json()
    prune = row(status, "prune")
    assert prune["last_outcome"] == "ok" and prune["last_trigger"] == "hand"
    assert prune["overdue"] is False and prune["failing"] is False and prune["reason"] is None
    text = textfile.read_text()
    assert gauge(text, 'memsync_job_failing{memsync_job="prune"}') == 0
    assert gauge(text, 'memsync_job_last_success_timestamp_seconds{memsync_job="prune"}') > 0


def test_a_run_by_hand_while_the_daemon_writes_its_state_loses_no_record(deployment, cli, tmp_path):
    deployment.close()
    with_daemon(deployment, 'check_every = "1s"\n')
    process = start(deployment.config, Notify(tmp_path))
    try:
        process.wait_event("job_finished")
        by_hand = cli("job", "prune", "--json", config=deployment.config)
        assert by_hand.code == 0, by_hand.err
        seen = len(process.wait_event("job_finished"))
        process.wait_event("job_finished", count=seen + 2)  # the daemon wrote its state since
        current = state(deployment.paths.root)
    finally:
        assert stop(process)[0] == 0
    assert current["jobs"]["prune"]["last_trigger"] == "hand"
    assert current["jobs"]["prune"]["last_outcome"] == "ok"
    assert current["jobs"]["check"]["last_outcome"] == "ok"


@pytest.mark.parametrize(("configured", "mode"), [(None, 0o644), ("0640", 0o640)])
def test_a_run_by_hand_records_the_job_and_writes_a_textfile_node_exporter_reads(
    deployment, cli, tmp_path, configured, mode
):
    deployment.close()
    textfile = tmp_path / "memsync.prom"
    schedule = (
        'check_at = "02:00"\nprune_at = "03:10"\nsnapshot_at = "03:30"\nretention_at = "04:00"\n'
    )
    extra = f'textfile_mode = "{configured}"\n' if configured else ""
    with_daemon(deployment, f'{schedule}textfile_path = "{textfile}"\n{extra}')
    previous = os.umask(0o077)  # as under UMask=0077: the mode is set whatever the umask
    try:
        result = cli("job", "check", "--json", config=deployment.config)
    finally:
        os.umask(previous)
    assert result.code == 0 and result.json()["command"] == "check"
    assert stat.S_IMODE(textfile.stat().st_mode) == mode
    text = textfile.read_text()
    for name in ("check", "prune", "snapshot", "retention"):
        assert gauge(text, f'memsync_job_failing{{memsync_job="{name}"}}') == 0
        success = gauge(text, f'memsync_job_last_success_timestamp_seconds{{memsync_job="{name}"}}')
        assert (success > 0) == (name == "check")  # 0: never succeeded, yet the series is there
    assert gauge(text, "memsync_pending_requests") == 0
    record = state(deployment.paths.root)["jobs"]["check"]
    assert record["last_trigger"] == "hand" and record["last_outcome"] == "ok"
    assert record["summary"]["points"] == result.json()["counts"]["points"] > 0
    check = row(cli("status", "--json", config=deployment.config).json(), "check")
    assert check["overdue"] is False and check["failing"] is False


def test_status_and_the_textfile_show_the_queue_and_the_age_of_its_oldest_request(
    deployment, cli, tmp_path
):
    deployment.close()
    textfile = tmp_path / "memsync.prom"
    with_daemon(deployment, f'check_at = "02:00"\ntextfile_path = "{textfile}"\n')
    now = datetime.now(UTC)
    state_dir = deployment.paths.state
    pending.add(
        state_dir, pending.new_request("forget", now - timedelta(hours=2), memory_ids=["a"])
    )
    pending.add(state_dir, pending.new_request("prune", now - timedelta(minutes=5)))
    result = cli("job", "check", config=deployment.config)
    assert result.code == 0 and result.out.startswith("job check: ok")
    text = textfile.read_text()
    assert gauge(text, "memsync_pending_requests") == 2
    assert 7200 <= gauge(text, "memsync_pending_oldest_age_seconds") < 7200 + 120
    status = cli("status", "--json", config=deployment.config).json()
    queue = status["queue"]
    assert queue["count"] == 2 and queue["kinds"] == {"forget": 1, "prune": 1}
    assert 7200 <= queue["oldest_age_s"] < 7200 + 120 and queue["error"] is None
    assert (
        "queue: 2 request(s) waiting for a route (forget 1, prune 1)"
        in cli("status", config=deployment.config).out
    )


NOW = datetime.now(UTC)
RECORDS = {
    "ok": {"last_success_at": iso(NOW), "last_outcome": "ok", "failing": False},
    "locked": {
        "last_success_at": iso(NOW),
        "last_outcome": "locked",
        "failing": True,
        "reason": "prune: the embedded Qdrant store is held by pid 1",
        "next_step": "stop that process (the app) first",
    },
    "queued": {
        "last_success_at": iso(NOW),
        "last_outcome": "queued",
        "failing": True,
        "pending_id": "0" * 32,
    },
    "memsync-0.1-skipped": {"last_success_at": iso(NOW), "last_outcome": "skipped"},
    "never-ran": {},
    "damaged-record": "not an object",
    "first-start-pending": {},
}


@pytest.mark.parametrize(
    ("case", "status_code"),
    [
        ("ok", 0),
        ("locked", 3),
        ("queued", 3),
        ("memsync-0.1-skipped", 3),
        ("never-ran", 3),
        ("damaged-record", 3),
        ("first-start-pending", 0),  # a fresh install: the daemon never started, not an error
    ],
)
def test_doctor_is_unhealthy_exactly_when_status_exits_3(deployment, cli, case, status_code):
    deployment.close()
    with_daemon(deployment, 'prune_at = "03:10"\n')
    deployment.paths.state.mkdir(parents=True, exist_ok=True)
    document: dict = {"jobs": {"prune": RECORDS[case]} if RECORDS[case] else {}}
    if case != "first-start-pending":  # the daemon ran two days ago
        document["started_at"] = iso(NOW - timedelta(days=2))
    (deployment.paths.state / "daemon-state.json").write_text(json.dumps(document))
    status = cli("status", "--json", config=deployment.config)
    doctor = cli("doctor", "--json", config=deployment.config)
    jobs = [r for r in doctor.json()["results"] if r["code"] == "daemon-job"]
    assert status.code == status_code
    assert [r["status"] for r in jobs] == (["error"] if status_code == 3 else [])
    if status_code == 3:
        assert doctor.code == 3 and jobs[0]["fix"]
        assert row(status.json(), "prune")["reason"]


def test_a_queued_job_whose_request_left_the_queue_is_no_longer_failing(deployment, cli):
    deployment.close()
    with_daemon(deployment, 'prune_at = "03:10"\ncheck_at = "02:00"\n')
    state_dir = deployment.paths.state
    waiting = pending.new_request("prune", datetime.now(UTC))
    pending.add(state_dir, waiting)
    queued = {**RECORDS["queued"], "pending_id": waiting.id}
    (state_dir / "daemon-state.json").write_text(json.dumps({"jobs": {"prune": queued}}))
    assert cli("job", "check", config=deployment.config).code == 0  # still queued: unchanged
    assert row(cli("status", "--json", config=deployment.config).json(), "prune")["failing"]
    pending.remove(state_dir, waiting.id)  # as `pending apply` does once it is applied
    assert cli("job", "check", config=deployment.config).code == 0
    status = cli("status", "--json", config=deployment.config)
    prune = row(status.json(), "prune")
    assert status.code == 0 and prune["last_outcome"] == "applied" and not prune["failing"]


def test_the_dry_run_of_a_job_names_its_command_and_records_nothing(deployment, cli):
    deployment.close()
    result = cli("job", "apply-pending", "--dry-run", "--json", config=deployment.config)
    assert result.code == 0
    assert result.json()["argv"][:3] == ["memsync", "pending", "apply"]
    assert not (deployment.paths.state / "daemon-state.json").exists()
