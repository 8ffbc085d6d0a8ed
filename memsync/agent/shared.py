"""The write gate across the app's processes: ``flock`` on files in one directory per deployment.

A prefork server (gunicorn's ``--preload``, uvicorn's ``--workers``) runs the app in several
processes; a pause of one process's gate would leave the others writing. The gate directory,
``<history.db>.memsync-gate/`` beside mem0's history (the app can always write there), holds:

* ``gate``: each process with a gated write in flight holds it shared (one ``flock`` per
  process, counted across its threads); a pause holds it exclusive.
* ``turnstile``: a writer passes it (exclusive, a few microseconds) before it takes ``gate``; a
  pause holds it first, so a stream of writers cannot starve the pause (``flock`` alone lets new
  shared holders pass a waiting exclusive one).
* ``members/<pid>``: each covered process holds an exclusive ``flock`` on its own file for life;
  ``covered`` lists the live ones (a dead process's lock is freed by the kernel).

``flock`` locks belong to an open file description, which ``fork`` shares: each process opens its
own (``os.register_at_fork``: a child forked after ``attach`` reopens everything and joins as its
own member). A dead pauser's locks are freed by the kernel; a live one lets go at its lease end
(a timer thread), whatever memsync does. Linux and other POSIX systems with ``flock``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import threading
import time
import weakref
from pathlib import Path

from .protocol import AgentRequestError

logger = logging.getLogger("memsync.agent")

GATE_SUFFIX = ".memsync-gate"


def gate_directory(history_db_path: str | os.PathLike[str] | None) -> Path | None:
    """``<history.db>.memsync-gate`` for a file history, None for none or ``:memory:``. Pure."""
    if not history_db_path or str(history_db_path) == ":memory:":
        return None
    path = Path(history_db_path).resolve()
    return path.with_name(path.name + GATE_SUFFIX)


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _try_flock(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _flock_by(fd: int, how: int, deadline: float) -> bool:
    """``flock`` by ``deadline`` (monotonic), polling from 0.5 ms up to 10 ms apart."""
    step = 0.0005
    while not _try_flock(fd, how):
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)
        step = min(step * 2, 0.01)
    return True


class SharedGate:
    """This process's part of the deployment's cross-process gate. Thread-safe; fork-safe."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        (directory / "members").mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fds: list[int] = []
        self._pause: tuple[int, int] | None = None
        self._timer: threading.Timer | None = None
        self.lease_ran_out = False
        self.error: str | None = None  # why this process is not covered, if it is not
        self._closed = False
        self._join()
        this = weakref.ref(self)  # the hook must not keep a closed gate alive

        def after_fork_in_child() -> None:
            gate = this()
            if gate is not None and not gate._closed:
                gate._after_fork()

        os.register_at_fork(after_in_child=after_fork_in_child)

    def _join(self) -> None:
        """Open this process's own descriptions and become a member (a new ``members/<pid>``)."""
        self.pid = os.getpid()
        self._entry = threading.Lock()  # one thread at a time through the turnstile
        self._count_lock = threading.Lock()
        self._count = 0  # this process's gated writes in flight (gate held shared while > 0)
        self._pause_lock = threading.Lock()
        self._turnstile = _open(self.directory / "turnstile")
        self._gate = _open(self.directory / "gate")
        self._fds = [self._turnstile, self._gate]
        members = self.directory / "members"
        staging = members / f".{self.pid}.new"  # locked before ``covered`` can see it
        member = _open(staging)
        self._fds.append(member)
        fcntl.flock(member, fcntl.LOCK_EX)
        os.replace(staging, members / str(self.pid))

    def _after_fork(self) -> None:
        """In a forked child: drop the parent's descriptions (their locks stay its own), join."""
        for fd in [*self._fds, *(self._pause or ())]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds, self._pause, self._timer = [], None, None
        try:
            self._join()
            self.error = None
        except OSError as error:
            self.error = f"pid {os.getpid()} could not join the write gate: {error}"
            logger.warning("memsync agent: %s; memsync will not call its captures quiesced", error)

    # --- app writes ----------------------------------------------------------------------------

    def enter_write(self) -> None:
        """Before one gated write: wait while a pause holds the gate, then hold it shared."""
        if self.error is not None:
            return
        with self._entry:
            fcntl.flock(self._turnstile, fcntl.LOCK_EX)  # blocks while a pause holds it
            try:
                with self._count_lock:
                    if self._count == 0:
                        fcntl.flock(self._gate, fcntl.LOCK_SH)
                    self._count += 1
            finally:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def exit_write(self) -> None:
        """After one gated write (``enter_write`` returned)."""
        if self.error is not None:
            return
        with self._count_lock:
            self._count -= 1
            if self._count == 0:
                fcntl.flock(self._gate, fcntl.LOCK_UN)

    # --- pauses ----------------------------------------------------------------------------------

    def pause(self, lease_s: float, timeout_s: float) -> None:
        """Hold every covered process's writes for ``lease_s`` (in-flight ones end first).

        Raises:
            AgentRequestError: ("busy") writes in other processes (or another pause) did not
                end within ``timeout_s``; nothing stays held.
        """
        with self._pause_lock:
            if self._pause is not None and self._timer is not None:  # a renewal: keep the
                self._timer.cancel()  # locks (no writer slips in between), move the lease's end
                self._start_timer(lease_s)
                return
            self._release()
            deadline = time.monotonic() + timeout_s
            turnstile = _open(self.directory / "turnstile")  # descriptions of the pause's own
            gate = _open(self.directory / "gate")
            if not (
                _flock_by(turnstile, fcntl.LOCK_EX, deadline)
                and _flock_by(gate, fcntl.LOCK_EX, deadline)
            ):
                os.close(gate)
                os.close(turnstile)
                raise AgentRequestError(
                    "busy", f"app writes in other processes still running after {timeout_s} s"
                )
            self._pause = (turnstile, gate)
            self.lease_ran_out = False
            self._start_timer(lease_s)

    def _start_timer(self, lease_s: float) -> None:
        self._timer = threading.Timer(lease_s, self._lease_end)
        self._timer.daemon = True
        self._timer.name = "memsync-gate-lease"
        self._timer.start()

    def _lease_end(self) -> None:
        with self._pause_lock:
            if self._pause is not None:
                self.lease_ran_out = True
                self._release()
                logger.warning("memsync agent: pause lease ran out; every process writes again")

    def resume(self) -> None:
        """Let every covered process write again (nothing when not paused)."""
        with self._pause_lock:
            self._release()

    def _release(self) -> None:
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        self._timer = None
        if self._pause is not None:
            turnstile, gate = self._pause
            self._pause = None
            os.close(gate)  # closing the only descriptor drops its lock
            os.close(turnstile)

    # --- membership ------------------------------------------------------------------------------

    def covered(self) -> list[int]:
        """The pids of the live covered processes, sorted; removes dead members' files."""
        found = []
        members = self.directory / "members"
        for entry in members.iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            if pid == os.getpid() and self.error is None:
                found.append(pid)
                continue
            try:
                fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if _try_flock(fd, fcntl.LOCK_EX):  # nobody holds it: that process is gone
                    with contextlib.suppress(OSError):
                        entry.unlink()
                else:
                    found.append(pid)
            finally:
                os.close(fd)
        return sorted(found)

    def close(self) -> None:
        """Leave the gate (this process's writes are no longer covered)."""
        self.resume()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            (self.directory / "members" / str(self.pid)).unlink()
        self._fds = []
        self._closed = True
        self.error = "the agent closed"
