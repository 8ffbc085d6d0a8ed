"""The daemon's jobs and their state, shared by the daemon, ``status`` and ``doctor``.

Reads only: the state document is written by the daemon alone (``memsync.daemon``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from memsync import flock, utc
from memsync.config import Config, JobSchedule, schema
from memsync.errors import ExitCode
from memsync.utc import iso

STATE_FILE = "daemon-state.json"
LOCK_FILE = "daemon.lock"
JOB_NAMES = schema.JOB_NAMES


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A scheduled job: its name, the memsync command it runs, and when."""

    name: str
    argv: tuple[str, ...]
    when: JobSchedule


def job_argv(config: Config, name: str) -> tuple[str, ...]:
    """The memsync command a job runs. Pure."""
    upload = config.daemon.upload and config.s3 is not None
    commands: dict[str, tuple[str, ...]] = {
        "check": ("check",),
        "prune": ("prune",),
        "snapshot": ("snapshot", "create", *(("--upload",) if upload else ())),
        "retention": ("snapshot", "prune", "--yes"),
    }
    return commands[name]


def build_jobs(config: Config) -> list[Job]:
    """The jobs the ``[daemon]`` section schedules, in a fixed order. Pure."""
    return [
        Job(name=name, argv=job_argv(config, name), when=when)
        for name, when in config.daemon.jobs.items()
    ]


def next_run(when: JobSchedule, after: datetime, zone: ZoneInfo) -> datetime | None:
    """When a job runs next, strictly after ``after`` (UTC); None when it has no schedule. Pure.

    ``*_every``: ``after + every``, and the daemon passes the end of the previous run, so the
    interval counts from when a run finished. ``*_at``: HH:MM in ``zone`` on the first local
    calendar day whose slot is after ``after``: once per local day, DST days included. A time
    the spring change skips (02:30 in Europe/Berlin on its last March Sunday) runs at the UTC
    offset before the change (03:30 local); a time the autumn change repeats runs at its first
    occurrence (zoneinfo's ``fold=0``). schedule 1.2.2's ``every().day.at(..., zone)`` ran such
    a job twice the day after the spring change, which is why the daemon does not use it.
    """
    if when.every is not None:
        return after + when.every
    if when.at is None:
        return None
    day = after.astimezone(zone).date()
    for offset in range(3):
        slot = datetime.combine(day + timedelta(days=offset), when.at, tzinfo=zone).astimezone(UTC)
        if slot > after:
            return slot
    raise AssertionError("unreachable: a later local day always has a later slot")


def latest_slot(
    when: JobSchedule, now: datetime, zone: ZoneInfo, last_success: datetime | None
) -> datetime | None:
    """The most recent time ``when`` asked the job to run, at or before ``now`` (UTC). Pure.

    ``*_every`` jobs are due one interval after their last success (or now, never run);
    ``*_at`` jobs at the latest HH:MM in ``zone`` at or before ``now``.
    """
    if when.every is not None:
        return now if last_success is None else last_success + when.every
    if when.at is not None:
        local = now.astimezone(zone)
        slot = local.replace(hour=when.at.hour, minute=when.at.minute, second=0, microsecond=0)
        if slot > local:
            slot -= timedelta(days=1)
        return slot.astimezone(UTC)
    return None


def parse(value: object) -> datetime | None:
    """Parse a state timestamp (``utc.parse``); None when absent or malformed. Pure."""
    if not isinstance(value, str):
        return None
    try:
        return utc.parse(value)
    except ValueError:
        return None


def state_path(config: Config) -> Path:
    """Where the daemon keeps its state."""
    return config.state_dir / STATE_FILE


def load_state(config: Config) -> dict[str, Any]:
    """The daemon's state document (empty when there is none). Reads only."""
    try:
        document = json.loads(state_path(config).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"jobs": {}}
    return document if isinstance(document, dict) else {"jobs": {}}


def daemon_pid(config: Config) -> int | None:
    """The pid of the daemon holding ``daemon.lock`` (-1 when it wrote none), or None.

    Probes without blocking; writes nothing.
    """
    note = flock.holder(config.state_dir / LOCK_FILE)
    if note is None:
        return None
    pid = flock.holder_pid(note)
    return -1 if pid is None else pid


def job_health(config: Config, state: Mapping[str, Any], now: datetime) -> list[dict[str, Any]]:
    """Per configured job: last success, outcome, next expected run, overdue and failing. Pure.

    A job is overdue when its latest slot passed (by half a period, at least 5 minutes) without
    a success since; failing when its last run failed or found problems.
    """
    zone = ZoneInfo(config.daemon.timezone)
    rows = []
    for job in build_jobs(config):
        record = state.get("jobs", {}).get(job.name, {})
        last = parse(record.get("last_success_at"))
        period = job.when.every or timedelta(days=1)
        slot = latest_slot(job.when, now, zone, last)
        overdue = last is None or (
            slot is not None
            and slot < now - max(period * 0.5, timedelta(minutes=5))
            and last < slot
        )
        failing = record.get("last_outcome") in ("failed", "problems")
        rows.append(
            {
                "job": job.name,
                "last_success_at": record.get("last_success_at"),
                "last_run_at": record.get("last_run_at"),
                "last_outcome": record.get("last_outcome"),
                "last_skipped_at": record.get("last_skipped_at"),
                "next_run_at": iso(slot + (job.when.every or timedelta(days=1)))
                if slot and last and last >= slot
                else (iso(slot) if slot else None),
                "overdue": overdue,
                "failing": failing,
            }
        )
    return rows


def summarize(job: str, output: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures of a job's JSON output worth keeping (counts, snapshot id and size). Pure."""
    if job == "check":
        counts = output.get("counts") or {}
        by_code: dict[str, int] = {}
        for finding in output.get("findings") or []:
            by_code[str(finding.get("code"))] = by_code.get(str(finding.get("code")), 0) + 1
        return {
            "errors": counts.get("errors", 0),
            "warnings": counts.get("warnings", 0),
            "points": counts.get("points", 0),
            "findings_by_code": by_code,
        }
    if job == "prune":
        return {"deleted": len(output.get("deleted") or [])}
    if job == "snapshot":
        near = (output.get("capture_budget") or {}).get("near_timeout") or []
        return {
            "snapshot_id": output.get("id"),
            "size_bytes": output.get("size_bytes", 0),
            "capture_near_timeout": len(near),  # files whose capture read nears the busy timeout
        }
    if job == "retention":
        return {"removed": len(output.get("removed") or [])}
    return {}


def render_textfile(state: Mapping[str, Any]) -> str:
    """Prometheus text format of the daemon state. Pure."""
    lines = [
        "# HELP memsync_job_last_success_timestamp_seconds Last successful run of a memsync job (UTC).",
        "# TYPE memsync_job_last_success_timestamp_seconds gauge",
    ]
    jobs = state.get("jobs", {})
    for name, record in sorted(jobs.items()):
        success = parse(record.get("last_success_at"))
        if success is not None:
            lines.append(
                f'memsync_job_last_success_timestamp_seconds{{job="{name}"}} {success.timestamp():.0f}'
            )
    lines += [
        "# HELP memsync_job_duration_seconds Duration of the last run of a memsync job.",
        "# TYPE memsync_job_duration_seconds gauge",
    ]
    lines += [
        f'memsync_job_duration_seconds{{job="{n}"}} {r.get("duration_s", 0)}'
        for n, r in sorted(jobs.items())
    ]
    lines += [
        "# HELP memsync_job_failing 1 when the last run of a job failed or found problems.",
        "# TYPE memsync_job_failing gauge",
    ]
    lines += [
        f'memsync_job_failing{{job="{n}"}} {int(r.get("last_outcome") in ("failed", "problems"))}'
        for n, r in sorted(jobs.items())
    ]
    summary = jobs.get("check", {}).get("summary", {})
    lines += [
        "# HELP memsync_findings Findings of the last check, by code.",
        "# TYPE memsync_findings gauge",
    ]
    lines += [
        f'memsync_findings{{code="{code}"}} {count}'
        for code, count in sorted(summary.get("findings_by_code", {}).items())
    ]
    size = jobs.get("snapshot", {}).get("summary", {}).get("size_bytes")
    if size is not None:
        lines += [
            "# HELP memsync_snapshot_size_bytes Size of the last snapshot.",
            "# TYPE memsync_snapshot_size_bytes gauge",
            f"memsync_snapshot_size_bytes {size}",
        ]
    return "\n".join(lines) + "\n"


MAX_BACKOFF_S = 3600.0
FIRST_BACKOFF_S = 30.0


def plan_catch_up(
    jobs: list[Job], state: Mapping[str, Mapping[str, Any]], now: datetime, zone: ZoneInfo
) -> list[str]:
    """Jobs to run once at start: their last success predates their latest scheduled time. Pure.

    A job already done for its slot is not rerun; one that missed its slot (the daemon was
    down) is.
    """
    due = []
    for job in jobs:
        last = parse(state.get(job.name, {}).get("last_success_at"))
        slot = latest_slot(job.when, now, zone, last)
        if slot is not None and slot <= now and (last is None or last < slot):
            due.append(job.name)
    return due


def classify(exit_code: int) -> str:
    """A job's outcome from its command's exit status. Pure.

    0 ok; 3 problems (the command ran and found errors); 12 and 75 skipped (the app holds the
    store, or a temporary condition); anything else failed.
    """
    if exit_code == ExitCode.OK:
        return "ok"
    if exit_code == ExitCode.PROBLEMS_FOUND:
        return "problems"
    if exit_code in (ExitCode.LOCKED, ExitCode.TRY_LATER):
        return "skipped"
    if exit_code == ExitCode.INTERRUPTED:
        return "interrupted"  # stopped by the daemon's own SIGTERM: not a failure
    return "failed"


def backoff_s(failures: int, interval_s: float | None) -> float:
    """Seconds before retrying a failed job: 30 s doubling to 1 h. Pure.

    For an interval job, at most a quarter of its interval, so a retry comes before its next run.
    """
    delay = min(FIRST_BACKOFF_S * 2.0 ** max(failures - 1, 0), MAX_BACKOFF_S)
    return float(min(delay, interval_s / 4)) if interval_s else float(delay)
