"""memsync's side of the agent protocol (``memsync.agent``): find the app's agent, ask it to write.

``find_agent`` connects to the agent of the app that holds this deployment's store, checks who
answers before it sends anything (``SO_PEERCRED``: a uid of this deployment's store or app, see
``expected_server``; then ``hello``'s pid must be that process) and that it serves this
deployment (store path, collection, history.db); ``AgentWriter`` is the
``Writer`` of the **agent** route; ``AgentClient.paused`` closes the app's write gate for an
exact capture. Protocol 1: one JSON object per line over a Unix stream socket (see
``memsync.agent`` and docs/reference/agent-protocol.md).
"""

from __future__ import annotations

import errno
import functools
import grp
import json
import os
import pwd
import socket
import stat
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import structlog

from memsync.agent.protocol import PROTOCOL, SOCKET_NAME
from memsync.agent.server import unsafe_directory
from memsync.config import Config
from memsync.errors import TryLaterError, UnavailableError
from memsync.model import HistoryEvent
from memsync.stores import history, locks
from memsync.stores.vector_store import VectorStore
from memsync.stores.writer import Route

logger = structlog.get_logger(__name__)

REPLY_LIMIT_BYTES = 16 * 1024 * 1024
BUSY_WAIT_S = 10.0  # how long a busy agent (every connection it serves taken) is asked again
# Errors of an embedder that retrying cannot help (the agent sends "<Type>: <message>").
PERMANENT_ERRORS = ("TypeError", "ValueError", "KeyError", "AttributeError", "NotImplementedError")
# HTTP statuses of an embedder's service that retrying cannot fix (a key, a model, a request).
PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 422})


class AgentError(UnavailableError):
    """The agent answered a request with an error (exit 11); ``kind`` is its error type."""

    def __init__(
        self, op: str, kind: str, message: str, where: str, details: Mapping[str, Any] = {}
    ) -> None:
        super().__init__(
            f"{where} refused or failed {op!r}: {kind}: {message}",
            "see the app's log (logger memsync.agent) for the request"
            if where.startswith("the app's")
            else "the message is mem0's own, from the app's interpreter",
        )
        self.op = op
        self.kind = kind
        # the reply's failure details (``protocol.failure_details``): exception, status, ...
        self.details = dict(details)

    @property
    def retry_after_s(self) -> float | None:
        """The ``Retry-After`` the failing HTTP call answered (seconds), or None."""
        wait = self.details.get("retry_after_s")
        return float(wait) if isinstance(wait, (int, float)) else None


def _user(uid: int) -> str:
    """``root``, or ``no name`` for a uid with no passwd entry."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no name"


def _group(gid: int) -> str:
    """``gid 998 (memsync)``."""
    try:
        return f"gid {gid} ({grp.getgrgid(gid).gr_name})"
    except KeyError:
        return f"gid {gid}"


def _own_gids() -> list[int]:
    """The groups of this process: its primary group first, then the supplementary ones."""
    return [os.getgid(), *sorted(set(os.getgroups()) - {os.getgid()})]


class AgentRefusedError(UnavailableError):
    """The agent does not let memsync in: its peer check refused it, or the socket's mode did.

    Exit 11, never a silent fallback to the queue or to an unquiesced capture: the fix is the
    app's ``attach(..., allow_gids=[...])`` or running memsync as another user.
    """

    def __init__(
        self,
        where: str,
        detail: str,
        allowed_uids: Sequence[int] | None,
        first: str | None = None,
    ) -> None:
        gid = os.getgid()
        run_as = (
            " or ".join(f"uid {uid} ({_user(uid)})" for uid in sorted(set(allowed_uids)))
            if allowed_uids
            else "root or the app's user"
        )
        first = first or (
            f"add a group of memsync's to the app's attach(memory, allow_gids=[{gid}]), with "
            f"the app's user a member of it (usermod -aG), or allow_uids=[{os.getuid()}], "
            "and restart the app"
        )
        super().__init__(
            f"{where} refused memsync (uid {os.getuid()} ({_user(os.getuid())}), groups "
            f"[{', '.join(_group(g) for g in _own_gids())}]){detail}",
            f"{first}, or run memsync as {run_as} (docs/reference/agent-protocol.md#the-socket)",
        )

    @classmethod
    def from_reply(cls, where: str, problem: Mapping[str, Any]) -> AgentRefusedError:
        """From the agent's ``refused`` reply (its ``allowed`` uids and gids when it sends them)."""
        allowed = problem.get("allowed")
        allowed = allowed if isinstance(allowed, dict) else {}
        uids = [u for u in allowed.get("uids") or [] if isinstance(u, int)]
        gids = [g for g in allowed.get("gids") or [] if isinstance(g, int)]
        read_gids = [g for g in allowed.get("read_gids") or [] if isinstance(g, int)]
        said = str(problem.get("message"))[:300]
        detail = (
            f": it allows uids {sorted(set(uids))} and gids {sorted(set(gids))}"
            + (f" (reads only: gids {sorted(set(read_gids))})" if read_gids else "")
            if allowed
            else f": {said}"
        )
        return cls(where, detail, uids or None)

    @classmethod
    def from_socket(cls, path: Path) -> AgentRefusedError:
        """The socket's mode (or its directory's) lets memsync not connect: who may."""
        try:
            found = path.stat()
        except OSError:
            return cls(
                f"the memsync agent at {path}",
                f": {path.parent} cannot be entered (permission denied)",
                None,
                f"let one of these groups enter {path.parent} (its group, mode 0750), and "
                f"add it to the app's attach(memory, allow_gids=[{os.getgid()}]), with the "
                "app's user a member of it (usermod -aG)",
            )
        mode = stat.S_IMODE(found.st_mode)
        return cls(
            f"the memsync agent at {path}",
            f": the socket is uid {found.st_uid} ({_user(found.st_uid)}), "
            f"{_group(found.st_gid)}, mode {mode:04o} (permission denied)",
            [0, found.st_uid],
        )


class UntrustedAgentError(UnavailableError):
    """The process answering on the agent socket is not this deployment's app (exit 11).

    Found before memsync sent it anything (``SO_PEERCRED``), or from a ``hello`` whose pid is not
    the process answering (a forwarding proxy).
    """


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return int(pid), int(uid), int(gid)


def same_process_pids(pid: int) -> set[int]:
    """``pid`` and the pids the same process has in nested pid namespaces (``NSpid``)."""
    pids = {pid}
    with suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                pids.update(int(field) for field in line.split()[1:])
    return pids


@dataclass(frozen=True, slots=True)
class ExpectedServer:
    """Who may answer on this deployment's agent socket: uid -> why it is this deployment's.

    Built by ``expected_server``; the reasons name the store's files and its holder, so a
    refusal names both identities.
    """

    uids: Mapping[int, tuple[str, ...]]

    def describe(self) -> str:
        """``uid 0 (user root: owns /srv/qdrant; runs pid 123, the store's holder)``."""
        return " or ".join(
            f"uid {uid} (user {_user(uid)}: {'; '.join(why)})"
            for uid, why in sorted(self.uids.items())
        )


def expected_server(
    store: VectorStore, config: Config, holder_pid: int | None = None
) -> ExpectedServer:
    """The uids that may answer for this deployment's app. Reads file owners and /proc only.

    The owner of embedded Qdrant's directory and of history.db, and the uid of the process
    holding the store (``holder_pid`` when the store has none, see ``agent_socket_for``; on
    pgvector without it, the process holding history.db open). Root is one of them only when
    it owns the store or runs the app. None of these known: memsync's own uid and root (no
    other user can answer then).
    """
    found: dict[int, list[str]] = {}
    for path in (store.location, config.history_db_path):
        if path is None:
            continue
        with suppress(OSError):
            found.setdefault(path.stat().st_uid, []).append(f"owns {path}")
    holder = store.holder()
    if holder is None and holder_pid is None and store.location is None:
        holder = locks.find_holder(config.history_db_path, config.history_db_path.parent)
    pid = holder.pid if holder is not None else holder_pid
    if pid is not None and pid != os.getpid():
        with suppress(psutil.Error, OSError):
            uid = psutil.Process(pid).uids().effective
            found.setdefault(uid, []).append(f"runs pid {pid}, the store's holder")
    if not found:
        found = {0: ["root"], os.getuid(): ["memsync's own: no store file or holder is known"]}
    return ExpectedServer({uid: tuple(why) for uid, why in found.items()})


class AgentClient:
    """One connection to an app's agent. Use as a context manager; not thread-safe.

    Raises (every method): UnavailableError (exit 11) when the connection breaks or the reply
    is not protocol 1; AgentError when the agent answers with an error; AgentRefusedError when
    it refuses memsync; UntrustedAgentError (at connect) when another process answers.
    """

    def __init__(
        self, path: Path, sock: socket.socket, expected: ExpectedServer | None = None
    ) -> None:
        self.path = path
        self.where = f"the app's memsync agent at {path}"
        self._socket = sock
        self._reader: Any = sock.makefile("rb")
        self._next_id = 0
        try:
            self.hello: dict[str, Any] = self._greet(expected)
        except BaseException:
            self.close()
            raise

    def _greet(self, expected: ExpectedServer | None) -> dict[str, Any]:
        """Check who answers (before sending anything), then ``hello``; return its result."""
        path = self.path
        self.peer = peer_credentials(self._socket)
        pid, uid, _ = self.peer
        if expected is not None and uid not in expected.uids:
            raise UntrustedAgentError(
                f"the process answering on {path} is pid {pid} uid {uid} (user {_user(uid)}); "
                f"this deployment's store belongs to {expected.describe()}: memsync sent it "
                "nothing",
                "it is not this deployment's app (was the socket replaced? keep its directory "
                "writable by the app's user only): stop that process and restart the app, or "
                "point [app] agent_socket at this deployment's app",
            )
        hello: dict[str, Any] = dict(self.call("hello") or {})
        if hello.get("pid") not in same_process_pids(pid):
            raise UntrustedAgentError(
                f"the process answering on {path} is pid {pid} uid {uid} (user {_user(uid)}), "
                f"but its hello claims pid {hello.get('pid')!r}: another process (a proxy) "
                "answers for the app",
                "point [app] agent_socket at the app's own socket (attach(memory) binds it)",
            )
        return hello

    def _write(self, data: bytes) -> None:
        self._socket.sendall(data)

    @classmethod
    def connect(
        cls, path: Path, timeout_s: float = 30.0, expected: ExpectedServer | None = None
    ) -> AgentClient:
        """Connect to the agent at ``path``, check who answers, and greet it (``hello``).

        ``expected``: the uids that may answer (``expected_server``), checked before anything
        is sent; None checks only that ``hello``'s pid is the process answering.

        Raises:
            UnavailableError: nothing listens there, or it does not answer within ``timeout_s``.
            AgentRefusedError: the socket's mode or the agent refuses memsync's uid.
            UntrustedAgentError: the process answering is not the expected one.
        """
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(path))
            return cls(path, sock, expected)
        except OSError as error:
            sock.close()
            if error.errno in (errno.EACCES, errno.EPERM):
                raise AgentRefusedError.from_socket(path) from error
            raise UnavailableError(
                f"no memsync agent answers on {path}: {error.strerror or error}",
                "is the app running with memsync.agent.attach(memory)? see "
                "docs/how-to/maintenance-while-the-app-runs.md",
            ) from error
        except BaseException:
            sock.close()
            raise

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (the agent resumes app writes if this connection paused them)."""
        with suppress(OSError):
            self._reader.close()
        with suppress(OSError):
            self._socket.close()

    def call(self, op: str, **args: Any) -> Any:
        """Send one request and return its ``result``. See the class for the errors."""
        self._next_id += 1
        request = {"v": PROTOCOL, "id": self._next_id, "op": op, "args": args}
        try:
            self._write(json.dumps(request).encode() + b"\n")
        except OSError as error:
            refused = self._refusal(op)  # an agent refusing memsync (or busy) replies, closes
            if refused is not None:
                raise refused from error
            raise UnavailableError(
                f"{self.where} stopped answering during {op!r}: {error}",
                "the app may have stopped or be busy; run the command again (it is idempotent)",
            ) from error
        try:
            line = self._reader.readline(REPLY_LIMIT_BYTES)
        except OSError as error:
            raise UnavailableError(
                f"{self.where} stopped answering during {op!r}: {error}",
                "the app may have stopped or be busy; run the command again (it is idempotent)",
            ) from error
        try:
            reply = json.loads(line)
            ok = bool(reply["ok"])
        except (ValueError, KeyError, TypeError) as error:
            raise UnavailableError(
                f"{self.where} gave no valid reply to {op!r}"
                + (" (it closed the connection)" if not line else ""),
                "the app may have stopped mid-request; run the command again (it is idempotent)",
            ) from error
        if not ok:
            problem = reply.get("error") or {}
            if problem.get("type") == "refused":
                raise AgentRefusedError.from_reply(self.where, problem)
            raise AgentError(
                op, str(problem.get("type")), str(problem.get("message")), self.where, problem
            )
        return reply.get("result")

    def _refusal(self, op: str) -> UnavailableError | None:
        """The ``refused`` (or ``busy``) reply sent before the close a failed send met."""
        if self._socket is None:
            return None
        try:
            reply = json.loads(self._reader.readline(REPLY_LIMIT_BYTES))
        except (OSError, ValueError):
            return None
        problem = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(problem, dict) and problem.get("type") == "refused":
            return AgentRefusedError.from_reply(self.where, problem)
        if isinstance(problem, dict) and problem.get("type") == "busy":
            return AgentError(op, "busy", str(problem.get("message")), self.where)
        return None

    @contextmanager
    def paused(self, lease_s: float) -> Iterator[dict[str, Any]]:
        """Hold the app's writes for the block (in-flight writes finish before it starts).

        Yields the agent's pause reply (``lease_s`` granted, ``waited_s``); after the block the
        same dict also holds the resume reply: ``held_s`` and ``lease_ran_out`` (True: app
        writes went on before the block ended, so it was not fully quiesced). The app resumes
        at the block's end, when this connection closes, or when the lease runs out.
        """
        state: dict[str, Any] = dict(self.call("pause", lease_s=lease_s))
        try:
            yield state
        finally:
            try:
                state.update(self.call("resume"))
            except UnavailableError:
                state["lease_ran_out"] = True


def _holder_sockets(pid: int) -> list[Path]:
    """The Unix sockets named ``memsync-agent.sock`` process ``pid`` listens on. Reads /proc."""
    try:
        connections = psutil.Process(pid).net_connections(kind="unix")
    except (psutil.Error, OSError):
        return []
    paths: set[str] = {str(c.laddr) for c in connections if isinstance(c.laddr, str)}
    return sorted(Path(p) for p in paths if Path(p).name == SOCKET_NAME)


def sockets_hidden(pid: int) -> bool:
    """Whether memsync may not see which sockets process ``pid`` listens on (another user's)."""
    try:
        psutil.Process(pid).net_connections(kind="unix")
    except psutil.AccessDenied:
        return True
    except (psutil.Error, OSError):
        return False
    return False


def agent_socket_for(
    store: VectorStore, config: Config, holder_pid: int | None = None
) -> Path | None:
    """The agent socket to try: ``[app] agent_socket``, else the store holder's. Reads only.

    ``holder_pid``: the process whose socket to look for when the store has no holder (a
    server store such as pgvector; restore passes history.db's holder).
    """
    if config.app.agent_socket is not None:
        return Path(config.app.agent_socket)
    holder = store.holder()
    pid = holder.pid if holder is not None else holder_pid
    if pid is None:
        return None
    found = _holder_sockets(pid)
    return found[0] if found else None


def require_same_deployment(client: AgentClient, store: VectorStore, config: Config) -> None:
    """Raise UnavailableError (exit 11) unless the agent's app holds this deployment's store."""
    hello = client.hello
    served = hello.get("vector_store") or {}
    theirs = {
        "vector store path": served.get("path"),
        "collection": served.get("collection"),
        "history.db": hello.get("history_db_path"),
    }
    location = store.location
    ours = {
        # a server store (pgvector) has no path: the agent reports None (memsync.agent.ops)
        "vector store path": None if location is None else str(location.resolve()),
        "collection": config.collection,
        "history.db": str(config.history_db_path.resolve()),
    }
    differ = [f"{k} {theirs[k]!r} (memsync: {ours[k]!r})" for k in ours if theirs[k] != ours[k]]
    holder = store.holder()
    if holder is not None and holder.pid != hello.get("pid"):
        differ.append(f"pid {hello.get('pid')} (the store is held by pid {holder.pid})")
    if hello.get("protocol") != PROTOCOL:
        differ.append(f"protocol {hello.get('protocol')!r} (memsync speaks {PROTOCOL})")
    if differ:
        raise UnavailableError(
            f"the memsync agent at {client.path} serves another deployment: " + "; ".join(differ),
            "point [app] agent_socket at this deployment's app, or fix memsync's [mem0] paths",
        )


def why_no_agent(path: Path | None) -> str | None:
    """Why no agent answers on ``path``, as far as its file tells; None when nothing is there.

    The cases ``memsync.agent.attach`` refuses to serve in (it logs "serving nothing") and a
    socket nobody listens on. Reads the file system and connects once; sends nothing.
    """
    if path is None:
        return None
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        directory = path.parent
    except OSError as error:
        return f"{path} cannot be read ({error.strerror or error})"
    else:
        if not stat.S_ISSOCK(info.st_mode):
            return (
                f"{path} is not a socket: the app's attach serves nothing while it is there "
                "(move it aside, then restart the app)"
            )
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(2.0)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            return (
                f"nobody listens on {path} (a socket of uid {info.st_uid}): the app stopped "
                "without removing it (its next start replaces it), or it is another user's "
                "and the app's attach serves nothing while it is there (remove it, then restart "
                "the app)"
            )
        except OSError:
            return None
        finally:
            probe.close()
        return None
    try:  # the app's own rule; its uid unknown here, the directory's owner stands for it
        unsafe = unsafe_directory(directory, os.stat(directory).st_uid)
    except OSError:
        return None
    return None if unsafe is None else f"the app's attach refuses to serve there: {unsafe}"


def find_agent(
    store: VectorStore, config: Config, timeout_s: float = 30.0, holder_pid: int | None = None
) -> AgentClient | None:
    """Connect to the agent of the app holding this deployment; None when no agent answers.

    ``holder_pid``: see ``agent_socket_for``. Who answers is checked before anything is sent
    (``expected_server``). A refusal is an error, never None: the caller would fall back to
    the queue or an unquiesced capture and the reason would be only in the app's log.

    Raises:
        UnavailableError: (exit 11) an agent answers but serves another deployment.
        AgentRefusedError: (exit 11) the agent (or its socket's mode) refuses memsync.
        UntrustedAgentError: (exit 11) the process answering is not this deployment's app.
        TryLaterError: (exit 75) the agent answered ``busy`` (its connections taken by other
            peers) for ``BUSY_WAIT_S``.
    """
    path = agent_socket_for(store, config, holder_pid)
    if path is None:
        return None
    try:
        if not path.exists():
            return None
    except PermissionError as error:  # its directory is closed to memsync: not "no agent"
        raise AgentRefusedError.from_socket(path) from error
    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        try:
            client = AgentClient.connect(
                path, timeout_s, expected_server(store, config, holder_pid)
            )
            break
        except (AgentRefusedError, UntrustedAgentError):
            raise
        except AgentError as error:
            if error.kind != "busy" or error.op != "hello":
                logger.info("agent_not_answering", socket=str(path), error=error.message)
                return None
            if time.monotonic() > deadline:  # peers hold every connection it serves
                raise TryLaterError(
                    f"the memsync agent at {path} stayed busy for {BUSY_WAIT_S:g} s: {error}",
                    "other peers hold its connections (at most 8, 4 per uid); run the command "
                    "again, and see the app's log (logger memsync.agent) for who they are",
                ) from error
            time.sleep(0.2)
        except UnavailableError as error:
            logger.info("agent_not_answering", socket=str(path), error=error.message)
            return None
    try:
        require_same_deployment(client, store, config)
    except BaseException:
        client.close()
        raise
    logger.info("agent_found", socket=str(path), pid=client.hello.get("pid"))
    return client


def uncovered_writers(found: Mapping[int, str], covered: Sequence[int]) -> dict[int, str]:
    """Of ``found`` (``locks.writers_of`` history.db), those whose writes the gate does not hold.

    ``covered``: the pids the agent's pause holds. memsync's own process is left out. Pure.
    """
    return {pid: line for pid, line in found.items() if pid not in {*covered, os.getpid()}}


def not_held_reason(pause: Mapping[str, Any]) -> str | None:
    """Why a pause did not hold every app write for the whole block, or None when it did. Pure."""
    uncovered = pause.get("uncovered") or {}
    if uncovered:
        named = ", ".join(f"pid {pid} ({line[:80]})" for pid, line in sorted(uncovered.items()))
        return (
            f"{named} had history.db open for writing outside the agent's write gate "
            "(attach the agent in every app process)"
        )
    if pause.get("lease_ran_out", True):
        return f"the pause lease ({pause.get('lease_s')} s) ran out before the capture ended"
    return None


def checkpoint_through(client: AgentClient, paths: Sequence[str]) -> dict[str, Any]:
    """The agent's ``checkpoint`` of the app's own files: ``{path: [busy, log, checkpointed]}``.

    Raises:
        UnavailableError: the agent refused or failed (an agent of an older memsync has no
            ``checkpoint``).
    """
    answer = client.call("checkpoint", paths=list(paths))
    return dict(answer) if isinstance(answer, dict) else {}


@contextmanager
def writes_held(store: VectorStore, config: Config) -> Iterator[dict[str, Any] | None]:
    """Hold the app's writes through its agent for the block; yields None when none answers.

    Yields the pause reply (``lease_s``, ``waited_s``, ``agent_pid``, ``covered``: the app's pids
    the pause holds; after the block also ``held_s``, ``lease_ran_out`` and ``uncovered``: pid ->
    command line of each process with history.db open for writing that the pause did not
    hold, seen just before the pause or just after it; ``not_held_reason`` tells), and
    ``checkpoint``: ``checkpoint_through`` on this connection. An agent of an older memsync
    covers its own pid only. The lease is ``[app] pause_lease_s``. The two scans of /proc
    (tens of milliseconds on a busy host) bracket the pause rather than lengthen it.

    Raises:
        UnavailableError: the agent that answers serves another deployment; AgentRefusedError
            and UntrustedAgentError as ``find_agent`` (never None for them: no silent
            unquiesced capture).
    """
    client = find_agent(store, config)
    if client is None:
        yield None
        return
    with client:
        seen = locks.writers_of(config.history_db_path)
        with client.paused(config.app.pause_lease_s) as pause:
            pause["agent_pid"] = client.hello.get("pid")
            pause["checkpoint"] = functools.partial(checkpoint_through, client)
            covered = [int(p) for p in pause.get("covered") or [pause["agent_pid"]]]
            pause["covered"] = covered
            try:
                yield pause
            finally:
                pause["uncovered"] = {}  # until the scan after the pause fills it
        seen.update(locks.writers_of(config.history_db_path))
        pause["uncovered"] = uncovered_writers(seen, covered)


class AgentWriter:
    """The **agent** route's ``Writer``: the app's own ``Memory`` does each write (see ``Writer``).

    History-only writes go to history.db directly, as on every route.
    """

    route: Route = "agent"

    def __init__(
        self, client: AgentClient, store: VectorStore, config: Config, route: Route = "agent"
    ) -> None:
        self.client = client
        self._store = store
        self._config = config
        self.route = route

    def payload(self, memory_id: str) -> dict[str, Any] | None:
        """The app's live payload for the memory, or None. Reads only."""
        found = self.client.call("get", memory_id=memory_id)
        return None if found is None else dict(found)

    def exists(self, memory_id: str) -> bool:
        """Whether the app's store has the point. Reads only."""
        return self.payload(memory_id) is not None

    def delete(self, memory_id: str) -> bool:
        """``Memory.delete`` in the app; False when it had no point. Idempotent."""
        return bool(self.client.call("delete", memory_id=memory_id)["deleted"])

    def update_text(self, memory_id: str, text: str) -> bool:
        """``Memory.update`` in the app (re-embeds). Raises LookupError: no point."""
        try:
            return bool(self.client.call("update", memory_id=memory_id, text=text)["updated"])
        except AgentError as error:
            if "has no point" in error.message:
                raise LookupError(f"memory {memory_id} has no point") from error
            raise

    def update_metadata(self, memory_id: str, metadata: Mapping[str, Any]) -> bool:
        """Merge ``metadata`` through ``Memory.update`` in the app; False when no point."""
        result = self.client.call("update", memory_id=memory_id, metadata=dict(metadata))
        return bool(result["updated"])

    def put_back(self, point_id: str, vector: Sequence[float], payload: Mapping[str, Any]) -> bool:
        """Insert a lost point in the app's store; False when it is there. Idempotent."""
        result = self.client.call(
            "put_back", point_id=point_id, vector=[float(x) for x in vector], payload=dict(payload)
        )
        return bool(result["inserted"])

    def put_back_text(self, point_id: str, text: str, payload: Mapping[str, Any]) -> bool:
        """Insert a lost point with ``text`` embedded by the app's embedder; False when it is there.

        The payload's ``data``, ``hash`` (and ``text_lemmatized``) become ``text``'s in the app.

        Raises:
            UnavailableError: the app's memsync agent is older and has no ``put_back_text``.
        """
        try:
            result = self.client.call(
                "put_back_text", point_id=point_id, text=text, payload=dict(payload)
            )
        except AgentError as error:
            if error.kind == "bad-request" and "unknown op" in error.message:
                raise UnavailableError(
                    "the app's memsync agent cannot re-embed a memory (put_back_text)",
                    "upgrade memsync in the app's environment and restart the app",
                ) from error
            raise
        return bool(result["inserted"])

    def relink_entity(self, entity_id: str, remaining: Sequence[str]) -> bool:
        """Set an entity's links in the app's entity store (delete it when empty)."""
        return bool(
            self.client.call("relink_entity", entity_id=entity_id, remaining=list(remaining))[
                "changed"
            ]
        )

    def touch_entity_store(self) -> None:
        """Initialise mem0's entity store in the app, when the store has an entity collection.

        So ``Memory.delete`` cleans entity links too (mem0ai 2.2.1 does only once touched);
        never otherwise: touching it would create the collection. An agent of an older
        memsync knows no ``touch_entities``: it touches the store at its first delete.
        """
        collections = self._store.read_collections() or {}
        prefix = f"{self._config.collection}_"
        if not any(name.startswith(prefix) and "entit" in name for name in collections):
            return
        try:
            self.client.call("touch_entities")
        except AgentError as error:
            if error.kind != "bad-request":
                raise

    def embed(self, text: str) -> list[float]:
        """Embed ``text`` with the app's embedder (mem0's ``embed(text, "add")``). Reads only.

        Raises:
            ValueError: the embedder rejected the input or is misconfigured (a permanent
                error: TypeError, ValueError, KeyError, AttributeError, NotImplementedError,
                or an HTTP 400, 401, 403, 404 or 422: a key or a request retrying cannot fix).
            AgentError: any other failure (network, rate limit: worth a retry; its
                ``retry_after_s`` is the server's ``Retry-After``).
        """
        return [float(x) for x in self._embedding("embed", text=text)["vector"]]

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in one request (mem0's ``embed_batch``, else ``embed`` per text).

        Raises:
            ValueError, AgentError: as ``embed``.
        """
        found = self._embedding("embed_batch", texts=list(texts))["vectors"]
        return [[float(x) for x in vector] for vector in found]

    def _embedding(self, op: str, **args: Any) -> Any:
        """One embedder request; a permanent failure raised as ValueError (see ``embed``)."""
        try:
            return self.client.call(op, **args)
        except AgentError as error:
            if str(error.message).split(": ", 2)[-1].startswith(PERMANENT_ERRORS):
                raise ValueError(error.message) from error
            if error.details.get("status") in PERMANENT_STATUSES:
                raise ValueError(error.message) from error
            raise

    def insert_points(
        self,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        payloads: Sequence[Mapping[str, Any]],
        *,
        entities: bool = False,
    ) -> None:
        """Write points with these ids, vectors and payloads in one transaction (a migration's batch).

        pgvector: one ``COPY`` of the rows mem0's ``insert`` writes; embedded Qdrant:
        ``vector_store.insert`` (``entity_store`` with ``entities``) committed once. No history row.
        """
        self.client.call(
            "insert_points",
            ids=list(ids),
            vectors=[[float(x) for x in v] for v in vectors],
            payloads=[dict(p) for p in payloads],
            entities=entities,
        )

    def defer_indexes(self, *, entities: bool = False) -> list[str]:
        """Drop an empty pgvector target's indexes before its load; their names (else none)."""
        found = self.client.call("defer_indexes", entities=entities)
        return [str(name) for name in found["dropped"]]

    def build_indexes(self, *, entities: bool = False) -> list[str]:
        """Build the indexes a pgvector target lacks (mem0's ``create_col``); all it has after."""
        found = self.client.call("build_indexes", entities=entities)
        return [str(name) for name in found["indexes"]]

    def delete_points(self, ids: Sequence[str], *, entities: bool = False) -> None:
        """Delete points by id through mem0's vector store: only a store memsync created."""
        self.client.call("delete_points", ids=list(ids), entities=entities)

    def top_hit(self, text: str, filters: Mapping[str, Any]) -> tuple[str, str] | None:
        """``(memory_id, text)`` of ``Memory.search``'s first result in a scope, or None."""
        found = self.client.call("search", text=text, filters=dict(filters), limit=1)
        results = found.get("results") or []
        return (str(results[0]["id"]), str(results[0]["memory"])) if results else None

    def probe_embedder(self) -> None:
        """Nothing to do: the app's embedder serves the app; a failing update reports itself."""

    def record_events(self, events: Sequence[HistoryEvent]) -> int:
        """Insert memsync's history rows (history.db directly; SQLite busy timeout 5 s).

        Raises:
            TryLaterError: history.db stays locked; UnavailableError: it cannot be written.
        """
        return history.insert_repair_events(self._config.history_db_path, list(events))

    def delete_messages(self, scope: str) -> int:
        """Delete one session scope's raw ``messages`` rows (history.db directly)."""
        return history.delete_message_scope(self._config.history_db_path, scope)
