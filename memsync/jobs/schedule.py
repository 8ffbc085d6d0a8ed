"""What each daemon job runs and when: pure decisions on UTC times and the ``[daemon]`` schedule."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from memsync import utc
from memsync.config import Config, JobSchedule, schema

SCHEDULED_JOB_NAMES = schema.JOB_NAMES  # the jobs a `*_at`/`*_every` key schedules
APPLY_PENDING = "apply-pending"  # no schedule key: runs while the queue holds requests
JOB_NAMES = (*SCHEDULED_JOB_NAMES, APPLY_PENDING)
MAX_BACKOFF_S = 3600.0
FIRST_BACKOFF_S = 30.0
QUEUE_CHECK_S = 60.0  # the daemon looks at the queue (and refreshes the textfile) this often
MAX_QUEUE_DELAY_S = 300.0  # bounds how long after a route appears the queue waits


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A daemon job: its name, the memsync command it runs, and when (no schedule: never by time)."""

    name: str
    argv: tuple[str, ...]
    when: JobSchedule

    @property
    def interval_s(self) -> float | None:
        """The period of an ``*_every`` job in seconds; None otherwise."""
        return self.when.every.total_seconds() if self.when.every else None


def job_argv(config: Config, name: str) -> tuple[str, ...]:
    """The memsync command a job runs (``apply-pending``: ``pending apply``). Pure.

    Raises:
        KeyError: ``name`` is not one of ``JOB_NAMES``.
    """
    upload = config.daemon.upload and config.s3 is not None
    commands: dict[str, tuple[str, ...]] = {
        "check": ("check",),
        "prune": ("prune",),
        "snapshot": ("snapshot", "create", *(_upload_flags(config) if upload else ())),
        "retention": ("snapshot", "prune", "--yes"),
        "verify": ("snapshot", "verify", "--scheduled"),
        "replica": ("protect", "--verify"),
        APPLY_PENDING: ("pending", "apply"),
    }
    return commands[name]


def _upload_flags(config: Config) -> tuple[str, ...]:
    """``--upload --if-due EVERY`` for a scheduled snapshot job (``*_at``: EVERY is a day). Pure.

    A retry of a failed run then uploads the pending snapshots and captures only when due.
    """
    when = config.daemon.jobs.get("snapshot", JobSchedule())
    if when.every is None and when.at is None:
        return ("--upload",)  # not scheduled: every run is due
    every = int(when.every.total_seconds()) if when.every else 86400
    return ("--upload", "--if-due", f"{every}s")


def build_jobs(config: Config) -> list[Job]:
    """The jobs the ``[daemon]`` section schedules, in ``JOB_NAMES`` order. Pure."""
    return [
        Job(name=name, argv=job_argv(config, name), when=when)
        for name, when in config.daemon.jobs.items()
    ]


def job_named(config: Config, name: str) -> Job:
    """The job ``name`` with its schedule, or with none when ``[daemon]`` does not schedule it. Pure.

    Raises:
        KeyError: ``name`` is not one of ``JOB_NAMES``.
    """
    when = config.daemon.jobs.get(name, JobSchedule())
    return Job(name=name, argv=job_argv(config, name), when=when)


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
    ``*_at`` jobs at the latest HH:MM in ``zone`` at or before ``now``; None without a schedule.
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


def backoff_s(failures: int, interval_s: float | None) -> float:
    """Seconds before retrying a failed job: 30 s doubling to 1 h. Pure.

    For an interval job, at most a quarter of its interval, so a retry comes before its next run.
    Any count of failures is fine (the exponent is capped: no float overflow after months).
    """
    delay = min(FIRST_BACKOFF_S * 2.0 ** min(max(failures - 1, 0), 16), MAX_BACKOFF_S)
    return float(min(delay, interval_s / 4)) if interval_s else float(delay)


def queue_delay_s(failures: int) -> float:
    """Seconds between two ``apply-pending`` runs while the queue holds requests. Pure.

    Once a minute; after consecutive failures (no route yet), 60 s doubling to 5 min, so a
    queue nobody can apply does not start a process every minute for days, and a route that
    appears (the app's agent coming up) is used within 5 minutes.
    """
    return float(min(QUEUE_CHECK_S * 2.0 ** min(max(failures, 0), 16), MAX_QUEUE_DELAY_S))
