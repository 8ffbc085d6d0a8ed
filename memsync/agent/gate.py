"""The write gate: the app's Memory calls, the agent's operations and pauses, serialised.

``attach`` wraps the Memory's public methods (``WRITES`` and ``READS``, mem0ai 2.2.1, which
calls none of them from inside another nor from its worker threads) with ``gated``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from .protocol import HOLD_NEW_CALLS_S, WAIT_FOR_APP_S, AgentRequestError
from .shared import SharedGate

WRITES = ("add", "update", "delete", "delete_all", "reset")
READS = ("get", "get_all", "search", "history")

logger = logging.getLogger("memsync.agent")


class WriteGate:
    """Serialises the agent's operations with the app's Memory calls; pauses app writes.

    App calls share the gate (as they share the Memory today); ``exclusive`` waits for them to
    finish and holds new ones back; ``pause`` holds back new writes only. Re-entrant per
    thread: a Memory method that calls another goes through once.

    With ``shared`` (the deployment's ``SharedGate``), app writes also pass the gate every
    process of the app shares, and ``pause`` holds them in every process. A forked child starts
    with a fresh gate (nothing paused, no call in flight).
    """

    def __init__(self, shared: SharedGate | None = None) -> None:
        self.shared = shared
        self._reset()
        this = weakref.ref(self)  # the hook must not keep the gate alive

        def after_fork_in_child() -> None:
            gate = this()
            if gate is not None:
                gate._reset()

        os.register_at_fork(after_in_child=after_fork_in_child)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._local = threading.local()
        self._calls = 0
        self._writes = 0
        self._exclusive = False
        self._waiting = 0
        self._paused_until: float | None = None
        self._paused_at = 0.0
        self.lease_ran_out = False

    def covered(self) -> list[int]:
        """The pids whose app writes a pause holds: every live member of the shared gate."""
        if self.shared is None:
            return [os.getpid()]
        return self.shared.covered()

    def _depth(self) -> int:
        return int(getattr(self._local, "depth", 0))

    def paused(self) -> bool:
        """Whether app writes are held back now (a lease that ran out does not count)."""
        return self._paused_until is not None and time.monotonic() < self._paused_until

    @contextlib.contextmanager
    def app_call(self, write: bool) -> Iterator[None]:
        """Run one app call through the gate (waits while an agent op runs or writes are paused)."""
        if self._depth():
            yield
            return
        with self._cond:
            while self._exclusive or self._waiting or (write and self.paused()):
                until = self._paused_until if write and self.paused() else None
                self._cond.wait(None if until is None else until - time.monotonic())
            if write and self._paused_until is not None:  # the lease ran out: never stop the app
                logger.warning("memsync agent: pause lease ran out; app writes go on")
                self._paused_until = None
            self._calls += 1
            self._writes += write
        self._local.depth = 1
        shared = self.shared if write else None
        try:
            if shared is not None:
                shared.enter_write()  # waits while a pause holds the app's other processes
            try:
                yield
            finally:
                if shared is not None:
                    shared.exit_write()
        finally:
            self._local.depth = 0
            with self._cond:
                self._calls -= 1
                self._writes -= write
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(
        self, timeout_s: float = WAIT_FOR_APP_S, hold_s: float = HOLD_NEW_CALLS_S
    ) -> Iterator[None]:
        """Run an agent op alone: wait for in-flight app calls, hold new ones back.

        New app calls are held back for ``hold_s`` at most: behind a slow app call
        (an LLM's answer), the op then waits for a moment with no app call without holding
        the app's other threads.

        Raises:
            AgentRequestError: ("busy") app calls did not finish within ``timeout_s``.
        """
        started = time.monotonic()
        deadline, hold_until = started + timeout_s, started + min(hold_s, timeout_s)
        with self._cond:
            self._waiting += 1  # new app calls wait behind this op, for hold_s at most
            holding = True
            try:
                while self._exclusive or self._calls:
                    now = time.monotonic()
                    if holding and now >= hold_until:  # a slow app call: let the others go on
                        holding = False
                        self._waiting -= 1
                        self._cond.notify_all()
                    left = deadline - now
                    if left <= 0:
                        raise AgentRequestError(
                            "busy", f"app calls still running after {timeout_s} s"
                        )
                    self._cond.wait(min(left, hold_until - now) if holding else left)
                self._exclusive = True
            finally:
                if holding:
                    self._waiting -= 1
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()

    def pause(
        self, lease_s: float, timeout_s: float = WAIT_FOR_APP_S, *, keep_start: bool = False
    ) -> float:
        """Hold back new app writes for ``lease_s`` seconds; return once in-flight writes ended.

        In this process first, then (``shared``) in every process of the app. ``keep_start``:
        a renewal; ``resume`` reports the hold since the first pause. Returns the seconds
        waited for in-flight writes. Raises AgentRequestError ("busy") and resumes when they
        did not end within ``timeout_s``.
        """
        started = time.monotonic()
        with self._cond:
            renewal = keep_start and self._paused_until is not None
            self._paused_until = started + lease_s
            self._paused_at = self._paused_at if renewal else started
            self.lease_ran_out = False
            while self._writes:
                left = started + timeout_s - time.monotonic()
                if left <= 0:
                    self._paused_until = None
                    self._cond.notify_all()
                    raise AgentRequestError("busy", f"app writes still running after {timeout_s} s")
                self._cond.wait(left)
        if self.shared is not None:
            try:
                left = started + lease_s - time.monotonic()
                self.shared.pause(left, started + timeout_s - time.monotonic())
            except BaseException:
                with self._cond:
                    self._paused_until = None
                    self._cond.notify_all()
                raise
        return time.monotonic() - started

    def resume(self) -> float | None:
        """Let app writes go on; return how long they were held (seconds), None if not paused.

        A lease that ran out counts as held only up to its end (``lease_ran_out`` tells).
        """
        if self.shared is not None:
            self.shared.resume()
        with self._cond:
            if self._paused_until is None:
                return None
            now = time.monotonic()
            self.lease_ran_out = now >= self._paused_until
            held = min(now, self._paused_until) - self._paused_at
            self._paused_until = None
            self._cond.notify_all()
        return held


def gated(gate: WriteGate, method: Callable[..., Any], write: bool) -> Callable[..., Any]:
    """``method`` wrapped to pass ``gate`` (as a write when ``write``)."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with gate.app_call(write):
            return method(*args, **kwargs)

    return call


GATE_ATTRIBUTE = "_memsync_agent_gate"


def gate_of(memory: Any) -> WriteGate | None:
    """The gate ``wrap_memory`` wrapped ``memory`` with (inherited across ``fork``), or None."""
    gate = getattr(memory, GATE_ATTRIBUTE, None)
    return gate if isinstance(gate, WriteGate) else None


def wrap_memory(memory: Any, gate: WriteGate) -> None:
    """Wrap the Memory's public methods (``WRITES``, ``READS``) with ``gate``, in place (once)."""
    if gate_of(memory) is gate:
        return
    setattr(memory, GATE_ATTRIBUTE, gate)
    for name in (*WRITES, *READS):
        if callable(getattr(memory, name, None)):
            setattr(memory, name, gated(gate, getattr(memory, name), name in WRITES))
