"""The one judgement of the daemon's jobs that ``status``, ``doctor`` and the textfile share. Pure.

``status`` exits 3 exactly when ``judge_jobs(...).problems`` is not empty, and ``doctor``
reports each of those problems as an error (``daemon-job``): one function, so the two cannot
disagree. The queue's figures (``QueueFigures``) are values read by the caller
(``memsync.daemon.runner.read_queue``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from memsync.config import Config
from memsync.errors import ExitCode
from memsync.jobs.outcome import default_next_step, is_failing
from memsync.jobs.schedule import JOB_NAMES, latest_slot, parse
from memsync.utc import iso

OVERDUE_GRACE_MIN = timedelta(minutes=5)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueFigures:
    """The queue of writes waiting for a route (``<state_dir>/pending.json``) in figures.

    ``count`` is None when the queue file cannot be read (``error`` says why); ages are seconds,
    ``oldest_age_s`` None for an empty queue; ``kinds`` counts requests by kind.
    """

    count: int | None
    oldest_age_s: float | None = None
    oldest_requested_at: str | None = None
    kinds: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        """``{"count", "oldest_age_s", "oldest_requested_at", "kinds", "error"}``."""
        return {
            "count": self.count,
            "oldest_age_s": None if self.oldest_age_s is None else round(self.oldest_age_s, 1),
            "oldest_requested_at": self.oldest_requested_at,
            "kinds": dict(self.kinds),
            "error": self.error,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class JobsVerdict:
    """Every job's row (see ``job_row``) and the judgement on them."""

    rows: tuple[dict[str, Any], ...]

    @property
    def problems(self) -> tuple[dict[str, Any], ...]:
        """The rows of jobs overdue or failing, in row order."""
        return tuple(row for row in self.rows if row["overdue"] or row["failing"])

    @property
    def exit_code(self) -> int:
        """3 (PROBLEMS_FOUND) when a job is overdue or failing, else 0: ``status``'s exit."""
        return int(ExitCode.PROBLEMS_FOUND if self.problems else ExitCode.OK)


def judge_jobs(config: Config, state: Mapping[str, Any], now: datetime) -> JobsVerdict:
    """Judge every job the config schedules, and every other job with a recorded run. Pure.

    ``state`` is the document ``load_state`` returns (every record a mapping).

    Rows are in ``JOB_NAMES`` order. A job is overdue when it is scheduled and its latest slot
    passed (by half a period, at least 5 minutes) without a success since, or it never
    succeeded; failing when its last run did not do its work (``outcome.is_failing``). A job
    with a record but no schedule (run by hand, by a timer, or ``apply-pending``) is never
    overdue but can be failing.
    """
    recorded = state.get("jobs") or {}
    names = [n for n in JOB_NAMES if n in config.daemon.jobs or n in recorded]
    zone = ZoneInfo(config.daemon.timezone)
    return JobsVerdict(
        rows=tuple(
            job_row(config, n, recorded.get(n) or {}, now, zone, parse(state.get("started_at")))
            for n in names
        )
    )


def job_row(
    config: Config,
    name: str,
    record: Mapping[str, Any],
    now: datetime,
    zone: ZoneInfo,
    daemon_started: datetime | None = None,
) -> dict[str, Any]:
    """One job's row for ``status --json`` (docs/reference/json-output.md). Pure.

    A job that never succeeded is overdue once the daemon has run (``daemon_started``, its
    last start) past the grace; before the daemon's first start it is ``not_run_yet``.
    """
    when = config.daemon.jobs.get(name)
    last = parse(record.get("last_success_at"))
    slot = latest_slot(when, now, zone, last) if when else None
    period = (when.every if when else None) or timedelta(days=1)
    grace = max(period * 0.5, OVERDUE_GRACE_MIN)
    not_run_yet = when is not None and not record and daemon_started is None
    overdue = when is not None and (
        (
            last is None
            and not not_run_yet
            and (daemon_started is None or daemon_started < now - grace)
        )
        or (last is not None and slot is not None and slot < now - grace and last < slot)
    )
    failing = is_failing(record)
    reason, next_step = record.get("reason"), record.get("next_step")
    if overdue and not failing:
        reason = (
            "it never succeeded"
            if last is None
            else f"no success since its slot at {iso(slot) if slot else '?'}"
        )
        next_step = (
            f"memsync job {name}; is the daemon running? (memsync status, systemctl status memsync)"
        )
    elif not_run_yet:
        reason = "not run yet: the memsync daemon has not started"
        next_step = "systemctl enable --now memsync (or memsync job " + name + " by hand)"
    elif not failing:
        reason = next_step = None
    elif not reason:  # a record of an older memsync: no reason kept
        outcome, code = record.get("last_outcome"), record.get("last_exit")
        reason = f"its last run ended {outcome}" + (f" (exit {code})" if code is not None else "")
    if failing and not next_step:
        next_step = default_next_step(name, record.get("last_outcome"))
    next_at = None
    if slot is not None:
        next_at = iso(slot + period) if last and last >= slot else iso(slot)
    return {
        "job": name,
        "scheduled": when is not None,
        "last_success_at": record.get("last_success_at"),
        "last_run_at": record.get("last_run_at"),
        "last_outcome": record.get("last_outcome"),
        "last_exit": record.get("last_exit"),
        "last_trigger": record.get("last_trigger"),
        "last_skipped_at": record.get("last_skipped_at"),
        "consecutive_failures": int(record.get("consecutive_failures") or 0),
        "next_run_at": next_at,
        "overdue": overdue,
        "failing": failing,
        "not_run_yet": not_run_yet,
        "reason": reason,
        "next_step": next_step,
        "pending_id": record.get("pending_id"),
        "summary": record.get("summary") if isinstance(record.get("summary"), dict) else None,
    }
