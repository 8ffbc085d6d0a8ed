"""``memsync daemon``: check, prune, snapshot and retention on a schedule, as a systemd service.

Each job is the same command the CLI runs (``python -m memsync <command> --json``), in a child
process, one at a time: the daemon stays small, never imports mem0, and a stuck job can be
stopped. The decisions (``memsync.jobs``: ``next_run``, ``plan_catch_up``, ``classify``,
``backoff_s``, ``queue_delay_s``) are pure; the loop around them keeps each job's next run time
(UTC). A run is recorded by ``memsync.daemon.runner`` exactly as ``memsync job`` records a run
by hand, in ``<state_dir>/daemon-state.json``; ``daemon.lock`` allows one daemon per state
directory. While the queue of writes that found no route (``memsync.routes.queue``) holds requests,
the daemon runs ``apply-pending`` (``memsync pending apply``), at most once a minute.
systemd: READY/STATUS/WATCHDOG over ``$NOTIFY_SOCKET``; SIGTERM finishes the current job (up to
``stop_timeout_s``) then exits 0, a second SIGTERM stops at once; SIGHUP reloads the config.
The jobs read the configuration last accepted, kept as JSON (``memsync.config.accepted``).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO
from zoneinfo import ZoneInfo

import structlog

from memsync import flock, jobs
from memsync.config import Config
from memsync.config.accepted import jsonable, load_self_contained
from memsync.daemon.protect import Supervisor
from memsync.daemon.runner import (
    ACCEPTED_CONFIG,
    ACCEPTED_COPY_ENV,
    WATCHDOG_THREAD,
    Entry,
    JobRunner,
    Stop,
    commit,
    job_lock,
    read_queue,
)
from memsync.errors import ConfigError, ExitCode, LockedError, MemsyncError, TryLaterError
from memsync.state import write_json_atomic
from memsync.utc import iso

logger = structlog.get_logger(__name__)

__all__ = ["ACCEPTED_CONFIG", "ACCEPTED_COPY_ENV", "Daemon", "Notifier", "run_daemon"]
# memsync 0.1 kept the accepted TOML text and a copy of the mem0 file; removed once replaced.
LEGACY_COPIES = ("daemon-config.toml", "daemon-mem0.json", "daemon-mem0.yaml", "daemon-mem0.yml")


class Notifier:
    """sd_notify over ``$NOTIFY_SOCKET`` (a leading ``@`` is an abstract socket); no-op without it."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        address = environ.get("NOTIFY_SOCKET", "")
        self.address = "\0" + address[1:] if address.startswith("@") else address

    def send(self, message: str) -> None:
        """Send one datagram such as ``READY=1`` or ``STATUS=...``; errors are ignored."""
        if not self.address:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.setblocking(False)  # a listener that stops reading must never stall a job
                sock.connect(self.address)
                sock.sendall(message.encode())
        except OSError:
            pass


FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


@dataclass
class Daemon:
    """The scheduler loop. ``run`` returns the exit status."""

    config_path: Path
    config: Config
    document: dict[str, Any]  # what ``config`` was validated from, self-contained (accepted.py)
    environ: Mapping[str, str]
    notifier: Notifier = field(init=False)
    stopping: threading.Event = field(default_factory=threading.Event)
    stop_now: threading.Event = field(default_factory=threading.Event)
    reload_requested: threading.Event = field(default_factory=threading.Event)
    retry_at: dict[str, float] = field(default_factory=dict)  # per job: monotonic seconds
    next_at: dict[str, datetime] = field(default_factory=dict)  # per job: when it runs next (UTC)
    queue_check_at: float = 0.0  # monotonic: when to look at the queue next
    apply_pending_at: float = 0.0  # monotonic: apply-pending runs no earlier than this
    current: str | None = None
    entry: Entry | None = None  # the CLI's: each job runs in a fork of the daemon
    supervisor: Supervisor | None = None  # Litestream, when [protect] is set
    _lock_handle: TextIO | None = None

    def __post_init__(self) -> None:
        self.notifier = Notifier(self.environ)

    # --- setup ------------------------------------------------------------------------------

    def acquire_lock(self) -> None:
        """Hold ``daemon.lock`` for the daemon's life. Raises LockedError (exit 12) naming the holder."""
        self.config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self._lock_handle = flock.acquire(self.config.state_dir / jobs.LOCK_FILE)
        except flock.LockHeld as held:
            raise LockedError(
                f"another memsync daemon runs on {self.config.state_dir}: {held.holder or 'another process'}",
                "stop it first (systemctl stop memsync), or give this one another state_dir",
            ) from None

    def accept(self) -> None:
        """Keep the document just accepted (JSON, mem0 file inlined): the jobs read that one."""
        write_json_atomic(self.config.state_dir / ACCEPTED_CONFIG, jsonable(self.document))
        for name in LEGACY_COPIES:
            (self.config.state_dir / name).unlink(missing_ok=True)

    def schedule_jobs(self) -> None:
        """(Re)compute every job's next run time from now and the current config."""
        now, zone = datetime.now(UTC), ZoneInfo(self.config.daemon.timezone)
        self.next_at = {}
        for job in jobs.build_jobs(self.config):
            at = jobs.next_run(job.when, now, zone)
            if at is not None:
                self.next_at[job.name] = at

    def runner(self) -> JobRunner:
        """The runner for the current config (a reload replaces the config)."""
        return JobRunner(
            config=self.config,
            config_path=self.config_path,
            environ=self.environ,
            daemon=True,
            stop=Stop(self.stopping, self.stop_now, self.config.daemon.stop_timeout_s),
            on_start=lambda name: self.notifier.send(f"STATUS=running {name}"),
            entry=self.entry,
        )

    def run_due(self) -> None:
        """Run the jobs whose time has come, earliest first; each next time counts from its end."""
        zone = ZoneInfo(self.config.daemon.timezone)
        for job in sorted(
            jobs.build_jobs(self.config), key=lambda j: self.next_at.get(j.name, FAR_FUTURE)
        ):
            due = self.next_at.get(job.name)
            if due is None or due > datetime.now(UTC) or self.stopping.is_set():
                continue
            self.run_job(job, "schedule")
            after = jobs.next_run(job.when, datetime.now(UTC), zone)
            if after is not None:
                self.next_at[job.name] = after

    def install_signals(self) -> None:
        """SIGTERM/SIGINT: finish the current job, then stop (twice: stop now). SIGHUP: reload."""

        def terminate(signum: int, frame: object) -> None:
            if self.stopping.is_set():
                self.stop_now.set()
            else:
                self.notifier.send("STOPPING=1")  # at once: systemd knows while a job finishes
            self.stopping.set()

        def hangup(signum: int, frame: object) -> None:
            self.reload_requested.set()

        signal.signal(signal.SIGTERM, terminate)
        signal.signal(signal.SIGINT, terminate)
        signal.signal(signal.SIGHUP, hangup)

    def start_watchdog(self) -> None:
        """Ping WATCHDOG=1 from its own thread at half of ``$WATCHDOG_USEC``, so a long job is fine."""
        usec = self.environ.get("WATCHDOG_USEC")
        if not usec or not usec.isdigit():
            return
        interval = int(usec) / 2_000_000

        def ping() -> None:
            while not self.stop_now.wait(interval):
                self.notifier.send("WATCHDOG=1")

        threading.Thread(target=ping, name=WATCHDOG_THREAD, daemon=True).start()

    # --- loop -------------------------------------------------------------------------------

    def run(self) -> int:
        """Run until SIGTERM; return 0."""
        self.acquire_lock()
        self.accept()
        self.install_signals()
        self.schedule_jobs()
        commit(self.config, self.started)
        self.notifier.send("READY=1\nSTATUS=idle")
        self.start_watchdog()
        names = [j.name for j in jobs.build_jobs(self.config)]
        logger.info("daemon_started", pid=os.getpid(), jobs=names)
        if self.config.protect is not None:
            self.supervisor = Supervisor(self.config)
            self.supervisor.start()
        self.catch_up()
        while not self.stopping.is_set():
            if self.reload_requested.is_set():
                self.reload()
            self.run_due()
            self.run_retries()
            self.check_queue()
            self.stopping.wait(self.sleep_s())
        self.notifier.send("STOPPING=1")  # again, for a loop that ended without SIGTERM
        if self.supervisor is not None:
            self.supervisor.stop()
        commit(self.config, self.stopped)
        logger.info("daemon_stopped", pid=os.getpid())
        return int(ExitCode.OK)

    def started(self, state: dict[str, Any]) -> None:
        """Record the daemon's start in the state document (under its lock)."""
        state.update(
            {
                "pid": os.getpid(),
                "started_at": iso(datetime.now(UTC)),
                "stopped_at": None,
                "current_job": None,
            }
        )

    def stopped(self, state: dict[str, Any]) -> None:
        """Record the daemon's stop in the state document (under its lock)."""
        state.update({"stopped_at": iso(datetime.now(UTC)), "current_job": None})

    def catch_up(self) -> None:
        """Run once, at start, each job that missed its latest slot while the daemon was down."""
        zone = ZoneInfo(self.config.daemon.timezone)
        state = jobs.load_state(self.config)
        scheduled = jobs.build_jobs(self.config)
        names = jobs.plan_catch_up(scheduled, state["jobs"], datetime.now(UTC), zone)
        logger.info("catch_up_planned", jobs=names)
        for job in (j for j in scheduled if j.name in names):
            if self.stopping.is_set():
                break
            logger.info("job_catch_up", job=job.name)
            self.run_job(job, "catch-up")

    def sleep_s(self) -> float:
        """Until the next job, retry or look at the queue, at most 60 s (no busy loop)."""
        now = datetime.now(UTC)
        candidates = [
            jobs.QUEUE_CHECK_S,
            *(max((at - now).total_seconds(), 0.05) for at in self.next_at.values()),
        ]
        candidates += [max(at - time.monotonic(), 0.05) for at in self.retry_at.values()]
        candidates.append(max(self.queue_check_at - time.monotonic(), 0.05))
        return min(candidates)

    def run_retries(self) -> None:
        """Run the failed jobs whose backoff has passed."""
        for name, at in sorted(self.retry_at.items(), key=lambda item: item[1]):
            if at <= time.monotonic() and not self.stopping.is_set():
                job = next((j for j in jobs.build_jobs(self.config) if j.name == name), None)
                del self.retry_at[name]
                if job is not None:
                    logger.info("job_retry", job=name)
                    self.run_job(job, "retry")

    def check_queue(self) -> None:
        """Once a minute: refresh the textfile, and run apply-pending when the queue holds requests.

        apply-pending runs at most once a minute, 60 s doubling to 5 min after failures
        (``jobs.queue_delay_s``); the agent coming up, a window or the store coming free are
        picked up at the next run.
        """
        if time.monotonic() < self.queue_check_at or self.stopping.is_set():
            return
        self.queue_check_at = time.monotonic() + jobs.QUEUE_CHECK_S
        try:
            commit(self.config)  # settles queued records, refreshes the queue's ages
        except MemsyncError as error:
            logger.warning("state_failed", error=error.message)
        queue, _ids = read_queue(self.config, datetime.now(UTC))
        if queue.error is not None:
            logger.warning("queue_unreadable", error=queue.error)
        if not queue.count or time.monotonic() < self.apply_pending_at:
            return
        self.run_job(jobs.job_named(self.config, jobs.APPLY_PENDING), "queue")
        record = jobs.load_state(self.config)["jobs"].get(jobs.APPLY_PENDING) or {}
        failures = int(record.get("consecutive_failures") or 0)
        self.apply_pending_at = time.monotonic() + jobs.queue_delay_s(failures)

    def reload(self) -> None:
        """SIGHUP: load the config again; an invalid one is rejected and the old one kept."""
        self.reload_requested.clear()
        try:
            document, fresh = load_self_contained(self.config_path, self.environ)
            problems = []
            if fresh.state_dir != self.config.state_dir:
                problems.append(
                    "state_dir cannot change on reload (the daemon's lock lives there): restart it"
                )
            if not fresh.daemon.jobs and fresh.protect is None:
                problems.append("daemon: no job scheduled and no [protect]")
            if problems:
                raise ConfigError(str(self.config_path), problems)
        except ConfigError as error:
            logger.error("config_reload_failed", error=error.message, kept="previous configuration")
            return
        self.config, self.document = fresh, document
        self._follow_protect()
        self.accept()
        self.schedule_jobs()
        logger.info("config_reloaded", jobs=[j.name for j in jobs.build_jobs(fresh)])

    def _follow_protect(self) -> None:
        """After a reload: start, reconfigure or stop the Litestream supervisor."""
        if self.supervisor is not None and self.config.protect is None:
            self.supervisor.stop()
            self.supervisor = None
        elif self.supervisor is not None:
            self.supervisor.config = self.config  # its next look rewrites Litestream's config
        elif self.config.protect is not None:
            self.supervisor = Supervisor(self.config)
            self.supervisor.start()

    # --- one job ----------------------------------------------------------------------------

    def run_job(self, job: jobs.Job, trigger: str) -> None:
        """Run one job in a child process and record it; never raise (the loop lives on).

        Skipped (event ``job_busy``) while a run of the same job started by hand is in
        progress: that run records itself. A failed run is retried after its backoff.
        """
        if self.stopping.is_set():
            return
        with structlog.contextvars.bound_contextvars(job=job.name):
            self.current = job.name
            try:
                with job_lock(self.config, job.name, wait=False) as held:
                    if held:
                        _run, record, _child = self.runner().run(job, trigger)
                        self.retry_at.pop(job.name, None)
                        if "retry_in_s" in record and job.name in self.config.daemon.jobs:
                            self.retry_at[job.name] = time.monotonic() + record["retry_in_s"]
            except Exception as error:  # noqa: BLE001 - the job wrapper is a boundary
                logger.error("job_failed", error=f"{type(error).__name__}: {error}", exc_info=True)
            finally:
                self.current = None
                self.notifier.send("STATUS=idle")


def run_daemon(config_path: Path, environ: Mapping[str, str], entry: Entry | None = None) -> int:
    """Load the config and run the daemon. Raises ConfigError, LockedError, TryLaterError.

    ``entry`` (the CLI's ``main`` and ``build_parser``) runs each job in a fork of the daemon
    (``daemon.runner``).
    """
    document, loaded = load_self_contained(config_path, environ)
    if not loaded.daemon.jobs and loaded.protect is None:
        raise ConfigError(
            loaded.source,
            ["daemon: no job scheduled (set check_every, snapshot_at, ...) and no [protect]"],
        )
    try:
        return Daemon(
            config_path=config_path,
            config=loaded,
            document=document,
            environ=environ,
            entry=entry,
        ).run()
    except OSError as error:
        raise TryLaterError(
            f"daemon state directory {loaded.state_dir}: {error.strerror}"
        ) from error
