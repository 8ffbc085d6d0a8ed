"""The agent's socket server: one thread, every connection (``selectors``), JSON lines."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import resource
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
    FD_HEADROOM,
    IDLE_TIMEOUT_S,
    MAX_BUFFERED_BYTES,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_UID,
    MAX_REQUEST_BYTES,
    READ_ONLY_REQUEST_BYTES,
    REQUEST_DEADLINE_S,
    RESERVED_CONNECTIONS,
    AgentRequestError,
    failure_details,
    parse_request,
    reply_bytes,
)

logger = logging.getLogger("memsync.agent")


SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux 4.13+; Python names it in 3.13?
# What a read-only peer (allow_read_uids / allow_read_gids) may ask: nothing that changes a store
# or holds the app's writes.
READ_OPS = frozenset({"hello", "get", "search", "embed"})


def _peer(connection: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the peer process, from ``SO_PEERCRED`` (Linux)."""
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def _peer_groups(connection: socket.socket, pid: int, gid: int) -> set[int]:
    """Every group of the peer: primary and supplementary (``SO_PEERGROUPS``, else /proc)."""
    for size in (256, 65536):
        try:
            raw = connection.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, size)
        except OSError:
            continue
        count = len(raw) // 4
        return {gid, *struct.unpack(f"{count}I", raw[: count * 4])}
    try:  # an older kernel: the groups the peer has now (it could have changed them since)
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return {gid}
    for line in status.splitlines():
        if line.startswith("Groups:"):
            return {gid, *(int(g) for g in line.split()[1:] if g.isdigit())}
    return {gid}


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def unsafe_directory(directory: Path, owner: int) -> str | None:
    """Why another uid than ``owner`` could replace a socket in ``directory``, or None.

    The directory and every directory above it, and every symbolic link on the way: each
    owned by root or ``owner``, none writable by others without the sticky bit (whoever may
    rename an ancestor may put another directory, and socket, in its place). ``attach``
    refuses such a directory (``owner``: the app's uid); memsync's doctor says so.
    """
    path = Path(os.path.abspath(directory))
    for step in [path, *path.parents]:
        link = os.lstat(step)
        if stat.S_ISLNK(link.st_mode) and link.st_uid not in (0, owner):
            return f"{step} is a symbolic link of uid {link.st_uid}, who could re-point it"
        info = os.stat(step)
        if info.st_uid not in (0, owner):
            return f"{step} belongs to uid {info.st_uid}, who could replace the socket"
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return (
                f"{step} (mode {stat.S_IMODE(info.st_mode):o}) may be written by others "
                "without the sticky bit: anyone could replace the socket; use a directory "
                "only the app's user can write (systemd RuntimeDirectory=)"
            )
    return None


@dataclasses.dataclass(eq=False)
class _Peer:
    """One connection: its socket, peer identity, unread bytes, the clocks that bound it.

    ``seen``: when its last complete request arrived (or it connected); ``line_started``: when
    the first byte of the request now arriving came (None between requests).
    """

    connection: socket.socket
    pid: int
    uid: int
    seen: float
    read_only: bool = False
    buffer: bytearray = dataclasses.field(default_factory=bytearray)
    line_started: float | None = None
    oversized: bool = False
    dropped: int = 0
    outbox: bytearray = dataclasses.field(default_factory=bytearray)
    stalled_since: float | None = None  # replies waiting for the peer to read them since

    @property
    def request_limit(self) -> int:
        """The longest request line this peer may send (bytes)."""
        return READ_ONLY_REQUEST_BYTES if self.read_only else MAX_REQUEST_BYTES


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
        allow_read_uids: Sequence[int] = (),
        allow_read_gids: Sequence[int] = (),
        lease_max_s: float = 60.0,
        max_connections: int = MAX_CONNECTIONS,
        request_deadline_s: float = REQUEST_DEADLINE_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        gate: WriteGate | None = None,
    ) -> None:
        self.memory = memory
        self.path = path
        self.gate = gate or WriteGate()
        self._pid = os.getpid()  # a forked child inherits this object but serves nothing
        self.allow_uids = {0, os.getuid(), *allow_uids}
        self.allow_gids = set(allow_gids)
        self.allow_read_uids = set(allow_read_uids) - self.allow_uids
        self.allow_read_gids = set(allow_read_gids) - self.allow_gids
        self.request_deadline_s = float(request_deadline_s)
        self.idle_timeout_s = float(idle_timeout_s)
        self.max_connections = self._affordable(max(1, int(max_connections)))
        self.ops = Operations(memory, self.gate, lease_max_s)
        self.ops.limits.update(
            max_connections=self.max_connections,
            max_connections_per_uid=min(MAX_CONNECTIONS_PER_UID, self.max_connections),
            max_buffered_bytes=MAX_BUFFERED_BYTES,
            max_request_bytes=MAX_REQUEST_BYTES,
            request_deadline_s=self.request_deadline_s,
            idle_timeout_s=self.idle_timeout_s,
        )
        self._stopping = threading.Event()
        self._buffered = 0
        self._refusals: dict[int, tuple[float, int]] = {}  # uid: (last logged, not logged since)
        self._current: _Peer | None = None
        self._pause_owner: _Peer | None = None
        self._release_owner: _Peer | None = None
        self._reopen_failed = False
        # Why the agent serves nothing (the app runs on): None while it serves.
        self.problem: str | None = None
        self._server = self._listen()
        self._inode = os.stat(path).st_ino if self._server is not None else None
        wrap_memory(memory, self.gate)
        close = getattr(memory, "close", None)
        if callable(close):

            def close_with_agent(*args: Any, **kwargs: Any) -> Any:
                self.close()
                return close(*args, **kwargs)

            memory.close = close_with_agent
        self.thread = threading.Thread(target=self._serve, name="memsync-agent", daemon=True)
        if self._server is not None:
            self.thread.start()
        atexit.register(self.close)

    @property
    def serving(self) -> bool:
        """Whether the agent listens on its socket (False: see ``problem``)."""
        return self._server is not None and not self._stopping.is_set()

    @staticmethod
    def _affordable(wanted: int) -> int:
        """``wanted`` connections, fewer when the app lacks descriptor headroom (logged)."""
        try:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        except (OSError, ValueError):
            return wanted
        if soft == resource.RLIM_INFINITY:
            return wanted
        free = soft - _open_fds()
        # The agent's descriptors: its listening socket, a connection being refused, and one
        # per served connection; the app keeps FD_HEADROOM free beyond them.
        affordable = max(1, min(wanted, free - FD_HEADROOM - 2))
        if affordable < wanted or free - FD_HEADROOM - 2 < 1:
            logger.warning(
                "memsync agent: the app has %s of %s descriptors free (RLIMIT_NOFILE); serving "
                "at most %s connections instead of %s: raise LimitNOFILE",
                free, soft, affordable, wanted,
            )  # fmt: skip
        return affordable

    # --- socket ------------------------------------------------------------------------------

    def _listen(self) -> socket.socket | None:
        """Bind the socket (mode by ``_modes``); None on a problem, ``problem`` saying why.

        Creates missing directories whatever the umask (``_modes``). Serves
        nothing (``problem`` says why, logged as an error) when the directory may be written by
        another uid without the sticky bit, or the path holds a file that is not a socket, a
        socket another live process serves, or one another uid owns.
        """
        try:
            self._make_directory(self.path.parent)
            self.problem = unsafe_directory(self.path.parent, os.getuid()) or self._path_taken()
            shared = os.stat(self.path.parent).st_mode & 0o022
            if self.problem is None and shared:  # sticky (as /tmp): safe, but not private
                logger.warning(
                    "memsync agent: %s may be written by others (sticky): another user can take "
                    "the socket's name first; a directory of the app's own is better "
                    "(systemd RuntimeDirectory=)",
                    self.path.parent,
                )
        except OSError as error:
            self.problem = f"cannot prepare {self.path}: {error}"
        if self.problem is not None:
            logger.error("memsync agent: serving nothing: %s", self.problem)
            return None
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            previous = os.umask(0o177)  # never reachable by others before the chmod below
            try:
                server.bind(str(self.path))
            finally:
                os.umask(previous)
            mode = self._modes()[1]
            if mode == 0o660:
                try:
                    os.chown(self.path, -1, next(iter(self.allow_gids)))
                except OSError as error:
                    mode = 0o600
                    logger.error(
                        "memsync agent: cannot give %s to group %s (%s): only the app's user "
                        "can reach it; make the app's user a member of that group "
                        "(usermod -aG) and restart the app",
                        self.path, next(iter(self.allow_gids)), error,
                    )  # fmt: skip
            os.chmod(self.path, mode)
            server.listen(128)  # waiting connections cost the app no descriptor
        except OSError as error:
            server.close()
            self.problem = f"cannot listen on {self.path}: {error}"
            logger.error("memsync agent: serving nothing: %s", self.problem)
            return None
        server.setblocking(False)
        return server

    def _modes(self) -> tuple[int, int]:
        """(directory, socket) modes: only the app's user; one group; or every allowed peer.

        Peers are always checked by their credentials; the modes only decide who can reach
        the socket: the app's user (0700, 0600), the one ``allow_gids`` group (0750, 0660), or,
        with other uids, several groups or read-only peers, anyone (0711, 0666).
        """
        if self.allow_uids - {0, os.getuid()} or self.allow_read_uids or self.allow_read_gids:
            return 0o711, 0o666
        if len(self.allow_gids) > 1:
            return 0o711, 0o666
        return (0o750, 0o660) if self.allow_gids else (0o700, 0o600)

    def _make_directory(self, directory: Path) -> None:
        """Create ``directory`` and missing parents (``_modes``), whatever the umask."""
        if directory.is_dir():
            return
        self._make_directory(directory.parent)
        mode = self._modes()[0]
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, mode)
            os.chmod(directory, mode)  # the umask may have taken bits away; never added any
            if mode == 0o750:
                try:  # the group's peers reach the socket through it
                    os.chown(directory, -1, next(iter(self.allow_gids)))
                except OSError as error:
                    logger.error(
                        "memsync agent: cannot give %s to group %s (%s): make the app's user a "
                        "member of that group (usermod -aG) and restart the app",
                        directory, next(iter(self.allow_gids)), error,
                    )  # fmt: skip

    def _path_taken(self) -> str | None:
        """Remove a stale socket of ours at the path; say why the path cannot be used, or None."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return None
        if not stat.S_ISSOCK(info.st_mode):
            return f"{self.path} exists and is not a socket; move it aside"
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(2.0)
        try:
            probe.connect(str(self.path))
            pid = _peer(probe)[0]
        except ConnectionRefusedError:
            if info.st_uid != os.getuid():
                return f"{self.path} is a dead socket of uid {info.st_uid}; remove it"
            self.path.unlink()  # nobody listens on our own socket: left by a crashed app
            return None
        except OSError as error:
            return (
                f"{self.path} (uid {info.st_uid}) cannot be probed ({error.strerror or error}): "
                "move it aside"
            )
        finally:
            probe.close()
        return (
            f"another live process serves {self.path} (pid {pid}, uid {info.st_uid}): give "
            "each deployment's app its own socket path (attach(memory, socket_path))"
        )

    def close(self) -> None:
        """Stop serving, resume app writes, remove the socket (if it is still ours). Idempotent."""
        if self._stopping.is_set() or os.getpid() != self._pid:
            return  # in a forked child: the parent serves, its socket and pause stay
        self._stopping.set()
        self._reopen_history("the agent closes")
        self.ops.end_pause()
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.close()
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == self._inode:
                    self.path.unlink()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout=2.0)

    def _serve(self) -> None:
        """Serve every connection from this one thread (``selectors``), until ``close``."""
        assert self._server is not None
        selector = selectors.DefaultSelector()
        peers: list[_Peer] = []
        try:
            selector.register(self._server, selectors.EVENT_READ, None)
            while not self._stopping.is_set():
                for key, mask in selector.select(timeout=0.5):
                    try:
                        if key.data is None:
                            self._accept(selector, peers)
                        elif mask & selectors.EVENT_WRITE:
                            self._writable(selector, peers, key.data)
                        else:
                            self._readable(selector, peers, key.data)
                    except Exception:  # noqa: BLE001 - one bad peer never stops the agent
                        logger.exception("memsync agent: dropped a connection after an error")
                        if key.data is not None:
                            self._drop(selector, peers, key.data)
                if self.ops.history.released is not None and not self.gate.paused():
                    self._reopen_history("the pause ended")  # lease ran out, memsync gone
                self._expire(selector, peers)
        except Exception:  # noqa: BLE001 - nothing from a peer may reach the app
            if not self._stopping.is_set():  # not closed under it
                logger.exception("memsync agent: stopped serving")
        finally:
            for peer in list(peers):
                self._drop(selector, peers, peer)
            selector.close()

    def _expire(self, selector: selectors.BaseSelector, peers: list[_Peer]) -> None:
        """Close connections idle too long, or too slow to finish the request they started."""
        now = time.monotonic()
        for peer in list(peers):
            if (
                peer.stalled_since is not None
                and now - peer.stalled_since > self.request_deadline_s
            ):
                logger.warning(
                    "memsync agent: pid %s read none of its replies for %s s; closed",
                    peer.pid, self.request_deadline_s,
                )  # fmt: skip
                self._drop(selector, peers, peer)
            elif (
                peer.line_started is not None and now - peer.line_started > self.request_deadline_s
            ):
                logger.warning(
                    "memsync agent: request from pid %s unfinished after %s s; closed",
                    peer.pid, self.request_deadline_s,
                )  # fmt: skip
                message = f"request not finished within {self.request_deadline_s:g} s"
                self._reply(peer.connection, None, error=("bad-request", message))
                self._drop(selector, peers, peer)
            elif now - peer.seen > self.idle_timeout_s:
                self._drop(selector, peers, peer)

    def _refusal(self, uid: int, groups: set[int]) -> dict[str, Any]:
        return {
            "peer": {"uid": uid, "gids": sorted(groups)},
            "allowed": {
                "uids": sorted(self.allow_uids),
                "gids": sorted(self.allow_gids),
                "read_uids": sorted(self.allow_read_uids),
                "read_gids": sorted(self.allow_read_gids),
            },
        }

    def _accept(self, selector: selectors.BaseSelector, peers: list[_Peer]) -> None:
        assert self._server is not None
        try:
            connection, _ = self._server.accept()
        except OSError:
            return
        connection.setblocking(False)  # never wait on a peer: replies queue (``_flush``)
        try:
            pid, uid, gid = _peer(connection)
            groups = _peer_groups(connection, pid, gid)
        except OSError:
            connection.close()
            return
        read_only = False
        if uid not in self.allow_uids and not groups & self.allow_gids:
            read_only = uid in self.allow_read_uids or bool(groups & self.allow_read_gids)
            if not read_only:
                self._log_refusal(pid, uid, groups)
                message = (
                    f"uid {uid} (groups {sorted(groups)}) is not allowed by this agent: it allows "
                    f"uids {sorted(self.allow_uids)} and gids {sorted(self.allow_gids)}"
                )
                details = self._refusal(uid, groups)
                self._reply(connection, None, error=("refused", message), details=details)
                connection.close()
                return
        same_uid = sum(1 for p in peers if p.uid == uid)
        own = (0, os.getuid())  # root and the app's user always find a slot: 2 are theirs
        others = sum(1 for p in peers if p.uid not in own)
        reserved = min(RESERVED_CONNECTIONS, self.max_connections - 1)
        if (
            len(peers) >= self.max_connections
            or same_uid >= min(MAX_CONNECTIONS_PER_UID, self.max_connections)
            or (uid not in own and others >= self.max_connections - reserved)
        ):
            message = (
                f"the agent serves {len(peers)} connections ({same_uid} of uid {uid}); at most "
                f"{self.max_connections} ({MAX_CONNECTIONS_PER_UID} per uid): try again shortly"
            )
            self._reply(connection, None, error=("busy", message))
            connection.close()
            return
        peer = _Peer(connection, pid, uid, time.monotonic(), read_only=read_only)
        peers.append(peer)
        selector.register(connection, selectors.EVENT_READ, peer)

    def _log_refusal(self, pid: int, uid: int, groups: set[int]) -> None:
        """One warning per refused uid per second at most (a flood of refusals fills no log)."""
        now = time.monotonic()
        last, quiet = self._refusals.get(uid, (0.0, 0))
        if now - last < 1.0:
            self._refusals[uid] = (last, quiet + 1)
            return
        self._refusals[uid] = (now, 0)
        logger.warning(
            "memsync agent: refused peer pid %s uid %s groups %s%s", pid, uid, sorted(groups),
            f" ({quiet} more refusals of this uid not logged)" if quiet else "",
        )  # fmt: skip

    def _drop(self, selector: selectors.BaseSelector, peers: list[_Peer], peer: _Peer) -> None:
        """Close a connection; reopen history and resume app writes if it released or paused."""
        if peer in (self._pause_owner, self._release_owner):
            self._reopen_history(f"the connection of pid {peer.pid} closed")
        if self._release_owner is peer:
            self._release_owner = None
        if self._pause_owner is peer and self.ops.end_pause() is not None:
            logger.info("memsync agent: pausing connection closed; app writes resumed")
        if self._pause_owner is peer:
            self._pause_owner = None
        self._buffered -= len(peer.buffer)
        peer.buffer = bytearray()  # released now, not when the peer object goes
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
        """Read what a peer sent; answer each complete line in order.

        Unread bytes over all connections stay within ``MAX_BUFFERED_BYTES``: past it, the
        connection holding the most is answered busy and closed.
        """
        try:
            data = peer.connection.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if peer.oversized:  # the peer stopped sending inside an oversized request
                message = f"request over {peer.request_limit} bytes"
                self._reply(peer.connection, None, error=("bad-request", message))
            self._drop(selector, peers, peer)
            return
        now = time.monotonic()
        if peer.oversized:  # drop bytes to the end of the line, then answer and close
            peer.dropped += len(data)
            if b"\n" in data or peer.dropped > 16 * MAX_REQUEST_BYTES:
                self._oversized(selector, peers, peer)
            return
        if peer.line_started is None:
            peer.line_started = now
        peer.buffer += data
        self._buffered += len(data)
        if not self._lines(selector, peers, peer):
            return
        if len(peer.buffer) >= peer.request_limit:
            peer.oversized = True
            peer.dropped = len(peer.buffer)
            self._buffered -= len(peer.buffer)
            peer.buffer = bytearray()
            return
        while self._buffered > MAX_BUFFERED_BYTES:
            hog = max(peers, key=lambda p: len(p.buffer))
            logger.warning(
                "memsync agent: %s unread bytes over all connections; closed pid %s's",
                self._buffered, hog.pid,
            )  # fmt: skip
            message = f"the agent holds at most {MAX_BUFFERED_BYTES} unread bytes: try again"
            self._reply(hog.connection, None, error=("busy", message))
            self._drop(selector, peers, hog)

    def _lines(self, selector: selectors.BaseSelector, peers: list[_Peer], peer: _Peer) -> bool:
        """Answer the complete lines in ``peer.buffer`` while its replies go out; False: dropped.

        A peer whose replies wait (it does not read them) gets no more answers until they go:
        its requests stay in its buffer, within the same bounds.
        """
        while not peer.outbox and (end := peer.buffer.find(b"\n")) >= 0:
            line = bytes(peer.buffer[:end])
            del peer.buffer[: end + 1]
            self._buffered -= end + 1
            peer.seen = time.monotonic()
            peer.line_started = time.monotonic() if peer.buffer else None
            if len(line) >= peer.request_limit:
                self._oversized(selector, peers, peer)
                return False
            self._current = peer
            self._answer(peer, line)
            if peer.outbox:
                self._wait_for_reader(selector, peer)
        return True

    def _wait_for_reader(self, selector: selectors.BaseSelector, peer: _Peer) -> None:
        """Watch ``peer`` for room to send (not for requests) until its replies have gone."""
        peer.stalled_since = peer.stalled_since or time.monotonic()
        with contextlib.suppress(KeyError, ValueError):
            selector.modify(peer.connection, selectors.EVENT_WRITE, peer)

    def _writable(self, selector: selectors.BaseSelector, peers: list[_Peer], peer: _Peer) -> None:
        """Send more of the replies waiting for ``peer``; once all went, answer what is left."""
        if not self._flush(peer):
            self._drop(selector, peers, peer)
            return
        if peer.outbox:
            return
        peer.stalled_since = None
        selector.modify(peer.connection, selectors.EVENT_READ, peer)
        self._lines(selector, peers, peer)

    @staticmethod
    def _flush(peer: _Peer) -> bool:
        """Send what ``peer.outbox`` holds without waiting; False when the peer is gone."""
        try:
            sent = peer.connection.send(peer.outbox)
        except BlockingIOError:
            return True
        except OSError:
            return False
        del peer.outbox[:sent]
        return True

    def _oversized(self, selector: selectors.BaseSelector, peers: list[_Peer], peer: _Peer) -> None:
        logger.warning(
            "memsync agent: request over %s bytes from pid %s", peer.request_limit, peer.pid
        )
        message = f"request over {peer.request_limit} bytes"
        self._reply(peer.connection, None, error=("bad-request", message))
        self._drop(selector, peers, peer)

    def _answer(self, peer: _Peer, line: bytes) -> None:
        """Answer one request line: parse and check it, run its op, reply (never raises)."""
        started, pid = time.monotonic(), peer.pid
        try:
            request_id, op, call = self._parse(line)
            if peer.read_only and op not in READ_OPS:
                raise AgentRequestError(
                    "refused",
                    f"pid {pid} uid {peer.uid} is a read-only peer (allow_read_uids/"
                    f"allow_read_gids): it may ask {', '.join(sorted(READ_OPS))}, not {op}",
                    request_id,
                )
        except AgentRequestError as error:
            logger.warning("memsync agent: %s from pid %s: %s", error.kind, pid, error)
            self._reply(peer, error.request_id, error=(error.kind, str(error)))
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
            self._reply(peer, request_id, error=(error.kind, str(error)))
            return
        except Exception as error:  # noqa: BLE001 - the op failed inside mem0: report it
            logger.warning("memsync agent: %s failed: %s: %s", op, type(error).__name__, error)
            self._reply(
                peer,
                request_id,
                error=("failed", f"{type(error).__name__}: {error}"),
                details=failure_details(error),
            )
            return
        logger.info(
            "memsync agent: %s from pid %s in %.1f ms", op, pid, (time.monotonic() - started) * 1000
        )
        self._reply(peer, request_id, result=result)

    def _parse(self, line: bytes) -> tuple[Any, str, Any]:
        """``(id, op, call)`` of a request line (``protocol.parse_request``)."""
        return parse_request(line, self.ops.handlers())

    def _reply(
        self,
        to: _Peer | socket.socket,
        request_id: Any,
        result: Any = None,
        error: tuple[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Send one reply without ever waiting on the peer.

        To a served peer it is queued (``outbox``) and sent as the peer reads; to a socket
        about to be closed (a refusal, busy, a cut-off) it is sent if there is room, else lost.
        """
        data = reply_bytes(request_id, result, error, details)
        if isinstance(to, _Peer):
            to.outbox += data
            if not self._flush(to):
                to.outbox.clear()  # gone: the next read sees the close
            return
        with contextlib.suppress(OSError):
            to.setblocking(False)
            to.send(data)
