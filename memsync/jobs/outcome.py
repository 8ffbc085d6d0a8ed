"""How one run of a job is judged and recorded: its outcome, the reason, the next step. Pure.

The run is whatever a job's command did in its child process: its exit status, its ``--json``
report (stdout) and its ``exit_error`` line (stderr). Outcomes, by exit status:

| exit | outcome | success (scheduling) | failing (monitoring) | the daemon retries |
|---|---|---|---|---|
| 0 | ``ok`` | yes | no | — |
| 3 | ``problems`` | yes | yes | — |
| 5 | ``queued`` | no | yes | no: ``apply-pending`` applies the queue |
| 12 | ``locked`` | no | yes | yes (backoff) |
| 75 | ``try-later`` | no | yes | yes (backoff) |
| 130 | ``interrupted`` | no | unchanged | no |
| other | ``failed`` | no | yes | yes (backoff) |

A ``queued`` record whose request has left the queue becomes ``applied`` (``settle_queued``):
the work was done, by ``apply-pending``, the agent or a window. memsync 0.1 recorded exits 12
and 75 as ``skipped`` and never as failing; such records read as failing now.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsync.errors import EXIT_CODE_TABLE, ExitCode
from memsync.jobs.schedule import backoff_s
from memsync.utc import iso

_BY_EXIT: dict[int, str] = {
    ExitCode.OK: "ok",
    ExitCode.PROBLEMS_FOUND: "problems",
    ExitCode.QUEUED: "queued",
    ExitCode.LOCKED: "locked",
    ExitCode.TRY_LATER: "try-later",
    ExitCode.INTERRUPTED: "interrupted",
}
FAILURES = ("failed", "locked", "queued", "try-later")
RETRIED = ("failed", "locked", "try-later")
LEGACY_FAILING = ("failed", "problems", "skipped")  # records written before `failing` was kept
_PER_RUN = ("reason", "next_step", "pending_id", "retry_in_s")
QUEUED_STEP = (
    "memsync pending list; the queue is applied by `memsync job apply-pending` (the daemon "
    "runs it while the queue holds requests; an app unit can run it as ExecStartPre=), by the "
    "app's agent, or in a maintenance window ([app] stop_command and start_command)"
)
LOCKED_STEP = "memsync status; free what holds the store, or let the request be queued"
PROBLEM_STEPS = {
    "check": "memsync check (lists the findings), then memsync reconcile --dry-run",
    "snapshot": "memsync snapshot verify",
    "verify": "memsync snapshot verify --scheduled (its report names each damaged file); "
    "memsync snapshot list shows which snapshots still verify",
    "replica": "memsync protect --verify (lists the restored pair's findings); memsync protect "
    "--status",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One finished run of a job's command, as its parent saw it.

    ``output`` is the command's ``--json`` report (``{}`` when it printed none); ``stderr`` its
    whole standard error (log lines, then its ``exit_error`` line when it failed).
    """

    name: str
    started: datetime
    duration_s: float
    exit_code: int
    output: Mapping[str, Any]
    stderr: str
    trigger: str  # schedule, catch-up, retry, queue, hand

    @property
    def outcome(self) -> str:
        """The run's outcome (``classify``)."""
        return classify(self.exit_code)


def classify(exit_code: int) -> str:
    """A run's outcome from its command's exit status (the table in this module's docstring). Pure."""
    return _BY_EXIT.get(exit_code, "failed")


def is_failing(record: Mapping[str, Any]) -> bool:
    """Whether a job's record says it is failing (for ``status``, ``doctor`` and the textfile). Pure."""
    failing = record.get("failing")
    if isinstance(failing, bool):
        return failing
    return record.get("last_outcome") in LEGACY_FAILING


def parse_exit_error(stderr: str) -> dict[str, Any] | None:
    """The last ``{"type": "exit_error", ...}`` line of a command's stderr, or None. Pure."""
    for line in reversed(stderr.splitlines()):
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if isinstance(document, dict) and document.get("type") == "exit_error":
            return document
    return None


def explain(run: Run) -> tuple[str | None, str | None]:
    """Why a run did not simply succeed, and what to do next: ``(reason, next_step)``. Pure.

    From the command's own words where it gave them: its ``exit_error`` message and hint, or for
    ``queued`` its report's ``pending_id`` (and ``hint``). None, None for ``ok``.
    """
    outcome = run.outcome
    if outcome == "ok":
        return None, None
    if outcome == "interrupted":
        return "interrupted (SIGTERM or SIGINT) before it finished", None
    if outcome == "problems":
        errors = (run.output.get("counts") or {}).get("errors")
        found = f"{errors} error-severity problem(s)" if isinstance(errors, int) else "problems"
        step = PROBLEM_STEPS.get(run.name, f"memsync job {run.name} --json (its report lists them)")
        return f"{run.name} ran and found {found}", step
    if outcome == "queued":
        pending_id = run.output.get("pending_id")
        reason = "no route to write now (the app holds the store, no agent answers, no window)"
        hint = run.output.get("hint")
        queued = (
            f"the request is queued as {pending_id}"
            if pending_id
            else "the queued requests wait for one"
        )
        return (
            f"{reason}: {queued}",
            hint if isinstance(hint, str) and hint else QUEUED_STEP,
        )
    error = parse_exit_error(run.stderr) or {}
    message, hint = error.get("message"), error.get("hint")
    if not isinstance(message, str) or not message:
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        meaning = dict(EXIT_CODE_TABLE).get(run.exit_code, "unknown exit status: a failure")
        message = lines[-1][:500] if lines else f"exit {run.exit_code}: {meaning}"
    if not isinstance(hint, str) or not hint:
        hint = LOCKED_STEP if outcome == "locked" else f"memsync job {run.name} --log-level debug"
    return " ".join(message.split()), " ".join(hint.split())  # one line each


def default_next_step(name: str, outcome: str | None) -> str:
    """The next step for a failing job whose record names none (records of older memsyncs). Pure."""
    if outcome == "queued":
        return QUEUED_STEP
    if outcome == "problems":
        return PROBLEM_STEPS.get(name, f"memsync job {name} --json (its report lists them)")
    return f"memsync job {name} (its error says what to do); journalctl -u memsync"


def summarize(job: str, output: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures of a job's JSON report worth keeping (counts, snapshot id and size). Pure.

    A snapshot job also keeps ``tripwire_tripped`` (bool), ``tripwire_pinned`` (the snapshot
    the tripwire pinned, or None), ``tripwire_deleted`` and ``tripwire_vanished`` (memories of
    the previous snapshot gone with a DELETE history event and without one, or None) when its
    report has a ``tripwire`` object.

    Every job also keeps ``route`` and ``downtime_s`` (a maintenance window's app downtime,
    seconds) when its report has them.
    """
    kept: dict[str, Any] = {
        key: output[key]
        for key in ("route", "downtime_s")
        if isinstance(output.get(key), int | float | str)
    }
    if job == "check":
        counts = output.get("counts") or {}
        by_code: dict[str, int] = {}
        for finding in output.get("findings") or []:
            by_code[str(finding.get("code"))] = by_code.get(str(finding.get("code")), 0) + 1
        kept |= {
            "errors": counts.get("errors", 0),
            "warnings": counts.get("warnings", 0),
            "points": counts.get("points", 0),
            "findings_by_code": by_code,
        }
    elif job == "prune":
        kept["deleted"] = len(output.get("deleted") or [])
    elif job == "snapshot":
        near = (output.get("capture_budget") or {}).get("near_timeout") or []
        kept |= {
            "snapshot_id": output.get("id"),
            "size_bytes": output.get("size_bytes", 0),
            "capture_near_timeout": len(near),  # files whose capture read nears the busy timeout
        }
        tripwire = output.get("tripwire")
        if isinstance(tripwire, dict):  # the mass-deletion tripwire (memsync.snapshot.guard)
            kept["tripwire_tripped"] = tripwire.get("tripped") is True
            kept["tripwire_pinned"] = tripwire.get("pinned")
            kept["tripwire_deleted"] = tripwire.get("deleted_memories")
            kept["tripwire_vanished"] = tripwire.get("vanished_memories")
    elif job == "retention":
        kept["removed"] = len(output.get("removed") or [])
    elif job == "verify":
        kept |= _verify_figures(output)
    return kept


def _verify_figures(output: Mapping[str, Any]) -> dict[str, Any]:
    """The verify job's figures: bytes read, error findings, last clean run, cycle coverage."""
    coverage = output.get("coverage")
    return {
        "bytes_read": output.get("bytes_read", 0),
        "problems": (output.get("counts") or {}).get("errors", 0),
        "last_ok_at": output.get("last_ok_at"),
        "coverage": {
            str(side): value
            for side, value in (coverage.items() if isinstance(coverage, dict) else ())
            if isinstance(value, int | float)
        },
    }


def record_run(
    record: Mapping[str, Any], run: Run, *, retries: bool, interval_s: float | None
) -> dict[str, Any]:
    """A job's state record after ``run``, from the one before. Pure.

    Keys: ``last_run_at``, ``last_outcome``, ``last_exit``, ``duration_s`` (seconds),
    ``last_trigger``, ``failing`` (bool), ``consecutive_failures``, ``last_success_at`` and
    ``summary`` (set by ``ok`` and ``problems``), ``reason`` and ``next_step`` (absent after
    ``ok``), ``pending_id`` (``queued``), ``retry_in_s`` (when ``retries`` and the outcome is
    retried: the daemon's backoff, seconds).

    Args:
        record: the job's record before the run (``{}`` for none).
        run: what happened.
        retries: the caller retries failed runs (the daemon does; a run by hand does not).
        interval_s: the job's period for an ``*_every`` job (caps the backoff), else None.
    """
    outcome = run.outcome
    kept = {k: v for k, v in record.items() if k not in _PER_RUN or outcome == "interrupted"}
    kept.pop("retry_in_s", None)
    kept |= {
        "last_run_at": iso(run.started),
        "last_outcome": outcome,
        "last_exit": run.exit_code,
        "duration_s": round(run.duration_s, 3),
        "last_trigger": run.trigger,
    }
    if outcome in ("ok", "problems"):
        kept |= {
            "last_success_at": iso(run.started),
            "consecutive_failures": 0,
            "summary": summarize(run.name, run.output),
            "failing": outcome == "problems",
        }
    elif outcome == "interrupted":
        kept["failing"] = is_failing(record)
        return kept
    else:
        failures = int(record.get("consecutive_failures") or 0) + 1
        kept |= {"consecutive_failures": failures, "failing": True}
        if retries and outcome in RETRIED:
            kept["retry_in_s"] = backoff_s(failures, interval_s)
    if outcome == "queued" and isinstance(run.output.get("pending_id"), str):
        kept["pending_id"] = run.output["pending_id"]
    reason, next_step = explain(run)
    kept |= {k: v for k, v in (("reason", reason), ("next_step", next_step)) if v}
    return kept


def settle_queued(
    jobs: MutableMapping[str, dict[str, Any]], queued_ids: Collection[str], now: datetime
) -> list[str]:
    """Mark ``applied`` each ``queued`` record whose request has left the queue. Changes ``jobs``.

    The request was applied (by ``apply-pending``, the agent or a window), so the job's work is
    done: ``last_success_at`` becomes ``now`` (UTC), ``failing`` False. Returns the job names
    settled, in ``jobs`` order. Pure but for changing ``jobs`` in place.
    """
    settled = []
    for name, record in jobs.items():
        pending_id = record.get("pending_id")
        if record.get("last_outcome") != "queued" or not isinstance(pending_id, str):
            continue
        if pending_id in queued_ids:
            continue
        for key in ("reason", "next_step", "retry_in_s"):
            record.pop(key, None)
        record |= {
            "last_outcome": "applied",
            "applied_at": iso(now),
            "last_success_at": iso(now),
            "consecutive_failures": 0,
            "failing": False,
        }
        settled.append(name)
    return settled
