"""Routes for a write: memsync picks how to reach the deployment's mem0 while the app may run.

For every write (forget, erase, prune, confirm, reconcile), ``open_writer`` tries in order:

1. **agent**: the store's holder answers on its memsync agent socket (``[app] agent_socket``,
   else the ``memsync-agent.sock`` the holder listens on) and holds this deployment: the writes
   go through the app's own ``Memory`` (``memsync.stores.agent_client.AgentWriter``); an
   agent that refuses memsync, or another process on its socket, is an error (exit 11), never
   a reason to try the next route or queue;
2. **direct**: nobody holds the store: hot journals are rolled back and the one-shot writer,
   a process of the app's own interpreter, builds the app's ``Memory``
   (``memsync.stores.mem0.open_memory``; the interpreter: ``memsync.stores.interpreter``);
3. **window**: ``[app] stop_command`` and ``start_command`` are set: the app is stopped, the
   work runs in the one-shot writer, and the app is started again, always
   (``memsync.routes.window``), within ``[app] max_downtime_s``;
4. none: ``NoRouteError`` (exit 12). forget, erase and prune record the request in the queue
   instead (``memsync.routes.queue``, exit 5); reconcile and confirm exit 12.

Reads never need a route, nor does history-only or file-level work (blanking history rows,
``VACUUM``): SQLite allows it across processes with a busy timeout.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

from memsync.config import Config
from memsync.errors import LockedError
from memsync.routes.window import (
    WINDOW_FILE,
    Taken,
    WindowError,
    WindowOverrunError,
    maintenance_window,
    recover_window,
)
from memsync.stores import app_process, interpreter, mem0
from memsync.stores.agent_client import AgentWriter, find_agent
from memsync.stores.locks import LockHolder
from memsync.stores.vector_store import VectorStore
from memsync.stores.writer import Route, Writer

__all__ = [
    "WINDOW_FILE", "NoRouteError", "Taken", "WindowError", "WindowOverrunError", "open_writer",
    "recover_window", "require_interpreter", "require_writable", "store_free", "would_take",
]  # fmt: skip

logger = structlog.get_logger(__name__)

EXITING_HOLDER_WAIT_S = 2.0
NO_ROUTE_HINT = (
    "attach memsync.agent in the app (memsync running as another user than the app: also set "
    "[app] agent_socket), or set [app] stop_command and start_command, or stop the app and run "
    "again (docs/how-to/maintenance-while-the-app-runs.md); a queued forget, erase or prune is "
    "applied by memsync job apply-pending (memsync pending apply)"
)


class NoRouteError(LockedError):
    """No route can write now: the app holds the store, no agent answers, no window (exit 12)."""


def _holder(store: VectorStore) -> LockHolder | None:
    """The process holding the vector store, other than this one (reads /proc only).

    A holder with no command line is exiting (its memory is gone, its files not yet closed:
    a one-shot writer whose memsync was killed dies with it): waited for, up to 2 s.
    """
    deadline = time.monotonic() + EXITING_HOLDER_WAIT_S
    while True:
        holder = store.holder()
        if holder is None or holder.pid == os.getpid():
            return None
        if holder.cmdline or time.monotonic() >= deadline:
            return holder
        time.sleep(0.05)


def store_free(store: VectorStore) -> bool:
    """Whether no other process holds the vector store (reads /proc only; never locks)."""
    return _holder(store) is None


def would_take(store: VectorStore, config: Config) -> Route | None:
    """The route a write would take now, or None when none would (dry runs). Reads only.

    Raises:
        UnavailableError: the agent that answers holds another deployment, refuses memsync or
            is not this deployment's app (exit 11).
    """
    client = find_agent(store, config)
    if client is not None:
        client.close()
        return "agent"
    if _holder(store) is None:
        return "direct"
    return "window" if config.app.window else None


def require_interpreter(store: VectorStore, config: Config) -> None:
    """Refuse (exit 10) now when the write's route needs the app's interpreter and none is known.

    Called before a safety snapshot or anything else is done. Reads only. An answering agent
    needs none (the app writes); the direct and window routes do.

    Raises:
        ConfigError: (exit 10) see ``interpreter.require``.
        UnavailableError: an agent answers for another deployment, refuses memsync or is not
            this deployment's app.
    """
    _route_interpreter(store, config)


def _route_interpreter(store: VectorStore, config: Config) -> interpreter.AppInterpreter | None:
    """The app's interpreter the write's route will start (refused when unknown); None: agent."""
    client = find_agent(store, config)
    if client is not None:
        client.close()
        return None
    holder = _holder(store)
    if holder is None or config.app.window:
        return interpreter.require(store, config, holder.pid if holder is not None else None)
    return None  # held, no window: the write queues (or the agent route finds it later)


def require_writable(store: VectorStore, config: Config) -> None:
    """Every refusal the write's route would meet, checked before a safety snapshot. Reads only.

    ``require_interpreter``, then, for the direct and window routes, one run of the app's
    interpreter (``app_process.require_loadable``: its mem0ai, plugins, and whether its
    qdrant-client loads the store), so a refused write leaves no snapshot behind. An answering
    agent's app has the store open already.

    Raises:
        ConfigError: (exit 10) as ``require_interpreter`` and ``app_process.app_doctor``.
        UnavailableError: (exit 11) as ``require_interpreter``; the app's qdrant-client
            cannot load the store's ``meta.json`` or a stored point.
    """
    app = _route_interpreter(store, config)
    if app is not None:
        app_process.require_loadable(store, config, app)


@contextmanager
def open_writer(
    store: VectorStore, config: Config, what: str, taken: Taken | None = None
) -> Iterator[Writer]:
    """Yield a ``Writer`` on the first route that can write now (agent, direct, window).

    ``what`` names the work in messages and logs (``"forget"``). A window left open by a
    memsync that was killed is closed first (its ``start_command`` run). ``taken`` (optional)
    receives the route and, for a window, the downtime. The direct and window routes roll back
    hot journals first (``mem0.prepare_for_writing``); the agent route never touches files.

    Raises:
        ConfigError: (exit 10) the direct or window route would write, and the app's
            interpreter is unknown (``interpreter.require``): nothing was touched.
        NoRouteError: (exit 12) the app holds the store, no agent answers, no window is set.
        WindowError: (exit 12) the window could not stop the app or free the store.
        WindowOverrunError: (exit 75) the work overran ``[app] max_downtime_s``.
        UnavailableError: an agent answers for another deployment, refuses memsync or is not
            this deployment's app, or ``start_command`` failed after a window (the app may be
            down).
        LockedError, ConfigError: as ``mem0.open_memory``.
    """
    taken = taken if taken is not None else Taken()
    recover_window(config)
    client = find_agent(store, config)
    if client is not None:
        with client:
            interpreter.learn_from_hello(store, config, client.hello)
            taken.route = "agent"
            logger.info("route_taken", route="agent", what=what)
            yield AgentWriter(client, store, config)
        return
    holder = _holder(store)
    if holder is None:
        app = interpreter.require(store, config)  # refused before anything is touched
        mem0.prepare_for_writing(store, config)
        with mem0.open_memory(store, config, app=app) as writer:
            taken.route = "direct"
            logger.info("route_taken", route="direct", what=what)
            yield writer
        return
    if config.app.window:
        with maintenance_window(store, config, what, taken) as writer:
            yield writer
        return
    raise NoRouteError(
        f"{what}: the app ({holder.describe()}) holds the store "
        f"{store.where}, no memsync agent answers and no maintenance "
        "window is configured",
        NO_ROUTE_HINT,
    )
