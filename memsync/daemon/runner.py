"""Run one job in a child process and record it: the daemon's runs and ``memsync job``'s alike.

A job is its command (``python -m memsync <command> --json``) in a child process. Its run is
recorded in ``daemon-state.json`` the same way whoever started it (``JobRunner.run``): under
``daemon-state.lock``, as a read-modify-write of the file as it is now (never a copy held in
memory), so the daemon and a run by hand never lose each other's records; the textfile is
rewritten in the same critical section, from the state just written, so it is never older
than the state. ``job-<name>.lock`` is held for the whole run: a run by hand waits for the
daemon's run of the same job to end, and the daemon skips a slot while a run by hand is in
progress (event ``job_busy``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, TypeVar

import structlog

from memsync import flock, jobs
from memsync.config import Config
from memsync.daemon import alerts
from memsync.deployment import Deployment
from memsync.errors import ExitCode, TryLaterError, UnavailableError
from memsync.repository import upload_marks
from memsync.routes import queue as pending
from memsync.state import window_left_open, write_json_atomic
from memsync.utc import iso

logger = structlog.get_logger(__name__)

PING_TIMEOUT_S = 5.0
ACCEPTED_CONFIG = "daemon-config.json"  # the validated document, mem0_config_file inlined
ACCEPTED_COPY_ENV = "MEMSYNC_ACCEPTED_CONFIG"  # read by memsync.cli.common
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Stop:
    """The daemon's stop requests: finish within ``timeout_s`` (``stopping``), or at once."""

    stopping: threading.Event
    stop_now: threading.Event
    timeout_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPlan:
    """``job NAME --dry-run``: the command a job would run, and the state file recording it."""

    job: str
    argv: tuple[str, ...]
    state: Path

    def to_json(self) -> dict[str, Any]:
        """``job --dry-run --json`` (docs/reference/json-output.md)."""
        return {
            "command": "job",
            "job": self.job,
            "dry_run": True,
            "argv": list(self.argv),
            "state": str(self.state),
        }


@dataclass(frozen=True, slots=True)
class ChildResult:
    """A finished child: exit status (130 when stopped by a signal), stdout, stderr."""

    exit_code: int
    stdout: str
    stderr: str


def read_queue(config: Config, now: datetime) -> tuple[jobs.QueueFigures, set[str] | None]:
    """The queue's figures and its request ids (None when it cannot be read). Reads only."""
    try:
        requests = pending.load(config.state_dir)
    except UnavailableError as error:
        return jobs.QueueFigures(count=None, error=error.message), None
    kinds: dict[str, int] = {}
    for request in requests:
        kinds[request.kind] = kinds.get(request.kind, 0) + 1
    return (
        jobs.QueueFigures(
            count=len(requests),
            oldest_age_s=pending.oldest_age_s(requests, now),
            oldest_requested_at=min((r.requested_at for r in requests), default=None),
            kinds=kinds,
        ),
        {request.id for request in requests},
    )


def commit(config: Config, change: Callable[[dict[str, Any]], T] | None = None) -> T | None:
    """Change the state document as it is now; settle queued records; rewrite the textfile.

    Holds ``daemon-state.lock`` throughout. ``change`` edits the document in place and may
    return a value (returned here). With no ``change``, the state is written only when a queued
    record settled, and the textfile is refreshed (queue ages).

    Raises:
        TryLaterError: the state directory cannot be written.
    """
    with jobs.state_lock(config):
        now = datetime.now(UTC)
        state = jobs.load_state(config)
        result = change(state) if change is not None else None
        queue, queued_ids = read_queue(config, now)
        settled = [] if queued_ids is None else jobs.settle_queued(state["jobs"], queued_ids, now)
        for name in settled:
            logger.info("job_queue_applied", job=name)
        if change is not None or settled:
            write_json_atomic(jobs.state_path(config), state)
        publish(config, state, queue, now)
    return result


def publish(
    config: Config, state: Mapping[str, Any], queue: jobs.QueueFigures, now: datetime
) -> None:
    """Write the textfile (``[daemon] textfile_path``) with its mode; log ``textfile_failed``."""
    path = config.daemon.textfile_path
    if path is None:
        return
    window_open = window_left_open(config.state_dir) is not None
    pending = upload_marks.count(config) if config.snapshot.directory is not None else None
    verdict = jobs.judge_jobs(config, state, now)
    text = jobs.render_textfile(verdict, state, queue, window_open, pending_uploads=pending)
    try:
        jobs.write_textfile(path, text, config.daemon.textfile_permissions)
    except OSError as error:
        logger.warning("textfile_failed", path=str(path), error=error.strerror or str(error))


@contextmanager
def job_lock(config: Config, name: str, *, wait: bool) -> Iterator[bool]:
    """Hold ``job-<name>.lock`` for a run; yields False (at once) when another run holds it.

    With ``wait``, logs ``job_waiting`` (naming the holder) and waits for it instead; without,
    logs ``job_busy``.

    Raises:
        TryLaterError: the state directory cannot be created or written.
    """
    path = jobs.job_lock_path(config, name)
    try:
        config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = _take(path, wait)
    except OSError as error:
        raise TryLaterError(
            f"job lock {path} cannot be taken: {error.strerror or error}",
            "set state_dir to a directory memsync can write",
        ) from error
    if handle is None:
        yield False
        return
    with handle:
        yield True


def _take(path: Path, wait: bool) -> TextIO | None:
    try:
        return flock.acquire(path)
    except flock.LockHeld as held:
        if not wait:
            logger.info("job_busy", holder=held.holder)
            return None
        logger.info("job_waiting", holder=held.holder)
    return flock.acquire(path, wait=True)


@dataclass
class JobRunner:
    """Runs jobs for the daemon (``daemon=True``) or by hand, and records each run."""

    config: Config
    config_path: Path
    environ: Mapping[str, str]
    daemon: bool
    stop: Stop | None = None
    child_options: tuple[str, ...] = ()  # e.g. ("--log-level", "info") for a run by hand
    on_start: Callable[[str], None] | None = None
    _pings: list[threading.Thread] = field(default_factory=list)

    def run(self, job: jobs.Job, trigger: str) -> tuple[jobs.Run, dict[str, Any], ChildResult]:
        """Run ``job`` now and record it; return the run, its new record and the child's output.

        Never raises for the job's own failure (that is its outcome); logs ``job_finished``.

        Raises:
            TryLaterError: the state cannot be written.
        """
        started = datetime.now(UTC)

        def mark(state: dict[str, Any]) -> None:
            state["jobs"].setdefault(job.name, {})["last_run_at"] = iso(started)
            if self.daemon:
                state["current_job"] = job.name

        commit(self.config, mark)
        if self.on_start is not None:
            self.on_start(job.name)
        self.ping(job.name, "/start")
        clock = time.monotonic()
        try:
            child = self.child(job)
        except OSError as error:  # the interpreter cannot be started: a failed run, recorded
            line = {"type": "exit_error", "code": 1, "message": f"cannot start {job.name}: {error}"}
            child = ChildResult(int(ExitCode.FAILURE), "", json.dumps(line) + "\n")
        try:
            output = json.loads(child.stdout) if child.stdout.strip() else {}
        except ValueError:
            output = {}
        run = jobs.Run(
            name=job.name,
            started=started,
            duration_s=time.monotonic() - clock,
            exit_code=child.exit_code,
            output=output if isinstance(output, dict) else {},
            stderr=child.stderr,
            trigger=trigger,
        )

        before: dict[str, Any] = {}

        def finish(state: dict[str, Any]) -> dict[str, Any]:
            before.update(state["jobs"].get(job.name) or {})
            record = jobs.record_run(before, run, retries=self.daemon, interval_s=job.interval_s)
            state["jobs"][job.name] = record
            if self.daemon:
                state["current_job"] = None
            return record

        record = commit(self.config, finish) or {}
        self.ping(job.name, "" if run.outcome == "ok" else "/fail")
        self.alert(run, before, record)
        self.log_finished(run, record)
        return run, record, child

    def log_finished(self, run: jobs.Run, record: Mapping[str, Any]) -> None:
        """The canonical line of a run: ``job_finished`` (warning unless ok or interrupted)."""
        quiet = run.outcome in ("ok", "problems", "interrupted", "queued")
        if not quiet and run.stderr.strip() and jobs.parse_exit_error(run.stderr) is None:
            logger.warning("job_error_output", stderr=run.stderr.strip().splitlines()[-1][:500])
        log = logger.info if run.outcome in ("ok", "interrupted") else logger.warning
        figures = {
            key: value
            for key, value in (record.get("summary") or {}).items()
            if isinstance(value, int | float | str) and run.outcome in ("ok", "problems")
        }
        log(
            "job_finished",
            outcome=run.outcome,
            exit_code=run.exit_code,
            duration_s=round(run.duration_s, 3),
            trigger=run.trigger,
            **{k: record[k] for k in ("reason", "next_step", "pending_id") if record.get(k)},
            **figures,
        )

    def child(self, job: jobs.Job) -> ChildResult:
        """Run the job's command with ``--json`` and the config; see ``run_child``."""
        argv = [
            sys.executable,
            "-m",
            "memsync",
            *job.argv,
            "--json",
            "--config",
            str(self.config_path),
            *self.child_options,
        ]
        env = dict(self.environ)
        if self.daemon:  # the jobs read the configuration the daemon accepted last
            env[ACCEPTED_COPY_ENV] = str(self.config.state_dir / ACCEPTED_CONFIG)
        return run_child(argv, env, stop=self.stop, new_session=self.daemon)

    def ping(self, name: str, suffix: str) -> None:
        """healthchecks.io-style ping (``/start``, success, ``/fail``) in the background."""
        url = self.config.daemon.ping_url
        if not url:
            return
        target = url.replace("{job}", name).rstrip("/") + suffix

        def send() -> None:
            try:
                urllib.request.urlopen(target, timeout=PING_TIMEOUT_S).close()  # noqa: S310 - configured URL
            except OSError as error:
                logger.warning("ping_failed", error=str(error))

        thread = threading.Thread(target=send, name="ping", daemon=True)
        thread.start()
        self._pings = [t for t in self._pings if t.is_alive()] + [thread]

    def alert(self, run: jobs.Run, before: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        """Tell ``[daemon] notify`` about the run when it calls for it, in the background."""
        if not self.config.daemon.notify:
            return
        notice = alerts.plan_notice(
            run, before, record, alerts.place_of(Deployment.open(self.config))
        )
        if notice is not None:
            self._pings += alerts.send(self.config, run.name, notice)

    def wait_for_pings(self) -> None:
        """Let the pings and notifications in flight finish (a run by hand exits right after).

        Waits at most ``NOTIFY_WAIT_S`` (10 s) in all; logs ``notify_failed`` for each
        notification still without an answer then.
        """
        deadline = time.monotonic() + max(PING_TIMEOUT_S + 1, alerts.NOTIFY_WAIT_S)
        for thread in self._pings:
            thread.join(max(deadline - time.monotonic(), 0))
        alerts.log_unfinished(self._pings)


def run_child(
    argv: list[str], env: Mapping[str, str], *, stop: Stop | None, new_session: bool
) -> ChildResult:
    """Run ``argv`` to its end, collecting stdout and stderr; honour the daemon's stop requests.

    ``stop.stopping``: the child may finish within ``stop.timeout_s``, then gets SIGTERM (and
    SIGKILL 10 s later); ``stop.stop_now``: SIGKILL. A KeyboardInterrupt (SIGINT, or SIGTERM in
    ``memsync job``) sends the child SIGTERM, waits for it, and returns 130.
    """
    process = subprocess.Popen(  # noqa: S603 - argv is memsync itself, built by the caller
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
        env=dict(env),
    )
    reader = _Collector(process)
    interrupted = False
    try:
        _wait(process, stop)
    except KeyboardInterrupt:
        interrupted = True
        _end(process)
    process.wait()
    reader.join()
    code = process.returncode
    if interrupted or code < 0:
        code = int(ExitCode.INTERRUPTED)
    return ChildResult(exit_code=code, stdout=reader.stdout, stderr=reader.stderr)


def _wait(process: subprocess.Popen[str], stop: Stop | None) -> None:
    deadline: float | None = None
    while process.poll() is None:
        if stop is not None and stop.stop_now.is_set():
            process.kill()
            return
        if stop is not None and stop.stopping.is_set() and deadline is None:
            deadline = time.monotonic() + stop.timeout_s
            logger.info("job_finishing_before_stop", stop_timeout_s=stop.timeout_s)
        if deadline is not None and time.monotonic() > deadline:
            _end(process)
            return
        time.sleep(0.05)


def _end(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


class _Collector:
    """Drain a child's stdout and stderr in threads (no pipe deadlock on large output)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.stdout = ""
        self.stderr = ""
        self._threads = [
            threading.Thread(target=self._drain, args=(process.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._drain, args=(process.stderr, "stderr"), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _drain(self, stream: Any, name: str) -> None:
        setattr(self, name, stream.read() if stream else "")

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=30)
