"""The agent's socket server: one thread, every connection (``selectors``), JSON lines."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import selectors
import socket
import stat
import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .gate import WriteGate, wrap_memory
from .ops import Operations
from .protocol import (
    IDLE_TIMEOUT_S,
    MAX_REQUEST_BYTES,
    AgentRequestError,
    parse_request,
    reply_bytes,
)

logger = logging.getLogger("memsync.agent")


def _peer(connection: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the peer process, from ``SO_PEERCRED`` (Linux)."""
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


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
    """The agent serving one app's ``Memory`` on a Unix socket. Built by ``attach`` only.

    Wraps the Memory's public methods with the write gate, binds the socket, and serves it from
    one daemon thread until ``close`` (also run at ``Memory.close()`` and interpreter exit).
    """

    def __init__(
        self,
        memory: Any,
        path: Path,
        *,
        allow_uids: Sequence[int] = (),
        allow_gids: Sequence[int] = (),
        lease_max_s: float = 60.0,
        gate: WriteGate | None = None,
    ) -> None:
        self.memory = memory
        self.path = path
        self.gate = gate or WriteGate()
        self._pid = os.getpid()  # a forked child inherits this object but serves nothing
        self.allow_uids = {0, os.getuid(), *allow_uids}
        self.allow_gids = set(allow_gids)
        self.ops = Operations(memory, self.gate, lease_max_s)
        self._stopping = threading.Event()
        self._server = self._listen()
        self._inode = os.stat(path).st_ino
        self._current: _Peer | None = None
        self._pause_owner: _Peer | None = None
        self._release_owner: _Peer | None = None
        self._reopen_failed = False
        wrap_memory(memory, self.gate)
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
        if self._stopping.is_set() or os.getpid() != self._pid:
            return  # in a forked child: the parent serves, its socket and pause stay
        self._stopping.set()
        self._reopen_history("the agent closes")
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
                    try:
                        if key.data is None:
                            self._accept(selector, peers)
                        else:
                            self._readable(selector, peers, key.data)
                    except Exception:  # noqa: BLE001 - one bad peer never stops the agent
                        logger.exception("memsync agent: dropped a connection after an error")
                        if key.data is not None:
                            self._drop(selector, peers, key.data)
                if self.ops.history.released is not None and not self.gate.paused():
                    self._reopen_history("the pause ended")  # lease ran out, memsync gone
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
        """Close a connection; reopen history and resume app writes if it released or paused."""
        if peer in (self._pause_owner, self._release_owner):
            self._reopen_history(f"the connection of pid {peer.pid} closed")
        if self._release_owner is peer:
            self._release_owner = None
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

    def _reopen_history(self, why: str) -> None:
        """Give the app its history back when memsync released it and went away. Never raises."""
        if self.ops.history.released is None:
            return
        try:
            self.ops.history.reopen()
        except Exception as error:  # noqa: BLE001 - retried each tick; the app must not stop
            if not self._reopen_failed:
                logger.warning("memsync agent: history not reopened after %s: %s", why, error)
            self._reopen_failed = True
            return
        self._reopen_failed = False
        self._release_owner = None
        logger.warning("memsync agent: history reopened because %s", why)

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
        """Answer one request line: parse and check it, run its op, reply (never raises)."""
        started = time.monotonic()
        try:
            request_id, op, call = self._parse(line)
        except AgentRequestError as error:
            logger.warning("memsync agent: %s from pid %s: %s", error.kind, pid, error)
            self._reply(connection, None, error=(error.kind, str(error)))
            return
        try:
            result = call()
            if op == "pause":
                self._pause_owner = self._current
            elif op == "resume":
                self._pause_owner = None
            elif op == "history_release":
                self._release_owner = self._current
            elif op == "history_reopen":
                self._release_owner = None
        except AgentRequestError as error:
            logger.warning("memsync agent: %s %s from pid %s: %s", op, error.kind, pid, error)
            self._reply(connection, request_id, error=(error.kind, str(error)))
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

    def _parse(self, line: bytes) -> tuple[Any, str, Any]:
        """``(id, op, call)`` of a request line (``protocol.parse_request``)."""
        return parse_request(line, self.ops.handlers())

    @staticmethod
    def _reply(
        connection: socket.socket,
        request_id: Any,
        result: Any = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        with contextlib.suppress(OSError):
            connection.sendall(reply_bytes(request_id, result, error))
