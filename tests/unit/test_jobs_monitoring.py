"""How a job's run is judged and recorded, and what monitoring sees of it (values in, values out)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memsync import config as config_module
from memsync.errors import ConfigError
from memsync.jobs import (
    QueueFigures,
    Run,
    job_argv,
    judge_jobs,
    parse_exit_error,
    queue_delay_s,
    record_run,
    render_textfile,
    settle_queued,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HELD = {
    "type": "exit_error",
    "code": 12,
    "message": "prune: the embedded Qdrant store /srv/q is held by pid 42 (python -c \nimport app)",
    "hint": "stop that process (the app) first; embedded Qdrant allows one process at a time",
}


def load(tmp_path: Path, daemon: str) -> config_module.Config:
    path = tmp_path / "memsync.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[mem0.vector_store.config]\npath = "{tmp_path / "q"}"\n[daemon]\n{daemon}'
    )
    return config_module.load(path, {"HOME": str(tmp_path)})


def run(code: int, *, output: dict | None = None, stderr: str = "", name: str = "prune") -> Run:
    return Run(
        name=name,
        started=NOW,
        duration_s=0.5,
        exit_code=code,
        output=output or {},
        stderr=stderr,
        trigger="schedule",
    )


def test_a_run_that_found_no_route_is_failing_with_the_commands_own_reason_and_hint():
    log = json.dumps({"event": "store_held", "level": "warning"})
    record = record_run(
        {}, run(12, stderr=f"{log}\n{json.dumps(HELD)}\n"), retries=True, interval_s=None
    )
    assert record["last_outcome"] == "locked" and record["failing"] is True
    assert (
        record["reason"]
        == "prune: the embedded Qdrant store /srv/q is held by pid 42 (python -c import app)"
    )
    assert record["next_step"] == HELD["hint"]
    assert record["consecutive_failures"] == 1 and record["retry_in_s"] == 30.0
    assert "last_success_at" not in record


def test_a_queued_run_is_failing_names_its_request_and_is_not_retried():
    output = {"command": "prune", "route": "queued", "pending_id": "ab" * 16}
    record = record_run({}, run(5, output=output), retries=True, interval_s=None)
    assert record["last_outcome"] == "queued" and record["failing"] is True
    assert record["pending_id"] == "ab" * 16 and "ab" * 16 in record["reason"]
    assert "apply-pending" in record["next_step"] and "retry_in_s" not in record


@pytest.mark.parametrize(
    ("code", "outcome", "failing"),
    [(0, "ok", False), (3, "problems", True), (75, "try-later", True), (1, "failed", True)],
    ids=["ok", "problems", "try-later", "bug"],
)
def test_each_outcome_after_a_failing_run(code, outcome, failing):
    before = record_run({}, run(12, stderr=json.dumps(HELD)), retries=True, interval_s=None)
    after = record_run(
        before, run(code, output={"counts": {"errors": 1}}), retries=False, interval_s=None
    )
    assert after["last_outcome"] == outcome and after["failing"] is failing
    assert ("reason" in after) is failing and "retry_in_s" not in after
    assert after["consecutive_failures"] == (0 if code in (0, 3) else 2)


def test_an_interrupted_run_leaves_a_failing_job_failing_with_its_reason():
    before = record_run({}, run(12, stderr=json.dumps(HELD)), retries=True, interval_s=None)
    after = record_run(before, run(130), retries=True, interval_s=None)
    assert after["last_outcome"] == "interrupted" and after["failing"] is True
    assert after["reason"] == before["reason"] and after["consecutive_failures"] == 1


def test_a_command_that_crashed_without_an_exit_error_line_gives_its_last_stderr_line():
    record = record_run(
        {}, run(1, stderr="Traceback ...\nKeyError: 'x'\n"), retries=False, interval_s=None
    )
    assert record["reason"] == "KeyError: 'x'" and record["next_step"]
    assert parse_exit_error('not json\n{"event": "x"}\n') is None


def test_a_queued_record_settles_once_its_request_left_the_queue():
    queued = record_run({}, run(5, output={"pending_id": "r1"}), retries=True, interval_s=None)
    jobs = {"prune": dict(queued), "forget": {"last_outcome": "queued", "pending_id": "r2"}}
    assert settle_queued(jobs, {"r2"}, NOW) == ["prune"]
    assert jobs["prune"]["last_outcome"] == "applied" and jobs["prune"]["failing"] is False
    assert (
        jobs["prune"]["last_success_at"] == "2026-11-29T12:00:00Z" and "reason" not in jobs["prune"]
    )
    assert jobs["forget"]["last_outcome"] == "queued"


def test_status_lists_configured_jobs_and_unscheduled_ones_that_ran(tmp_path):
    config = load(tmp_path, 'prune_at = "03:10"\ncheck_every = "15m"\n')
    recent = (NOW - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    started = (NOW - timedelta(days=2)).isoformat().replace("+00:00", "Z")
    state = {
        "started_at": started,  # the daemon ran: a job that never succeeded is overdue
        "jobs": {
            "check": {"last_success_at": recent, "last_outcome": "ok", "failing": False},
            "apply-pending": {"last_outcome": "locked", "failing": True, "reason": "held"},
        },
    }
    verdict = judge_jobs(config, state, NOW)
    names = [r["job"] for r in verdict.rows]
    assert names == ["check", "prune", "apply-pending"]
    by_name = {r["job"]: r for r in verdict.rows}
    assert by_name["prune"]["overdue"] and by_name["prune"]["reason"] == "it never succeeded"
    assert not by_name["apply-pending"]["overdue"] and by_name["apply-pending"]["failing"]
    assert not by_name["check"]["overdue"] and not by_name["check"]["failing"]
    assert verdict.exit_code == 3 and [r["job"] for r in verdict.problems] == [
        "prune",
        "apply-pending",
    ]


def test_before_the_daemons_first_start_a_scheduled_job_is_not_run_yet_not_overdue(tmp_path):
    config = load(tmp_path, 'prune_at = "03:10"\ncheck_every = "15m"\n')
    verdict = judge_jobs(config, {"jobs": {}}, NOW)  # a fresh install: no state at all
    assert verdict.exit_code == 0 and not verdict.problems
    for row in verdict.rows:
        assert row["not_run_yet"] and not row["overdue"], row
        assert row["reason"].startswith("not run yet") and "systemctl" in row["next_step"]
    just_started = (NOW - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    verdict = judge_jobs(config, {"started_at": just_started, "jobs": {}}, NOW)
    assert not verdict.problems  # started a minute ago: within the grace, catching up
    an_hour = (NOW - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    verdict = judge_jobs(config, {"started_at": an_hour, "jobs": {}}, NOW)
    assert {r["job"] for r in verdict.problems} == {"check"}  # past half its 15 min; prune 12 h
    days = (NOW - timedelta(days=2)).isoformat().replace("+00:00", "Z")
    verdict = judge_jobs(config, {"started_at": days, "jobs": {}}, NOW)
    assert {r["job"] for r in verdict.problems} == {"check", "prune"}


def test_the_textfile_has_every_jobs_series_and_the_queue(tmp_path):
    config = load(tmp_path, 'prune_at = "03:10"\ncheck_every = "15m"\n')
    state = {"jobs": {"prune": {"last_outcome": "locked", "failing": True, "duration_s": 0.5}}}
    queue = QueueFigures(count=3, oldest_age_s=7200.04, kinds={"forget": 3})
    text = render_textfile(judge_jobs(config, state, NOW), state, queue)
    samples = dict(re.findall(r"^(memsync_\S+) (\S+)$", text, re.MULTILINE))
    assert samples['memsync_job_last_success_timestamp_seconds{memsync_job="check"}'] == "0"
    assert samples['memsync_job_last_success_timestamp_seconds{memsync_job="prune"}'] == "0"
    assert samples['memsync_job_failing{memsync_job="prune"}'] == "1"
    assert samples['memsync_job_failing{memsync_job="check"}'] == "0"
    assert samples["memsync_pending_requests"] == "3"
    assert samples["memsync_pending_oldest_age_seconds"] == "7200"
    unreadable = render_textfile(judge_jobs(config, state, NOW), state, QueueFigures(count=None))
    assert "memsync_pending_requests" not in unreadable


def test_apply_pending_runs_pending_apply_at_most_once_a_minute(tmp_path):
    assert job_argv(load(tmp_path, ""), "apply-pending") == ("pending", "apply")
    assert [queue_delay_s(n) for n in (0, 1, 2, 10, 10_000)] == [60.0, 120.0, 240.0, 300.0, 300.0]


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("0644", True),
        ("640", True),
        ("0600", True),
        ("0666", False),
        ("644o", False),
        ("0044", False),
    ],
)
def test_textfile_mode_is_an_octal_mode_nobody_else_can_write(tmp_path, value, accepted):
    text = f'textfile_mode = "{value}"\n'
    if accepted:
        assert load(tmp_path, text).daemon.textfile_permissions == int(value, 8)
    else:
        with pytest.raises(ConfigError, match="daemon.textfile_mode"):
            load(tmp_path, text)
