"""``status``: the daemon, its jobs, the queue and what else may need a hand, read once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsync import jobs, protection
from memsync.config import Config
from memsync.daemon.runner import read_queue
from memsync.deployment import Deployment
from memsync.errors import ExitCode, MemsyncError
from memsync.jobs.health import JobsVerdict
from memsync.repository import upload_marks
from memsync.state import window_left_open
from memsync.stores import interpreter


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """What ``status`` read.

    ``state``: the jobs' record; ``pid``: the daemon's (None: not running); ``verdict``: each
    job judged; ``queue``: the queue's summary; ``window_left_open``: the marker of a window
    whose memsync died; ``pending_upload``: local snapshots waiting for their upload;
    ``protection``: ``[protect]``'s Litestream and replicas (None without it).
    """

    state: dict[str, Any]
    pid: int | None
    verdict: JobsVerdict
    queue: dict[str, Any]
    window_left_open: dict[str, Any] | None
    pending_upload: int
    app_interpreter: dict[str, Any] | None
    protection: dict[str, Any] | None = None

    @property
    def unprotected(self) -> bool:
        """``[protect]`` is set and a file is not replicated within ``max_lag_s``."""
        return self.protection is not None and not self.protection["protected"]

    @property
    def ok(self) -> bool:
        """No job overdue or failing, no window left open, and protection (if set) holds."""
        return not self.verdict.problems and self.window_left_open is None and not self.unprotected

    @property
    def exit_code(self) -> int:
        """3 when a window was left open, protection fails, or a job is overdue or failing."""
        if self.window_left_open is not None or self.unprotected:
            return int(ExitCode.PROBLEMS_FOUND)
        return self.verdict.exit_code

    def to_json(self) -> dict[str, Any]:
        """``status --json`` (docs/reference/json-output.md)."""
        return {
            "command": "status",
            "ok": self.ok,
            "daemon": {
                "running": self.pid is not None,
                "pid": self.pid,
                "current_job": self.state.get("current_job") if self.pid else None,
                "started_at": self.state.get("started_at"),
                "stopped_at": self.state.get("stopped_at"),
            },
            "jobs": list(self.verdict.rows),
            "queue": self.queue,
            "window_left_open": self.window_left_open,
            "snapshots": {"pending_upload": self.pending_upload},
            "app_interpreter": self.app_interpreter,
            "protection": self.protection,
        }


def read_status(config: Config, now: datetime) -> Status:
    """Read the daemon's state, the queue and the markers ``status`` reports. Reads only."""
    state = jobs.load_state(config)
    pid = jobs.daemon_pid(config)
    verdict = jobs.judge_jobs(config, state, now)
    queue, _ids = read_queue(config, now)
    return Status(
        state=state,
        pid=pid,
        verdict=verdict,
        queue=queue.as_json(),
        window_left_open=window_left_open(config.state_dir),  # the app may be down
        pending_upload=upload_marks.count(config),
        app_interpreter=interpreter.shown(config),
        protection=_protection(config, now),
    )


def _protection(config: Config, now: datetime) -> dict[str, Any] | None:
    """``protect --status``'s document without its ``command``; None without ``[protect]``."""
    if config.protect is None:
        return None
    try:
        status = protection.read_status(Deployment.open(config).vector_store, config, now)
    except MemsyncError as error:
        return {"protected": False, "problems": [error.message], "files": []}
    document = status.to_json()
    return {key: value for key, value in document.items() if key not in ("command", "status")}
