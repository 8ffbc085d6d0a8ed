"""A prefork app for the tests and the bench: a WSGI app (gunicorn) and an ASGI app (uvicorn).

Environment (the test sets it before it starts the server):

* ``MEMSYNC_TEST_ROOT``: the deployment (``memsync.demo.deployment.Paths.at``; pgvector).
* ``MEMSYNC_AGENT_SOCKET``: where ``attach`` serves (the first process to attach serves it).
* ``MEMSYNC_TEST_WRITES``: a directory; each worker appends one line per write to
  ``writes-<pid>.log``: ``<start> <end>`` (``time.monotonic()``, one clock for every process).
* ``MEMSYNC_TEST_INTERVAL``: seconds between two writes of a worker (default 0.01).
* ``MEMSYNC_TEST_ATTACH``: ``1`` (default) attaches the agent, ``0`` does not (the bench's
  baseline).

gunicorn ``--preload`` imports this module once in the master: ``wsgi`` builds the Memory and
attaches the agent there, before the workers fork (the attacker's set-up). Each forked worker
opens its own PostgreSQL pool and history connection (as a preloading app must: connections do
not survive ``fork``) and writes through the inherited, gated Memory from a thread. uvicorn
``--workers`` spawns fresh interpreters: each imports ``asgi``, builds its own Memory and attaches
(the first serves the socket, the others join the gate). ``GET /`` answers the worker's pid.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from memsync.demo import deployment as build

ROOT = Path(os.environ.get("MEMSYNC_TEST_ROOT", "."))
WRITES = Path(os.environ.get("MEMSYNC_TEST_WRITES", "."))
INTERVAL_S = float(os.environ.get("MEMSYNC_TEST_INTERVAL", "0.01"))
ATTACH = os.environ.get("MEMSYNC_TEST_ATTACH", "1") == "1"
_INHERITED: list[Any] = []  # the master's connections: a worker closing them would close his


def _memory() -> Any:
    memory = build.open_memory(build.Paths.at(ROOT), embedder="memsync_hash")
    if ATTACH:
        from memsync.agent import attach

        attach(memory)  # MEMSYNC_AGENT_SOCKET
    return memory


def _write_loop(memory: Any) -> None:
    """Add a memory every ``INTERVAL_S``, logging each write's start and end."""
    pid = os.getpid()
    log = (WRITES / f"writes-{pid}.log").open("a", buffering=1)
    n = 0
    while True:
        n += 1
        started = time.monotonic()
        try:
            memory.add(f"worker {pid} note {n}", user_id=f"w{pid}", infer=False)
        except Exception as error:  # noqa: BLE001 - counted by the test, never stops the loop
            log.write(f"error {type(error).__name__}: {error}\n")
        else:
            log.write(f"{started:.6f} {time.monotonic():.6f}\n")
        time.sleep(INTERVAL_S)


def _reconnect(memory: Any) -> None:
    """In a forked worker: a PostgreSQL pool and a history connection of its own."""
    from psycopg_pool import ConnectionPool

    store = memory.vector_store
    _INHERITED.extend([store.connection_pool, memory.db.connection])  # never closed here
    store.connection_pool = ConnectionPool(
        conninfo=str(build.Paths.at(ROOT).pg_url), min_size=1, max_size=4, open=True
    )
    memory.db.connection = sqlite3.connect(memory.db.db_path, check_same_thread=False)


def _start_writing(memory: Any) -> None:
    threading.Thread(target=_write_loop, args=(memory,), daemon=True, name="writes").start()


class _Wsgi:
    """gunicorn --preload: the Memory and the agent in the master; workers write."""

    def __init__(self) -> None:
        self.memory = _memory()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        _reconnect(self.memory)
        _start_writing(self.memory)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(os.getpid()).encode()]


class _Asgi:
    """uvicorn --workers: each spawned worker builds its Memory and attaches at startup."""

    def __init__(self) -> None:
        self.memory: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.memory = _memory()
                    _start_writing(self.memory)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(os.getpid()).encode()})


def __getattr__(name: str) -> Any:  # build only the app the server asks for
    if name == "wsgi":
        globals()["wsgi"] = _Wsgi()
        return globals()["wsgi"]
    if name == "asgi":
        globals()["asgi"] = _Asgi()
        return globals()["asgi"]
    raise AttributeError(name)
