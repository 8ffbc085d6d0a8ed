"""The maintenance window: stop the app, write with memsync's own ``Memory``, start the app again.

``maintenance_window`` runs ``[app] stop_command``, waits until the store is free, rolls back hot
journals and yields a ``Writer`` (route ``"window"``) whose every call checks the deadline;
a watchdog interrupts the work at the deadline too (``SIGALRM`` to the main thread). Then it
runs ``[app] start_command``, always: after success, failure, the deadline, SIGTERM or Ctrl-C
(memsync maps SIGTERM to ``KeyboardInterrupt``; further signals wait until the start returned).
The bound is ``[app] max_downtime_s`` from the stop issued to the start returned: the work must
end by then less the time the stop took (the start is given as long). The downtime is measured
and logged (``window_opened``/``window_closed``). ``<state_dir>/window.json`` marks an open
window, so a memsync killed inside one (SIGKILL) has the app started by the next write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType, TracebackType
from typing import Any

import structlog

from memsync.config import Config
from memsync.errors import LockedError, TryLaterError, UnavailableError
from memsync.model import HistoryEvent
from memsync.state import WINDOW_FILE, window_left_open, write_json_atomic
from memsync.stores import interpreter, mem0
from memsync.stores.locks import LockHolder
from memsync.stores.vector_store import VectorStore
from memsync.stores.writer import Route, Writer
from memsync.utc import iso

logger = structlog.get_logger(__name__)

POLL_S = 0.05
APP_STARTING_ENV = "MEMSYNC_APP_STARTING"  # set by the app unit's ExecStartPre= drop-in
HANDLED_WAIT_S = 1.0


class WindowError(LockedError):
    """A maintenance window could not stop the app or free the store (exit 12)."""


class WindowOverrunError(TryLaterError):
    """The work inside a maintenance window overran ``[app] max_downtime_s`` (exit 75)."""


class Overrun(BaseException):
    """Raised inside the window's work at its deadline (a BaseException: nothing swallows it)."""


@dataclass(slots=True)
class Taken:
    """What a write took: its route, and for a window its downtime in seconds.

    Filled by ``memsync.routes.open_writer`` (``route`` when the writer is yielded,
    ``downtime_s`` when a window closes); ``route`` stays None when no route was opened.
    """

    route: Route | None = None
    downtime_s: float | None = None

    def as_json(self) -> dict[str, Any]:
        """``{"route": ..., "downtime_s": ...}`` for a command's JSON report."""
        return {"route": self.route, "downtime_s": self.downtime_s}


class Window:
    """One open window's clock (monotonic seconds) and what it reports."""

    def __init__(self, what: str, max_downtime_s: float) -> None:
        self.what = what
        self.opened = time.monotonic()
        self.deadline = self.opened + max_downtime_s
        self.outcome = "failed"

    def elapsed_s(self) -> float:
        """Seconds since the stop was issued."""
        return time.monotonic() - self.opened


@contextmanager
def maintenance_window(
    store: VectorStore, config: Config, what: str, taken: Taken
) -> Iterator[Writer]:
    """Stop the app, yield a deadline-checked direct ``Writer`` (route window), start the app.

    ``taken`` gets ``route = "window"`` when the writer is yielded and ``downtime_s``
    (seconds, from the stop issued to the start returned) when the window closes.

    The app's interpreter is known before the app is stopped (``interpreter.require``; learned
    from the process holding the store when nothing else names it).

    Raises:
        ConfigError: (exit 10) the app's interpreter is unknown; nothing was stopped.
        WindowError: stop_command failed or timed out, or the store stayed held (exit 12).
        WindowOverrunError: the work overran the deadline (exit 75); what was done is journaled.
        UnavailableError: start_command failed or timed out: the app may be down (exit 11).
        KeyboardInterrupt: SIGINT/SIGTERM during the window (the app was started first).
    """
    holder = store.holder()
    app = interpreter.require(store, config, holder.pid if holder is not None else None)
    window = _open(config, what)
    try:
        _stop_app(config, window)
        _wait_until_free(store, window)
        with _Watchdog(window.deadline):
            mem0.prepare_for_writing(store, config)
            with mem0.open_memory(store, config, route="window", app=app) as writer:
                taken.route = "window"
                yield BoundedWriter(writer, window.deadline)
        window.outcome = "ok"
    except Overrun:
        window.outcome = "overrun"
        raise WindowOverrunError(
            f"{what}: the maintenance window overran [app] max_downtime_s = "
            f"{config.app.max_downtime_s:g} s; the work was interrupted and the app started again",
            "run it again (interrupted work is journaled and resumed), or raise "
            "[app] max_downtime_s",
        ) from None
    except KeyboardInterrupt:
        window.outcome = "interrupted"
        raise
    finally:
        _close(config, window, taken)


@contextmanager
def app_stopped(
    config: Config, what: str, taken: Taken, held: Callable[[], LockHolder | None]
) -> Iterator[None]:
    """Stop the app, wait until ``held()`` is None, run the block, start the app again, always.

    For file work no ``Writer`` does (restore swapping history.db on pgvector): no ``Memory``
    is opened. ``taken`` gets ``route = "window"`` and the downtime, as ``maintenance_window``.

    Raises:
        WindowError: stop_command failed, or ``held()`` still names a process at the deadline.
        UnavailableError: start_command failed or timed out: the app may be down (exit 11).
    """
    window = _open(config, what)
    try:
        _stop_app(config, window)
        while (holder := held()) is not None:
            if time.monotonic() >= window.deadline:
                raise WindowError(
                    f"{what}: {holder.describe()} still holds the deployment's files "
                    f"{window.elapsed_s():.1f} s after [app] stop_command",
                    "make stop_command stop the process that holds them, and wait for it",
                )
            time.sleep(POLL_S)
        taken.route = "window"
        yield
        window.outcome = "ok"
    finally:
        _close(config, window, taken)


@contextmanager
def bounded(deadline: float, what: str, max_downtime_s: float) -> Iterator[None]:
    """Interrupt the block at ``deadline`` (monotonic seconds), as a window's work is.

    For work inside ``app_stopped`` that must end within ``[app] max_downtime_s`` (the
    migration's final catch-up). Main thread only (``_Watchdog``); elsewhere it never fires.

    Raises:
        WindowOverrunError: (exit 75) the block ran past ``deadline``; it was interrupted.
    """
    try:
        with _Watchdog(deadline):
            yield
    except Overrun:
        raise WindowOverrunError(
            f"{what}: the work inside the window overran [app] max_downtime_s = "
            f"{max_downtime_s:g} s; it was interrupted and the app started again as it was",
            "run it again (interrupted work is journaled and resumed), or raise "
            "[app] max_downtime_s",
        ) from None


def _open(config: Config, what: str) -> Window:
    """Mark a window open (``_mark``, so a killed memsync's successor starts the app) and log it."""
    app = config.app
    assert app.stop_command is not None and app.start_command is not None
    window = Window(what, app.max_downtime_s)
    _mark(config, what)
    logger.info("window_opened", what=what, max_downtime_s=app.max_downtime_s)
    return window


def _stop_app(config: Config, window: Window) -> None:
    """Run ``stop_command``; the start is then given as long as the stop took."""
    assert config.app.stop_command is not None
    run_command(config.app.stop_command, "stop_command", config.app.max_downtime_s, WindowError)
    window.deadline -= window.elapsed_s()


def _close(config: Config, window: Window, taken: Taken) -> None:
    """Run start_command (signals deferred), record the downtime, log, drop the marker."""
    assert config.app.start_command is not None
    started = True
    try:
        with signals_deferred():
            run_command(
                config.app.start_command,
                "start_command",
                config.app.max_downtime_s,
                UnavailableError,
            )
    except UnavailableError:
        started = False
        raise
    finally:
        taken.downtime_s = round(window.elapsed_s(), 3)
        logger.info(  # info: a failure is the command's error (one stderr line)
            "window_closed",
            what=window.what,
            outcome=window.outcome,
            downtime_s=taken.downtime_s,
            app_started=started,
            max_downtime_s=config.app.max_downtime_s,
        )
        if started:
            (config.state_dir / WINDOW_FILE).unlink(missing_ok=True)


def _wait_until_free(store: VectorStore, window: Window) -> None:
    """Poll the store's holder every 50 ms until nobody holds it, up to the deadline.

    Raises:
        WindowError: the store is still held at the deadline.
    """
    while True:
        holder = store.holder()
        if holder is None or holder.pid == os.getpid():
            return
        if time.monotonic() >= window.deadline:
            raise WindowError(
                f"{window.what}: {holder.describe()} still holds the store {store.where} "
                f"{window.elapsed_s():.1f} s after [app] stop_command",
                "make stop_command stop the process that holds the store, and wait for it",
            )
        time.sleep(POLL_S)


def run_command(
    argv: Sequence[str], name: str, timeout_s: float, error: type[LockedError | UnavailableError]
) -> None:
    """Run ``argv`` (no shell, its own session, output to a temporary file) within ``timeout_s``.

    The command's own session keeps a terminal's Ctrl-C away from it; its output goes to a
    file, not a pipe, so a daemon it starts in the background never holds memsync up. When
    memsync is interrupted meanwhile, or it overruns, the command and every process of its group
    are killed (SIGKILL) before the interrupt goes on, so none of them acts after memsync moved on.

    Raises:
        error: (the class given) it cannot be run, exits non-zero (the message quotes its last
            output line) or does not finish in time (it is killed).
    """
    command = " ".join(argv)
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as output:
        try:
            process = subprocess.Popen(  # noqa: S603 - the operator's configured argv
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as failure:
            raise error(
                f"[app] {name} ({command}) cannot be run: {failure.strerror}",
                f"fix [app] {name} (an argv list: the program, then its arguments)",
            ) from failure
        try:
            code = process.wait(timeout=timeout_s)
        except BaseException as interrupted:  # a timeout, or SIGTERM/Ctrl-C meanwhile
            try:  # its whole process group: a child must not stop the app after the start
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                process.kill()
            process.wait()
            if not isinstance(interrupted, subprocess.TimeoutExpired):
                raise
            raise error(
                f"[app] {name} ({command}) did not finish in {timeout_s:g} s and was killed",
                f"make {name} return once the app is {'stopped' if 'stop' in name else 'started'}",
            ) from None
        output.seek(0)
        lines = output.read().strip().splitlines()
    if code != 0:
        said = f": {lines[-1][:300]}" if lines else ""
        raise error(
            f"[app] {name} ({command}) exited {code}{said}",
            f"run it by hand to see why; memsync runs it as uid {os.getuid()}",
        )


class _Watchdog:
    """Interrupt the main thread with ``Overrun`` at ``deadline`` (monotonic seconds).

    A timer thread sends SIGALRM to the main thread (so a blocking system call returns too);
    the handler raises ``Overrun`` while armed. Outside the main thread it does nothing (the
    writer's own deadline checks still hold). The previous SIGALRM handler is put back.
    """

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline
        self._lock = threading.Lock()
        self._armed = False
        self._sent = False
        self._handled = False
        self._previous: Any = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous = signal.signal(signal.SIGALRM, self._handle)
        self._armed = True
        main = threading.main_thread().ident
        assert main is not None
        self._timer = threading.Timer(
            max(0.0, self._deadline - time.monotonic()), self._fire, args=(main,)
        )
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, main: int) -> None:
        with self._lock:
            if self._armed:
                self._sent = True
                signal.pthread_kill(main, signal.SIGALRM)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._handled = True
        if self._armed:
            self._armed = False
            raise Overrun

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._timer is None:
            return
        try:
            with self._lock:
                self._armed = False
        finally:
            self._timer.cancel()
            waited = time.monotonic() + HANDLED_WAIT_S
            while self._sent and not self._handled and time.monotonic() < waited:
                time.sleep(0.001)  # a signal sent is handled here, never by the previous handler
            signal.signal(signal.SIGALRM, _handler_or_default(self._previous))


def _handler_or_default(handler: Any) -> Any:
    """A handler ``signal.signal`` returned, fit to be put back (None: installed outside Python)."""
    return signal.SIG_DFL if handler is None else handler


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGTERM and SIGINT back while the block runs; re-raise as KeyboardInterrupt after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def defer(signum: int, frame: FrameType | None) -> None:
        arrived.append(signum)

    previous = {number: signal.signal(number, defer) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, _handler_or_default(handler))
    if arrived:
        raise KeyboardInterrupt


def _mark(config: Config, what: str) -> None:
    """Write ``<state_dir>/window.json`` (pid, what, when) before the app is stopped."""
    config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json_atomic(
        config.state_dir / WINDOW_FILE,
        {"pid": os.getpid(), "what": what, "opened_at": iso(datetime.now(UTC))},
    )


def recover_window(config: Config) -> None:
    """Start the app when a memsync died inside a window (``state.window_left_open``).

    Idempotent. Nothing happens when there is no marker, or its memsync still runs. With
    ``MEMSYNC_APP_STARTING=1`` in the environment (the app unit's ``ExecStartPre=``: the app is
    starting already, and a ``systemctl start`` of its own unit would wait for this very step)
    the marker is dropped without running ``start_command``.

    Raises:
        UnavailableError: start_command failed (the marker stays for the next try).
    """
    document = window_left_open(config.state_dir)
    if document is None:
        return
    starting = os.environ.get(APP_STARTING_ENV) == "1"
    logger.warning(
        "window_recovered", what=document.get("what"), opened_at=document.get("opened_at"),
        app_starting=starting,
    )  # fmt: skip
    if config.app.start_command is not None and not starting:
        run_command(
            config.app.start_command, "start_command", config.app.max_downtime_s, UnavailableError
        )
    (config.state_dir / WINDOW_FILE).unlink(missing_ok=True)


class BoundedWriter:
    """A ``Writer`` that raises ``Overrun`` from any call made after ``deadline`` (monotonic)."""

    def __init__(self, inner: Writer, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline
        self.route: Route = "window"

    def _check(self) -> None:
        if time.monotonic() >= self._deadline:
            raise Overrun

    def payload(self, memory_id: str) -> dict[str, Any] | None:
        """See ``Writer.payload``."""
        self._check()
        return self._inner.payload(memory_id)

    def exists(self, memory_id: str) -> bool:
        """See ``Writer.exists``."""
        self._check()
        return self._inner.exists(memory_id)

    def delete(self, memory_id: str) -> bool:
        """See ``Writer.delete``."""
        self._check()
        return self._inner.delete(memory_id)

    def update_text(self, memory_id: str, text: str) -> bool:
        """See ``Writer.update_text``."""
        self._check()
        return self._inner.update_text(memory_id, text)

    def update_metadata(self, memory_id: str, metadata: Mapping[str, Any]) -> bool:
        """See ``Writer.update_metadata``."""
        self._check()
        return self._inner.update_metadata(memory_id, metadata)

    def put_back(self, point_id: str, vector: Sequence[float], payload: Mapping[str, Any]) -> bool:
        """See ``Writer.put_back``."""
        self._check()
        return self._inner.put_back(point_id, vector, payload)

    def put_back_text(self, point_id: str, text: str, payload: Mapping[str, Any]) -> bool:
        """See ``Writer.put_back_text``."""
        self._check()
        return self._inner.put_back_text(point_id, text, payload)

    def relink_entity(self, entity_id: str, remaining: Sequence[str]) -> bool:
        """See ``Writer.relink_entity``."""
        self._check()
        return self._inner.relink_entity(entity_id, remaining)

    def touch_entity_store(self) -> None:
        """See ``Writer.touch_entity_store``."""
        self._check()
        self._inner.touch_entity_store()

    def probe_embedder(self) -> None:
        """See ``Writer.probe_embedder``."""
        self._check()
        self._inner.probe_embedder()

    def record_events(self, events: Sequence[HistoryEvent]) -> int:
        """See ``Writer.record_events``."""
        self._check()
        return self._inner.record_events(events)

    def delete_messages(self, scope: str) -> int:
        """See ``Writer.delete_messages``."""
        self._check()
        return self._inner.delete_messages(scope)


__all__ = [
    "WINDOW_FILE", "BoundedWriter", "Overrun", "Taken", "WindowError", "WindowOverrunError",
    "maintenance_window", "recover_window", "run_command",
]  # fmt: skip
