"""The daemon's jobs and their state, shared by the daemon, ``status`` and ``doctor``.

Reads only: the state document is written by the daemon alone (``memsync.daemon``).
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from memsync.config import Config, JobSchedule

STATE_FILE = "daemon-state.json"
LOCK_FILE = "daemon.lock"


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A scheduled job: its name, the memsync command it runs, and when."""

    name: str
    argv: tuple[str, ...]
    when: JobSchedule


JOB_NAMES = ("check", "prune", "snapshot", "retention")


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
    return [Job(name=name, argv=job_argv(config, name), when=when) for name, when in config.daemon.jobs.items()]


def latest_slot(when: JobSchedule, now: datetime, zone: ZoneInfo, last_success: datetime | None) -> datetime | None:
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
    """Parse a state timestamp; None when absent or malformed."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def iso(moment: datetime) -> str:
    """UTC ISO 8601 with a ``Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
    """The pid of the daemon holding ``daemon.lock``, or None (probes without blocking)."""
    path = config.state_dir / LOCK_FILE
    if not path.is_file():
        return None
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read().split()
            return int(text[1]) if len(text) > 1 and text[1].isdigit() else -1
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


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
        overdue = last is None or (slot is not None and slot < now - max(period * 0.5, timedelta(minutes=5))
                                   and last < slot)
        failing = record.get("last_outcome") in ("failed", "problems")
        rows.append({"job": job.name, "last_success_at": record.get("last_success_at"),
                     "last_run_at": record.get("last_run_at"), "last_outcome": record.get("last_outcome"),
                     "last_skipped_at": record.get("last_skipped_at"),
                     "next_run_at": iso(slot + (job.when.every or timedelta(days=1))) if slot and last and
                     last >= slot else (iso(slot) if slot else None),
                     "overdue": overdue, "failing": failing})
    return rows
