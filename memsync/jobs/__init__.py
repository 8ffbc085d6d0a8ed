"""The daemon's jobs: what they run and when, how a run is judged and recorded, their state.

Shared by the daemon (``memsync.daemon``), ``memsync job`` (a run by hand records itself
exactly as a scheduled run does), ``status``, ``doctor`` and the Prometheus textfile.
``schedule``: the commands and times (pure); ``outcome``: a run's outcome, reason and next
step, and its state record (pure); ``health``: the one judgement ``status`` and ``doctor``
share (pure); ``state``: ``daemon-state.json`` and its locks; ``textfile``: the metrics.
"""

from __future__ import annotations

from memsync.jobs.health import JobsVerdict, QueueFigures, judge_jobs
from memsync.jobs.outcome import (
    Run,
    classify,
    explain,
    is_failing,
    parse_exit_error,
    record_run,
    settle_queued,
    summarize,
)
from memsync.jobs.schedule import (
    APPLY_PENDING,
    JOB_NAMES,
    QUEUE_CHECK_S,
    SCHEDULED_JOB_NAMES,
    Job,
    backoff_s,
    build_jobs,
    job_argv,
    job_named,
    latest_slot,
    next_run,
    parse,
    plan_catch_up,
    queue_delay_s,
)
from memsync.jobs.state import (
    LOCK_FILE,
    STATE_FILE,
    daemon_pid,
    job_lock_path,
    load_state,
    state_lock,
    state_path,
)
from memsync.jobs.textfile import protection_gauges, render_textfile, write_textfile

__all__ = [
    "APPLY_PENDING", "JOB_NAMES", "LOCK_FILE", "QUEUE_CHECK_S", "SCHEDULED_JOB_NAMES", "STATE_FILE",
    "Job", "JobsVerdict", "QueueFigures", "Run", "backoff_s", "build_jobs", "classify",
    "daemon_pid", "explain", "is_failing", "job_argv", "job_lock_path", "job_named", "judge_jobs",
    "latest_slot", "load_state", "next_run", "parse", "parse_exit_error", "plan_catch_up",
    "protection_gauges", "queue_delay_s", "record_run", "render_textfile", "settle_queued", "state_lock",
    "state_path", "summarize", "write_textfile",
]  # fmt: skip
