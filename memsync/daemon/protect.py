"""The daemon's Litestream: started as a child when ``[protect]`` is set, restarted with backoff.

``Supervisor`` runs in a thread of the daemon. Every second it makes sure
``litestream replicate -no-expand-env -config <state_dir>/litestream.yml`` runs: it writes the configuration
(``protection.litestream_config`` of the files in WAL mode: collections created since are
picked up; a file not in WAL waits for ``memsync protect``), starts Litestream when it is not
running, restarts it when the configuration changed or a file was replaced (a restore put a
new file at its path: Litestream would follow the old one), stops it while a memsync process
holds it (``protect-hold.json``: an erasure rewrites the files and starts a new generation; a
dead holder's hold is ignored), and after an exit waits 1, 2, 4 ... 60 s
(``jobs.backoff_s``'s doubling, capped) before starting it again. Its process is recorded in
``<state_dir>/protect-state.json`` (doctor and ``protect --status`` read it). It works only
holding ``runner.FORK_LOCK``, so the daemon's jobs still start as forks. ``stop`` sends
SIGTERM, waits up to 10 s, then SIGKILL. Litestream's own log lines go to the daemon's stderr. ``[daemon] notify`` is told when
Litestream exits (once per run of exits).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from memsync import protection
from memsync.config import Config
from memsync.daemon import alerts
from memsync.daemon.runner import FORK_LOCK, QUIET_THREAD
from memsync.deployment import Deployment
from memsync.errors import MemsyncError
from memsync.state import write_json_atomic
from memsync.stores import journal_mode
from memsync.utc import iso

logger = structlog.get_logger(__name__)

TICK_S = 1.0  # how often the supervisor looks at Litestream and its configuration
BACKOFF_MAX_S = 60.0
STOP_TIMEOUT_S = 10.0


def restart_delay_s(failures: int) -> float:
    """Seconds before the next start after ``failures`` exits in a row: 1, 2, 4 ... 60. Pure."""
    return float(min(2 ** max(failures - 1, 0), BACKOFF_MAX_S))


@dataclass
class Supervisor:
    """Litestream as the daemon's child. ``start`` the thread; ``stop`` it (and Litestream)."""

    config: Config
    process: subprocess.Popen[bytes] | None = None
    failures: int = 0
    restarts: int = 0
    start_at: float = 0.0  # monotonic: no start before this (backoff)
    running_text: str | None = None  # the configuration the running Litestream read
    running_files: dict[str, int] = field(default_factory=dict)  # its files' inodes at start
    started: float = 0.0  # monotonic: when the running Litestream started
    waiting: list[str] = field(default_factory=list)  # files not in WAL mode, last logged
    held: tuple[int, str] | None = None  # the hold (pid, token) Litestream is stopped for
    stopping: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        """Stop a Litestream a killed daemon or erasure left running, then start the thread.

        The erasure's (``protection.erasure_litestream``) keeps its record: the erasure is
        unfinished, and running it again removes the record.
        """
        left = [protection.running_pid(self.config)]
        erasure = protection.erasure_litestream(self.config)
        if erasure is not None and erasure[1] is None:  # its erasure was killed
            left.append(erasure[0])
        for orphan in {pid for pid in left if pid is not None}:  # two Litestreams would both ship
            started = protection.started_at(orphan)
            os.kill(orphan, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while protection.started_at(orphan) == started and time.monotonic() < deadline:
                time.sleep(0.05)
            if protection.started_at(orphan) == started:
                os.kill(orphan, signal.SIGKILL)
            logger.warning("litestream_orphan_stopped", pid=orphan)
        self.thread = threading.Thread(target=self._loop, name=QUIET_THREAD, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop supervising, then Litestream (SIGTERM, SIGKILL after 10 s); record it stopped."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(STOP_TIMEOUT_S + 5)
        self._terminate("daemon stopping")

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                with FORK_LOCK:  # a job's fork never sees the supervisor mid-look
                    self.tick()
            except Exception as error:  # noqa: BLE001 - the supervisor thread is a boundary
                logger.error("protect_failed", error=f"{type(error).__name__}: {error}")
            self.stopping.wait(TICK_S)

    def tick(self) -> None:
        """One look: reap an exited Litestream, follow a changed configuration, start when due."""
        if self.process is not None and (code := self.process.poll()) is not None:
            self.failures += 1
            delay = restart_delay_s(self.failures)
            self.start_at = time.monotonic() + delay
            pid = self.process.pid
            logger.warning("litestream_exited", pid=pid, exit_code=code, restart_in_s=delay)
            self.process = None
            self._record(None, exit_code=code)
            if self.failures == 1 and self.config.daemon.notify:  # once per run of exits
                place = alerts.place_of(Deployment.open(self.config))
                alerts.send(self.config, "protect", alerts.protect_notice(code, delay, pid, place))
        hold = protection.held_by(self.config)
        if hold is not None:  # an erasure rewrites the files, then a new generation starts
            if hold != self.held:
                self._terminate(f"held by pid {hold[0]}")
                self.held = hold
                self._record(None, held_by=hold[0], hold=hold[1])  # recorded, then announced
                logger.info("litestream_held", holder=hold[0])
            return
        if self.held is not None:
            logger.info("litestream_released", holder=self.held[0])
            self.held = None
        text = self._configuration()
        if text is None:
            return
        if self.process is not None and text != self.running_text:
            self._terminate("configuration changed")
            self.start_at = 0.0
        elif self.process is not None and _inodes(text) != self.running_files:
            self._terminate("a file was replaced")  # a restore swapped it: follow the new one
            self.start_at = 0.0
        if self.process is None and time.monotonic() >= self.start_at:
            self._launch(text)
        elif self.process is not None and self.failures and self._up_s() > BACKOFF_MAX_S:
            self.failures = 0  # it stayed up: the next exit restarts at once

    def _configuration(self) -> str | None:
        """Write the configuration for the files in WAL mode now; its text (None: nothing to run)."""
        protect = self.config.protect
        assert protect is not None
        try:
            store = Deployment.open(self.config).vector_store
            files = journal_mode.live_files(store, self.config.history_db_path)
        except MemsyncError as error:
            logger.warning("protect_files_unreadable", error=error.message)
            return self.running_text
        document = protection.litestream_config(protect, self.config, files)
        waiting = [str(f.path) for f in files if f.mode != journal_mode.WAL]
        if waiting and waiting != self.waiting:
            logger.warning("protect_files_not_wal", paths=waiting, fix="memsync protect")
        self.waiting = waiting
        if not document["dbs"]:
            return None
        text = protection.render(document)
        if protection.write_config(protection.config_file(self.config), text):
            logger.info("litestream_config_written", path=str(protection.config_file(self.config)))
        return text

    def _launch(self, text: str) -> None:
        protect = self.config.protect
        assert protect is not None
        binary = shutil.which(protect.litestream) or protect.litestream
        path = str(protection.config_file(self.config))
        argv = [binary, "replicate", "-no-expand-env", "-config", path]  # paths are literal
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL)  # noqa: S603
        except OSError as error:
            self.failures += 1
            self.start_at = time.monotonic() + restart_delay_s(self.failures)
            logger.error(
                "litestream_start_failed",
                path=binary,
                error=error.strerror or str(error),
                fix="install Litestream 0.3 or set [protect] litestream to its path",
            )
            self._record(None, error=f"{binary}: {error.strerror or error}")
            return
        self.running_text = text
        self.running_files = _inodes(text)
        self.started = time.monotonic()
        if self.failures:
            self.restarts += 1
        logger.info("litestream_started", pid=self.process.pid, restarts=self.restarts)
        self._record(self.process.pid)

    def _up_s(self) -> float:
        return time.monotonic() - self.started

    def _terminate(self, why: str) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            code = process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        logger.info("litestream_stopped", pid=process.pid, exit_code=code, reason=why)
        self._record(None, exit_code=code)

    def _record(self, pid: int | None, **extra: Any) -> None:
        document = {"pid": pid, "at": iso(datetime.now(UTC)), "restarts": self.restarts, **extra}
        try:
            write_json_atomic(self.config.state_dir / protection.STATE_FILE, document)
        except OSError as error:
            logger.warning("protect_state_failed", error=error.strerror or str(error))


def _inodes(text: str) -> dict[str, int]:
    """Each configured file's inode now (a restore or a switch puts a new file at the path)."""
    found = {}
    for db in json.loads(text)["dbs"]:
        try:
            found[db["path"]] = os.stat(db["path"]).st_ino
        except OSError:
            found[db["path"]] = 0
    return found
