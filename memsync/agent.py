"""memsync's agent inside the app: maintenance writes through the app's own ``mem0.Memory``.

Embedded Qdrant allows one process, and the app holds its store for life, so memsync cannot
write it while the app runs. Two lines in the app, after it builds its ``Memory``::

    from memsync.agent import attach
    attach(memory)

start one daemon thread serving a Unix socket (``default_socket_path``) on which memsync asks
the app's own ``Memory`` to delete, update, put back points, repair entity links, and to pause
the app's writes for an exact capture. This module imports only the standard library; it calls
the ``Memory`` it is given (mem0ai 2.2.1's ``Memory``: ``add``/``update``/``delete``/
``delete_all``/``reset`` are writes, ``get``/``get_all``/``search``/``history`` reads).

**Protocol 1.** One JSON object per line (UTF-8, newline-terminated, at most
``MAX_REQUEST_BYTES``), never pickle. Request ``{"v": 1, "id": any, "op": str, "args": {...}}``;
reply ``{"v": 1, "id": same, "ok": true, "result": ...}`` or
``{"v": 1, "id": same, "ok": false, "error": {"type": str, "message": str}}`` (types:
``bad-request``, ``refused``, ``failed``, ``busy``). Ops: ``hello``, ``get``, ``delete``,
``update``, ``put_back``, ``relink_entity``, ``pause``, ``resume``. A bad request gets an error
reply; the app is never disturbed. Peers are checked with ``SO_PEERCRED``: root, the app's uid,
``allow_uids``, or a primary gid in ``allow_gids``; others get one ``refused`` reply.

**The write gate.** ``attach`` wraps the Memory's public methods (instance attributes shadow
the class's). App calls run as before, concurrently; an agent operation waits for in-flight app
calls, runs alone, and lets them go on (milliseconds per memory). ``pause`` makes the app's next
writes wait (in-flight ones finish first) until ``resume``, the pausing connection closing, or
the lease (at most ``lease_max_s`` seconds) running out: a killed memsync never stops the app.

**Cost to the app.** One thread waiting in ``select`` (0.5 s timeout), a few KB per connection,
one uncontended lock per Memory call (about a microsecond); nothing runs when memsync is idle.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import selectors
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

PROTOCOL = 1
SOCKET_NAME = "memsync-agent.sock"
MAX_REQUEST_BYTES = 4 * 1024 * 1024
IDLE_TIMEOUT_S = 60.0
WAIT_FOR_APP_S = 30.0  # an agent op or a pause waits this long for in-flight app calls
WRITES = ("add", "update", "delete", "delete_all", "reset")
READS = ("get", "get_all", "search", "history")

logger = logging.getLogger("memsync.agent")


class AgentRequestError(Exception):
    """A request the agent answers with an error reply (``type``: bad-request, failed, busy)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def default_socket_path(environ: dict[str, str] | None = None) -> Path:
    """Where ``attach`` listens when given no path. Pure (reads ``environ``).

    ``$MEMSYNC_AGENT_SOCKET``; else ``$RUNTIME_DIRECTORY/memsync-agent.sock`` (systemd's
    ``RuntimeDirectory=``, first entry); else ``$XDG_RUNTIME_DIR/memsync-agent.sock``; else
    ``$MEM0_DIR/memsync-agent.sock`` (``~/.mem0`` when unset, mem0's default).
    """
    env = dict(os.environ if environ is None else environ)
    if env.get("MEMSYNC_AGENT_SOCKET"):
        return Path(env["MEMSYNC_AGENT_SOCKET"])
    if env.get("RUNTIME_DIRECTORY"):
        return Path(env["RUNTIME_DIRECTORY"].split(":")[0]) / SOCKET_NAME
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / SOCKET_NAME
    return Path(env.get("MEM0_DIR") or Path.home() / ".mem0") / SOCKET_NAME


class WriteGate:
    """Serialises the agent's operations with the app's Memory calls; pauses app writes.

    App calls share the gate (as they share the Memory today); ``exclusive`` waits for them to
    finish and holds new ones back; ``pause`` holds back new writes only. Re-entrant per
    thread: a Memory method that calls another goes through once.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._local = threading.local()
        self._calls = 0
        self._writes = 0
        self._exclusive = False
        self._waiting = 0
        self._paused_until: float | None = None
        self._paused_at = 0.0
        self.lease_ran_out = False

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
                until = self._paused_until
                holding = write and until is not None and self.paused()
                self._cond.wait(until - time.monotonic() if holding and until else None)
            if write and self._paused_until is not None:  # the lease ran out: never stop the app
                logger.warning("memsync agent: pause lease ran out; app writes go on")
                self._paused_until = None
            self._calls += 1
            self._writes += write
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cond:
                self._calls -= 1
                self._writes -= write
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self, timeout_s: float = WAIT_FOR_APP_S) -> Iterator[None]:
        """Run an agent op alone: wait for in-flight app calls, hold new ones back.

        Raises:
            AgentRequestError: ("busy") app calls did not finish within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._waiting += 1
            try:
                while self._exclusive or self._calls:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise AgentRequestError(
                            "busy", f"app calls still running after {timeout_s} s"
                        )
                    self._cond.wait(left)
                self._exclusive = True
            finally:
                self._waiting -= 1
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()

    def pause(self, lease_s: float, timeout_s: float = WAIT_FOR_APP_S) -> float:
        """Hold back new app writes for ``lease_s`` seconds; return once in-flight writes ended.

        Returns the seconds waited for in-flight writes. Raises AgentRequestError ("busy")
        and resumes when they did not end within ``timeout_s``.
        """
        started = time.monotonic()
        with self._cond:
            self._paused_until = started + lease_s
            self._paused_at = started
            self.lease_ran_out = False
            while self._writes:
                left = started + timeout_s - time.monotonic()
                if left <= 0:
                    self._paused_until = None
                    self._cond.notify_all()
                    raise AgentRequestError("busy", f"app writes still running after {timeout_s} s")
                self._cond.wait(left)
        return time.monotonic() - started

    def resume(self) -> float | None:
        """Let app writes go on; return how long they were held (seconds), None if not paused.

        A lease that ran out counts as held only up to its end (``lease_ran_out`` tells).
        """
        with self._cond:
            if self._paused_until is None:
                return None
            now = time.monotonic()
            self.lease_ran_out = now >= self._paused_until
            held = min(now, self._paused_until) - self._paused_at
            self._paused_until = None
            self._cond.notify_all()
        return held


def _gated(gate: WriteGate, method: Callable[..., Any], write: bool) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with gate.app_call(write):
            return method(*args, **kwargs)

    return call


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _peer(connection: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the peer process, from ``SO_PEERCRED`` (Linux)."""
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def _text_hash(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # noqa: S324 - mem0's own payload hash


@dataclasses.dataclass(eq=False)
class _Peer:
    """One connection: its socket, peer pid, unread bytes, last activity (monotonic seconds)."""

    connection: socket.socket
    pid: int
    seen: float
    buffer: bytearray = dataclasses.field(default_factory=bytearray)
    oversized: bool = False
    dropped: int = 0


class Agent:
    """The agent serving one app's ``Memory`` on a Unix socket. Built by ``attach`` only."""

    def __init__(
        self,
        memory: Any,
        path: Path,
        *,
        allow_uids: Sequence[int] = (),
        allow_gids: Sequence[int] = (),
        lease_max_s: float = 60.0,
    ) -> None:
        self.memory = memory
        self.path = path
        self.gate = WriteGate()
        self.allow_uids = {0, os.getuid(), *allow_uids}
        self.allow_gids = set(allow_gids)
        self.lease_max_s = lease_max_s
        self._stopping = threading.Event()
        self._server = self._listen()
        self._inode = os.stat(path).st_ino
        self._entities_touched = False
        self._current: _Peer | None = None
        self._pause_owner: _Peer | None = None
        for name in (*WRITES, *READS):
            if callable(getattr(memory, name, None)):
                setattr(memory, name, _gated(self.gate, getattr(memory, name), name in WRITES))
        close = getattr(memory, "close", None)
        if callable(close):

            def close_with_agent(*args: Any, **kwargs: Any) -> Any:
                self.close()
                return close(*args, **kwargs)

            memory.close = close_with_agent
        self.thread = threading.Thread(target=self._serve, name="memsync-agent", daemon=True)
        self.thread.start()
        atexit.register(self.close)

    # --- socket ------------------------------------------------------------------------------

    def _listen(self) -> socket.socket:
        """Bind the socket (mode 0600, or 0660 with group ``allow_gids[0]``); replace a stale one.

        Raises:
            RuntimeError: another live agent answers on the path, or a non-socket file is there.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() or self.path.is_symlink():
            if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                raise RuntimeError(f"memsync agent: {self.path} exists and is not a socket")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(self.path))
            except OSError:
                self.path.unlink()  # a socket nobody listens on: left by a crashed app
            else:
                raise RuntimeError(f"memsync agent: another process serves {self.path}")
            finally:
                probe.close()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.path))  # umask applies: never writable by others before the chmod
        mode = 0o600
        if self.allow_gids:
            try:
                os.chown(self.path, -1, sorted(self.allow_gids)[0])
                mode = 0o660
            except OSError as error:
                logger.warning("memsync agent: cannot give %s to group: %s", self.path, error)
        os.chmod(self.path, mode)
        server.listen(8)
        server.settimeout(0.5)
        return server

    def close(self) -> None:
        """Stop serving, resume app writes, remove the socket (if it is still ours). Idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.gate.resume()
        with contextlib.suppress(OSError):
            self._server.close()
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:
                self.path.unlink()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout=2.0)

    def _serve(self) -> None:
        """Serve every connection from this one thread (``selectors``), until ``close``."""
        selector = selectors.DefaultSelector()
        self._server.setblocking(False)
        selector.register(self._server, selectors.EVENT_READ, None)
        peers: list[_Peer] = []
        try:
            while not self._stopping.is_set():
                for key, _ in selector.select(timeout=0.5):
                    if key.data is None:
                        self._accept(selector, peers)
                    else:
                        self._readable(selector, peers, key.data)
                now = time.monotonic()
                for peer in [p for p in peers if now - p.seen > IDLE_TIMEOUT_S]:
                    self._drop(selector, peers, peer)
        except Exception:  # noqa: BLE001 - nothing from a peer may reach the app
            logger.exception("memsync agent: stopped serving")
        finally:
            for peer in list(peers):
                self._drop(selector, peers, peer)
            selector.close()

    def _accept(self, selector: selectors.BaseSelector, peers: list[_Peer]) -> None:
        try:
            connection, _ = self._server.accept()
        except OSError:
            return
        connection.settimeout(5.0)  # sends; reads happen only when select says readable
        pid, uid, gid = _peer(connection)
        if uid not in self.allow_uids and gid not in self.allow_gids:
            logger.warning("memsync agent: refused peer pid %s uid %s gid %s", pid, uid, gid)
            self._reply(connection, None, error=("refused", f"uid {uid} gid {gid} is not allowed"))
            connection.close()
            return
        peer = _Peer(connection=connection, pid=pid, seen=time.monotonic())
        peers.append(peer)
        selector.register(connection, selectors.EVENT_READ, peer)

    def _drop(self, selector: selectors.BaseSelector, peers: list[_Peer], peer: _Peer) -> None:
        """Close a connection; resume app writes if it was the one that paused them."""
        if self._pause_owner is peer and self.gate.resume() is not None:
            logger.info("memsync agent: pausing connection closed; app writes resumed")
        if self._pause_owner is peer:
            self._pause_owner = None
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(peer.connection)
        with contextlib.suppress(ValueError):
            peers.remove(peer)
        with contextlib.suppress(OSError):
            peer.connection.close()

    def _readable(self, selector: selectors.BaseSelector, peers: list[_Peer], peer: _Peer) -> None:
        """Read what a peer sent; answer each complete line in order."""
        try:
            data = peer.connection.recv(65536)
        except OSError:
            data = b""
        if not data:
            if peer.oversized:  # the peer stopped sending inside an oversized request
                message = f"request over {MAX_REQUEST_BYTES} bytes"
                self._reply(peer.connection, None, error=("bad-request", message))
            self._drop(selector, peers, peer)
            return
        peer.seen = time.monotonic()
        peer.buffer += data
        while not peer.oversized and b"\n" in peer.buffer:
            line, _, rest = bytes(peer.buffer).partition(b"\n")
            peer.buffer = bytearray(rest)
            if len(line) >= MAX_REQUEST_BYTES:
                peer.oversized = True
                break
            self._current = peer
            self._answer(peer.connection, line, peer.pid)
        if len(peer.buffer) >= MAX_REQUEST_BYTES:
            peer.oversized = True
        if peer.oversized:  # drop bytes to the end of the line, then answer and close
            peer.dropped += len(peer.buffer)
            ended = b"\n" in peer.buffer
            peer.buffer.clear()
            if ended or peer.dropped > 16 * MAX_REQUEST_BYTES:
                logger.warning(
                    "memsync agent: request over %s bytes from pid %s", MAX_REQUEST_BYTES, peer.pid
                )
                message = f"request over {MAX_REQUEST_BYTES} bytes"
                self._reply(peer.connection, None, error=("bad-request", message))
                self._drop(selector, peers, peer)

    def _answer(self, connection: socket.socket, line: bytes, pid: int) -> None:
        request_id = None
        started = time.monotonic()
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise AgentRequestError("bad-request", "a request is a JSON object")
            request_id = request.get("id")
            if request.get("v") != PROTOCOL:
                raise AgentRequestError(
                    "bad-request", f"protocol {request.get('v')!r}; this agent speaks {PROTOCOL}"
                )
            op, args = request.get("op"), request.get("args") or {}
            handler = self._handlers().get(op) if isinstance(op, str) else None
            if handler is None or not isinstance(args, dict):
                raise AgentRequestError("bad-request", f"unknown op {op!r} or args not an object")
            result = handler(**args)
        except AgentRequestError as error:
            logger.warning("memsync agent: %s from pid %s: %s", error.kind, pid, error)
            self._reply(connection, request_id, error=(error.kind, str(error)))
            return
        except (ValueError, TypeError) as error:
            logger.warning("memsync agent: bad request from pid %s: %s", pid, error)
            self._reply(
                connection, request_id, error=("bad-request", f"{type(error).__name__}: {error}")
            )
            return
        except Exception as error:  # noqa: BLE001 - the op failed inside mem0: report it
            logger.warning("memsync agent: %s failed: %s: %s", op, type(error).__name__, error)
            self._reply(
                connection, request_id, error=("failed", f"{type(error).__name__}: {error}")
            )
            return
        logger.info(
            "memsync agent: %s from pid %s in %.1f ms", op, pid, (time.monotonic() - started) * 1000
        )
        self._reply(connection, request_id, result=result)

    @staticmethod
    def _reply(
        connection: socket.socket,
        request_id: Any,
        result: Any = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        document: dict[str, Any] = {"v": PROTOCOL, "id": request_id, "ok": error is None}
        if error is None:
            document["result"] = result
        else:
            document["error"] = {"type": error[0], "message": error[1]}
        with contextlib.suppress(OSError):
            connection.sendall(json.dumps(document, default=str).encode() + b"\n")

    # --- operations ---------------------------------------------------------------------------

    def _handlers(self) -> dict[str, Callable[..., Any]]:
        return {
            "hello": self.op_hello,
            "get": self.op_get,
            "delete": self.op_delete,
            "update": self.op_update,
            "put_back": self.op_put_back,
            "relink_entity": self.op_relink_entity,
            "pause": self.op_pause,
            "resume": self.op_resume,
        }

    def op_hello(self) -> dict[str, Any]:
        """Who serves: protocol, pid, uid, versions, the store paths and collection it holds."""
        config = getattr(self.memory, "config", None)
        store = getattr(getattr(config, "vector_store", None), "config", None)
        path = getattr(store, "path", None)
        history = getattr(config, "history_db_path", None)
        return {
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
            "mem0": _version("mem0ai"),
            "qdrant_client": _version("qdrant-client"),
            "memsync": _version("memsync"),
            "vector_store": {
                "provider": getattr(getattr(config, "vector_store", None), "provider", None),
                "path": str(Path(path).resolve()) if path else None,
                "collection": getattr(store, "collection_name", None),
            },
            "history_db_path": str(Path(history).resolve()) if history else None,
            "paused": self.gate.paused(),
        }

    def _live_payload(self, memory_id: str) -> dict[str, Any] | None:
        current = self.memory.vector_store.get(vector_id=memory_id)
        return None if current is None else dict(current.payload or {})

    def op_get(self, memory_id: str) -> dict[str, Any] | None:
        """The live point's payload from the app's own store, or None."""
        with self.gate.exclusive():
            return self._live_payload(str(memory_id))

    def op_delete(self, memory_id: str) -> dict[str, bool]:
        """``Memory.delete`` (point, DELETE row, entity links); ``deleted`` False when no point."""
        with self.gate.exclusive():
            if not self._entities_touched:
                with contextlib.suppress(Exception):  # mem0ai 2.2.1 cleans links only once touched
                    _ = self.memory.entity_store
                self._entities_touched = True
            if self._live_payload(str(memory_id)) is None:
                return {"deleted": False}
            self.memory.delete(str(memory_id))
            return {"deleted": True}

    def op_update(
        self, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None
    ) -> dict[str, bool]:
        """``Memory.update`` of the text (re-embeds) or metadata; False when settled already.

        Raises AgentRequestError ("failed") when the memory has no point and text was given.
        """
        if (text is None) == (metadata is None):
            raise AgentRequestError("bad-request", "update takes exactly one of text, metadata")
        with self.gate.exclusive():
            payload = self._live_payload(str(memory_id))
            if payload is None:
                if text is not None:
                    raise AgentRequestError("failed", f"memory {memory_id} has no point")
                return {"updated": False}
            if text is not None:
                if payload.get("data") == text and payload.get("hash") == _text_hash(text):
                    return {"updated": False}
                self.memory.update(str(memory_id), str(text))
            else:
                if not isinstance(metadata, dict):
                    raise AgentRequestError("bad-request", "metadata must be an object")
                self.memory.update(str(memory_id), metadata=dict(metadata))
            return {"updated": True}

    def op_put_back(
        self, point_id: str, vector: list[float], payload: dict[str, Any]
    ) -> dict[str, bool]:
        """Insert a lost point with its id, vector and payload (``vector_store.insert``)."""
        if not isinstance(vector, list) or not all(isinstance(x, int | float) for x in vector):
            raise AgentRequestError("bad-request", "vector must be a list of numbers")
        if not isinstance(payload, dict):
            raise AgentRequestError("bad-request", "payload must be an object")
        with self.gate.exclusive():
            if self._live_payload(str(point_id)) is not None:
                return {"inserted": False}
            self.memory.vector_store.insert(
                vectors=[[float(x) for x in vector]], ids=[str(point_id)], payloads=[payload]
            )
            return {"inserted": True}

    def op_relink_entity(self, entity_id: str, remaining: list[str]) -> dict[str, bool]:
        """Set an entity's ``linked_memory_ids``; delete it when ``remaining`` is empty."""
        if not isinstance(remaining, list):
            raise AgentRequestError("bad-request", "remaining must be a list of memory ids")
        with self.gate.exclusive():
            store = self.memory.entity_store
            if store.get(vector_id=str(entity_id)) is None:
                return {"changed": False}
            if remaining:
                store.update(
                    vector_id=str(entity_id),
                    vector=None,
                    payload={"linked_memory_ids": [str(m) for m in remaining]},
                )
            else:
                store.delete(vector_id=str(entity_id))
            return {"changed": True}

    def op_pause(self, lease_s: float) -> dict[str, float]:
        """Hold back app writes (in-flight ones finish first) for at most ``lease_max_s``."""
        if not isinstance(lease_s, int | float) or lease_s <= 0:
            raise AgentRequestError("bad-request", "lease_s must be a positive number")
        lease = min(float(lease_s), self.lease_max_s)
        waited = self.gate.pause(lease)
        self._pause_owner = self._current
        logger.info("memsync agent: app writes paused (lease %.1f s)", lease)
        return {"lease_s": lease, "waited_s": round(waited, 6)}

    def op_resume(self) -> dict[str, Any]:
        """Let app writes go on: ``held_s`` (None when they were not paused), ``lease_ran_out``.

        ``lease_ran_out`` true means app writes went on before this resume: whatever memsync
        did under the pause was not fully quiesced.
        """
        held = self.gate.resume()
        self._pause_owner = None
        ran_out = held is None or self.gate.lease_ran_out
        if held is not None:
            logger.info("memsync agent: app writes resumed after %.3f s", held)
        return {"held_s": None if held is None else round(held, 6), "lease_ran_out": ran_out}


def attach(
    memory: Any,
    socket_path: str | os.PathLike[str] | None = None,
    *,
    allow_uids: Sequence[int] = (),
    allow_gids: Sequence[int] = (),
    lease_max_s: float = 60.0,
) -> Agent:
    """Serve ``memory`` to memsync on a Unix socket from a daemon thread; return the agent.

    Args:
        memory: the app's ``mem0.Memory`` (built once, used for the app's life).
        socket_path: where to listen (default: ``default_socket_path()``).
        allow_uids: peers allowed besides root and the app's own uid.
        allow_gids: peers allowed by primary gid; the socket becomes mode 0660, group the first.
        lease_max_s: the longest a pause may hold app writes (seconds).

    Effects: wraps the Memory's public methods (the write gate), creates the socket (mode
    0600 unless ``allow_gids``), starts one daemon thread, removes the socket at
    ``Memory.close()`` or interpreter exit.

    Raises:
        RuntimeError: another agent already serves the path, or a non-socket file is there.
        OSError: the socket cannot be created (its directory is not writable).
    """
    path = Path(socket_path) if socket_path is not None else default_socket_path()
    agent = Agent(
        memory, path, allow_uids=allow_uids, allow_gids=allow_gids, lease_max_s=lease_max_s
    )
    logger.info("memsync agent: serving %s (protocol %s)", path, PROTOCOL)
    return agent
