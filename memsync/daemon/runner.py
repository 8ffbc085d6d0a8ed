"""Run one job in a child process and record it: the daemon's runs and ``memsync job``'s alike.

A job is its command (``python -m memsync <command> --json``) in a child process. Its run is
recorded in ``daemon-state.json`` the same way whoever started it (``JobRunner.run``): under
``daemon-state.lock``, as a read-modify-write of the file as it is now (never a copy held in
memory), so the daemon and a run by hand never lose each other's records; the textfile is
rewritten in the same critical section, from the state just written, so it is never older
than the state. ``job-<name>.lock`` is held for the whole run: a run by hand waits for the
daemon's run of the same job to end, and the daemon skips a slot while a run by hand is in
progress (event ``job_busy``).

With an ``entry`` (the CLI's ``main``), the child is a fork of this process rather than a new
interpreter, so a job does not import again what its parent already loaded (the parent loads a
command's modules once, before its first fork, with ``Entry.load``): its own process
(a new session for the daemon's jobs), its own stdout and stderr, the parent's descriptors
(and so its locks) let go, the default signal handlers, the job's environment, and the same
exit status. A fork is taken only while no other thread could hold a lock the child needs
(the watchdog's alone may run); otherwise the job starts a new interpreter as before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO, TypeVar

import structlog

from memsync import flock, jobs, protection
from memsync.config import Config
from memsync.daemon import alerts
from memsync.deployment import Deployment
from memsync.errors import ExitCode, MemsyncError, TryLaterError, UnavailableError
from memsync.repository import upload_marks
from memsync.routes import queue as pending
from memsync.state import window_left_open, write_json_atomic
from memsync.utc import iso

logger = structlog.get_logger(__name__)

PING_TIMEOUT_S = 5.0
ACCEPTED_CONFIG = "daemon-config.json"  # the validated document, mem0_config_file inlined
ACCEPTED_COPY_ENV = "MEMSYNC_ACCEPTED_CONFIG"  # read by memsync.cli.common
WATCHDOG_THREAD = "watchdog"  # the daemon's sd_notify pinger: holds no lock a forked job needs
QUIET_THREAD = "memsync-protect"  # the Litestream supervisor: works only holding FORK_LOCK
FORK_LOCK = threading.Lock()  # held while a job's child starts: a fork sees the supervisor idle
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entry:
    """How a job's command runs in a fork: ``load`` it in the parent, ``run`` it in the child.

    ``load`` is the CLI's ``build_parser`` (it imports the command's modules, once), ``run`` its
    ``main``.
    """

    run: Callable[[Sequence[str]], int]
    load: Callable[[Sequence[str]], object]


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
    """A finished child: exit status (130 when stopped by a signal), stdout, stderr, and how it ran.

    ``child``: ``"fork"`` of this process, or a new ``"interpreter"``.
    """

    exit_code: int
    stdout: str
    stderr: str
    child: str = "interpreter"


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
    text += _protection(config, now)
    try:
        jobs.write_textfile(path, text, config.daemon.textfile_permissions)
    except OSError as error:
        logger.warning("textfile_failed", path=str(path), error=error.strerror or str(error))


def _protection(config: Config, now: datetime) -> str:
    """The textfile's ``[protect]`` gauges (empty without it, or when the replicas are unreadable)."""
    if config.protect is None:
        return ""
    try:
        status = protection.read_status(Deployment.open(config).vector_store, config, now)
    except MemsyncError as error:
        logger.warning("protect_status_failed", error=error.message)
        return ""
    return jobs.protection_gauges([(f.label, f.lag_s) for f in status.files])


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
    entry: Entry | None = None  # set: run each job in a fork of this process (see the module)
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
        clock = time.monotonic()
        try:
            child = self.child(job, started=lambda: self.ping(job.name, "/start"))
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
        self.log_finished(run, record, child.child)
        return run, record, child

    def log_finished(
        self, run: jobs.Run, record: Mapping[str, Any], child: str = "interpreter"
    ) -> None:
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
            child=child,
            **{k: record[k] for k in ("reason", "next_step", "pending_id") if record.get(k)},
            **figures,
        )

    def child(self, job: jobs.Job, started: Callable[[], None] | None = None) -> ChildResult:
        """Run the job's command with ``--json`` and the config; see ``run_child``."""
        command = [
            *job.argv,
            "--json",
            "--config",
            str(self.config_path),
            *self.child_options,
        ]
        env = dict(self.environ)
        if self.daemon:  # the jobs read the configuration the daemon accepted last
            env[ACCEPTED_COPY_ENV] = str(self.config.state_dir / ACCEPTED_CONFIG)
        return run_child(
            command,
            env,
            stop=self.stop,
            new_session=self.daemon,
            entry=self.entry,
            started=started,
        )

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
    command: list[str],
    env: Mapping[str, str],
    *,
    stop: Stop | None,
    new_session: bool,
    entry: Entry | None = None,
    started: Callable[[], None] | None = None,
) -> ChildResult:
    """Run ``memsync *command`` to its end, collecting stdout and stderr; honour stop requests.

    In a fork of this process calling ``entry`` when one is given and no other thread but the
    watchdog runs (``fork_safe``), else in a new interpreter (``python -m memsync``).
    ``started`` is called once the child runs. ``stop.stopping``: the child may finish within
    ``stop.timeout_s``, then gets SIGTERM (and SIGKILL 10 s later); ``stop.stop_now``: SIGKILL.
    A KeyboardInterrupt (SIGINT, or SIGTERM in ``memsync job``) sends the child SIGTERM, waits
    for it, and returns 130.
    """
    process: _Child
    with FORK_LOCK:
        if entry is not None and fork_safe():
            entry.load(command)  # once per command: later forks find its modules loaded
            process = _Forked(entry.run, command, env, new_session=new_session)
        else:
            process = subprocess.Popen(  # noqa: S603 - memsync itself, its arguments from the caller
                [sys.executable, "-m", "memsync", *command],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=new_session,
                env=dict(env),
            )
    reader = _Collector(process)
    if started is not None:
        started()
    interrupted = False
    try:
        _wait(process, stop)
    except KeyboardInterrupt:
        interrupted = True
        _end(process)
    code = process.wait()
    reader.join()
    if interrupted or code < 0:
        code = int(ExitCode.INTERRUPTED)
    kind = "fork" if isinstance(process, _Forked) else "interpreter"
    return ChildResult(exit_code=code, stdout=reader.stdout, stderr=reader.stderr, child=kind)


def _wait(process: _Child, stop: Stop | None) -> None:
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


def _end(process: _Child) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


class _Collector:
    """Drain a child's stdout and stderr in threads (no pipe deadlock on large output)."""

    def __init__(self, process: _Child) -> None:
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


def fork_safe() -> bool:
    """Whether this process may fork a job: no thread but this one and quiet ones runs.

    Quiet: the watchdog, and the Litestream supervisor, which works only holding ``FORK_LOCK``
    (``run_child`` holds it while it starts a child).

    Any other thread (a ping, a notification, a reader) could hold a lock the child would wait
    for forever, such as a module's import lock.
    """
    me = threading.current_thread()
    quiet = (WATCHDOG_THREAD, QUIET_THREAD)
    return all(t is me or t.name in quiet for t in threading.enumerate())


class _Forked:
    """A job's command in a fork of this process, seen as ``run_child`` sees a ``Popen``."""

    def __init__(
        self,
        run: Callable[[Sequence[str]], int],
        command: list[str],
        env: Mapping[str, str],
        *,
        new_session: bool,
    ) -> None:
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        # Held back until the child has its own handlers; each side restores the mask it had.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORK_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                _child(run, command, env, new_session, (out_write, err_write), mask)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(out_write)
        os.close(err_write)
        self.pid = pid
        self.args = command
        self.returncode: int | None = None
        self.stdout: TextIO | None = open(out_read)  # noqa: SIM115 - read to its end by _Collector
        self.stderr: TextIO | None = open(err_read)  # noqa: SIM115

    def poll(self) -> int | None:
        """The exit status (negative: the signal that ended it), or None while it runs."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's end (``subprocess.TimeoutExpired`` after ``timeout`` s)."""
        if timeout is None:
            while self.returncode is None:
                _pid, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return code

    def terminate(self) -> None:
        """SIGTERM, unless it has ended (its pid is never signalled once reaped)."""
        if self.poll() is None:
            os.kill(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL, unless it has ended."""
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


_Child = subprocess.Popen[str] | _Forked
FORK_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _child(
    run: Callable[[Sequence[str]], int],
    command: list[str],
    env: Mapping[str, str],
    new_session: bool,
    pipes: tuple[int, int],
    mask: set[int | signal.Signals],
) -> NoReturn:
    """The forked child: become the job's own process, ``run(command)``, exit with its status."""
    code = 1
    try:
        if new_session:
            os.setsid()
        for target, fd in zip((1, 2), pipes, strict=True):
            os.dup2(fd, target)
        _let_go_of_descriptors()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.environ.clear()
        os.environ.update(env)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - as a new interpreter's
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        structlog.contextvars.clear_contextvars()  # the parent's job=..., run_id=...
        code = run(command)
    except KeyboardInterrupt:
        code = int(ExitCode.INTERRUPTED)
    except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, exit 1
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _let_go_of_descriptors() -> None:
    """Point every inherited descriptor above 2 at /dev/null (as ``close_fds`` would close them).

    The parent's locks (``daemon.lock``, ``job-<name>.lock``) are ``flock``s of open file
    descriptions this fork shares: letting go of them keeps them the parent's alone. /dev/null
    takes each number rather than a close, so no stale object of the parent's can close a file
    the job opens later under the same number.
    """
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != null:
            try:
                os.dup2(null, fd)
            except OSError:  # the listing's own descriptor, closed since
                pass
    os.close(null)
