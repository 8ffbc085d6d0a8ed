"""``memsync daemon``: check, prune, snapshot and retention on a schedule, as a systemd service.

Each job is the same command the CLI runs (``python -m memsync <command> --json``), in a child
process, one at a time: the daemon stays small, never imports mem0, and a stuck job can be
stopped. The decisions (``memsync.jobs``: ``next_run``, ``plan_catch_up``, ``classify``,
``backoff_s``) are pure; the loop around them keeps each job's next run time (UTC). State (last
run, success, outcome per job) is kept in ``<state_dir>/daemon-state.json``; ``daemon.lock`` allows one daemon per state directory.
systemd: READY/STATUS/WATCHDOG over ``$NOTIFY_SOCKET``; SIGTERM finishes the current job (up to
``stop_timeout_s``) then exits 0, a second SIGTERM stops at once; SIGHUP reloads the config.
The jobs read the configuration last accepted, kept as JSON (``memsync.config.accepted``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO
from zoneinfo import ZoneInfo

import structlog

from memsync import flock
from memsync.config import Config
from memsync.config.accepted import jsonable, load_self_contained
from memsync.errors import ConfigError, ExitCode, LockedError, TryLaterError
from memsync.jobs import (
    LOCK_FILE,
    Job,
    backoff_s,
    build_jobs,
    classify,
    load_state,
    next_run,
    plan_catch_up,
    render_textfile,
    state_path,
    summarize,
)
from memsync.state import write_json_atomic
from memsync.utc import iso

logger = structlog.get_logger(__name__)

PING_TIMEOUT_S = 5.0
ACCEPTED_CONFIG = "daemon-config.json"  # the validated document, mem0_config_file inlined
# memsync 0.1 kept the accepted TOML text and a copy of the mem0 file; removed once replaced.
LEGACY_COPIES = ("daemon-config.toml", "daemon-mem0.json", "daemon-mem0.yaml", "daemon-mem0.yml")
ACCEPTED_COPY_ENV = "MEMSYNC_ACCEPTED_CONFIG"  # read by memsync.cli.common


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
    retry_at: dict[str, float] = field(default_factory=dict)
    next_at: dict[str, datetime] = field(default_factory=dict)  # per job: when it runs next (UTC)
    current: str | None = None
    _lock_handle: TextIO | None = None

    def __post_init__(self) -> None:
        self.notifier = Notifier(self.environ)
        self.state = load_state(self.config)
        self.state.setdefault("jobs", {})

    # --- setup ------------------------------------------------------------------------------

    def acquire_lock(self) -> None:
        """Hold ``daemon.lock`` for the daemon's life. Raises LockedError (exit 12) naming the holder."""
        self.config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self._lock_handle = flock.acquire(self.config.state_dir / LOCK_FILE)
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
        for job in build_jobs(self.config):
            at = next_run(job.when, now, zone)
            if at is not None:
                self.next_at[job.name] = at

    def run_due(self) -> None:
        """Run the jobs whose time has come, earliest first; each next time counts from its end."""
        zone = ZoneInfo(self.config.daemon.timezone)
        for job in sorted(
            build_jobs(self.config), key=lambda j: self.next_at.get(j.name, FAR_FUTURE)
        ):
            due = self.next_at.get(job.name)
            if due is None or due > datetime.now(UTC) or self.stopping.is_set():
                continue
            self.run_job(job)
            after = next_run(job.when, datetime.now(UTC), zone)
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

        threading.Thread(target=ping, name="watchdog", daemon=True).start()

    # --- loop -------------------------------------------------------------------------------

    def run(self) -> int:
        """Run until SIGTERM; return 0."""
        self.acquire_lock()
        self.accept()
        self.install_signals()
        self.schedule_jobs()
        self.state.update(
            {"pid": os.getpid(), "started_at": iso(datetime.now(UTC)), "stopped_at": None}
        )
        self.save()
        self.notifier.send("READY=1\nSTATUS=idle")
        self.start_watchdog()
        logger.info(
            "daemon_started", pid=os.getpid(), jobs=[j.name for j in build_jobs(self.config)]
        )
        zone = ZoneInfo(self.config.daemon.timezone)
        catch_up = plan_catch_up(
            build_jobs(self.config), self.state["jobs"], datetime.now(UTC), zone
        )
        logger.info("catch_up_planned", jobs=catch_up)
        for name in catch_up:
            job = next(j for j in build_jobs(self.config) if j.name == name)
            logger.info("job_catch_up", job=name)
            self.run_job(job)
            if self.stopping.is_set():
                break
        while not self.stopping.is_set():
            if self.reload_requested.is_set():
                self.reload()
            self.run_due()
            self.run_retries()
            self.stopping.wait(self.sleep_s())
        self.notifier.send("STOPPING=1")  # again, for a loop that ended without SIGTERM
        self.state["stopped_at"] = iso(datetime.now(UTC))
        self.state["current_job"] = None
        self.save()
        logger.info("daemon_stopped", pid=os.getpid())
        return int(ExitCode.OK)

    def sleep_s(self) -> float:
        """Until the next job or retry, at most 60 s (no busy loop)."""
        now = datetime.now(UTC)
        candidates = [
            60.0,
            *(max((at - now).total_seconds(), 0.05) for at in self.next_at.values()),
        ]
        candidates += [max(at - time.monotonic(), 0.05) for at in self.retry_at.values()]
        return min(candidates)

    def run_retries(self) -> None:
        """Run the failed jobs whose backoff has passed."""
        for name, at in sorted(self.retry_at.items(), key=lambda item: item[1]):
            if at <= time.monotonic() and not self.stopping.is_set():
                job = next((j for j in build_jobs(self.config) if j.name == name), None)
                del self.retry_at[name]
                if job is not None:
                    logger.info("job_retry", job=name)
                    self.run_job(job)

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
            if not fresh.daemon.jobs:
                problems.append("daemon: no job scheduled")
            if problems:
                raise ConfigError(str(self.config_path), problems)
        except ConfigError as error:
            logger.error("config_reload_failed", error=error.message, kept="previous configuration")
            return
        self.config, self.document = fresh, document
        self.accept()
        self.schedule_jobs()
        logger.info("config_reloaded", jobs=[j.name for j in build_jobs(fresh)])

    def save(self) -> None:
        """Write the state document atomically."""
        write_json_atomic(state_path(self.config), self.state)

    # --- one job ----------------------------------------------------------------------------

    def run_job(self, job: Job) -> None:
        """Run one job in a child process; record its outcome; never raise (the loop lives on)."""
        if self.stopping.is_set():
            return
        with structlog.contextvars.bound_contextvars(job=job.name):
            started = datetime.now(UTC)
            self.current = job.name
            record = self.state["jobs"].setdefault(job.name, {})
            record["last_run_at"] = iso(started)
            self.state["current_job"] = job.name
            self.save()
            self.notifier.send(f"STATUS=running {job.name}")
            self.ping(job, "/start")
            clock = time.monotonic()
            try:
                code, output = self.child(job)
            except Exception as error:  # noqa: BLE001 - the job wrapper is a boundary
                logger.error("job_failed", error=f"{type(error).__name__}: {error}", exc_info=True)
                code, output = int(ExitCode.FAILURE), {}
            duration = time.monotonic() - clock
            outcome = classify(code)
            record.update(
                {"last_outcome": outcome, "last_exit": code, "duration_s": round(duration, 3)}
            )
            if outcome in ("ok", "problems"):
                record["last_success_at"] = iso(started)
                record["consecutive_failures"] = 0
                record["summary"] = summarize(job.name, output)
            elif outcome == "skipped":
                record["last_skipped_at"] = iso(started)
            else:
                failures = int(record.get("consecutive_failures", 0)) + 1
                record["consecutive_failures"] = failures
                interval = job.when.every.total_seconds() if job.when.every else None
                delay = backoff_s(failures, interval)
                self.retry_at[job.name] = time.monotonic() + delay
                record["retry_in_s"] = delay
            self.current = None
            self.state["current_job"] = None
            self.save()
            self.write_textfile()
            self.ping(job, "" if outcome in ("ok", "skipped") else "/fail")
            self.notifier.send("STATUS=idle")
            log = logger.warning if outcome in ("failed", "problems") else logger.info
            log(
                "job_finished",
                outcome=outcome,
                exit_code=code,
                duration_s=round(duration, 3),
                **{
                    k: v
                    for k, v in record.get("summary", {}).items()
                    if isinstance(v, int | float | str)
                },
            )

    def child(self, job: Job) -> tuple[int, dict[str, Any]]:
        """Run the job's command; honour SIGTERM (finish within stop_timeout_s) and a 2nd one."""
        argv = [
            sys.executable,
            "-m",
            "memsync",
            *job.argv,
            "--json",
            "--config",
            str(self.config_path),
        ]
        env = {**self.environ, ACCEPTED_COPY_ENV: str(self.config.state_dir / ACCEPTED_CONFIG)}
        process = subprocess.Popen(  # noqa: S603 - argv is memsync itself, built above
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=env,
        )
        reader = _Collector(process)
        deadline: float | None = None
        while process.poll() is None:
            if self.stop_now.is_set():
                process.kill()
                break
            if self.stopping.is_set() and deadline is None:
                deadline = time.monotonic() + self.config.daemon.stop_timeout_s
                logger.info(
                    "job_finishing_before_stop", stop_timeout_s=self.config.daemon.stop_timeout_s
                )
            if deadline is not None and time.monotonic() > deadline:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                break
            time.sleep(0.05)
        process.wait()
        reader.join()
        try:
            output = json.loads(reader.stdout) if reader.stdout.strip() else {}
        except ValueError:
            output = {}
        if process.returncode not in (0, 3) and reader.stderr.strip():
            logger.warning("job_error_output", stderr=reader.stderr.strip().splitlines()[-1][:500])
        return process.returncode if process.returncode >= 0 else int(ExitCode.INTERRUPTED), output

    def ping(self, job: Job, suffix: str) -> None:
        """healthchecks.io-style ping (``/start``, success, ``/fail``) in the background."""
        url = self.config.daemon.ping_url
        if not url:
            return
        target = url.replace("{job}", job.name).rstrip("/") + suffix

        def send() -> None:
            try:
                urllib.request.urlopen(target, timeout=PING_TIMEOUT_S).close()  # noqa: S310 - configured URL
            except OSError as error:
                logger.warning("ping_failed", error=str(error))

        threading.Thread(target=send, name="ping", daemon=True).start()

    def write_textfile(self) -> None:
        """The Prometheus textfile (node_exporter's textfile collector), written atomically."""
        path = self.config.daemon.textfile_path
        if path is None:
            return
        try:
            temporary = path.with_name(f".{path.name}.tmp")
            temporary.write_text(render_textfile(self.state), encoding="utf-8")
            os.replace(temporary, path)
        except OSError as error:
            logger.warning("textfile_failed", path=str(path), error=error.strerror)


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


def run_daemon(config_path: Path, environ: Mapping[str, str]) -> int:
    """Load the config and run the daemon. Raises ConfigError, LockedError."""
    document, loaded = load_self_contained(config_path, environ)
    if not loaded.daemon.jobs:
        raise ConfigError(
            loaded.source, ["daemon: no job scheduled (set check_every, snapshot_at, ...)"]
        )
    try:
        return Daemon(
            config_path=config_path, config=loaded, document=document, environ=environ
        ).run()
    except OSError as error:
        raise TryLaterError(
            f"daemon state directory {loaded.state_dir}: {error.strerror}"
        ) from error
