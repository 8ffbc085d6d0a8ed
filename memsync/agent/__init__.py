"""memsync's agent inside the app: maintenance writes through the app's own ``mem0.Memory``.

Embedded Qdrant allows one process, and the app holds its store for life, so memsync cannot
write it while the app runs. Two lines in the app, after it builds its ``Memory``::

    from memsync.agent import attach
    attach(memory)

start one daemon thread serving a Unix socket (``default_socket_path``) on which memsync asks
the app's own ``Memory`` to delete, update, put back points, repair entity links, and to pause
the app's writes for an exact capture. Every process of the app shares one write gate per
deployment (``shared``: lock files beside history.db), so a pause holds all of them: processes
forked after ``attach`` join it by themselves; a process that attaches while another serves the
socket for the same deployment joins the gate only (``member``). The package imports only the standard library; it calls
the ``Memory`` it is given (mem0ai 2.2.1's ``Memory``). Wire protocol, permissions and cost to
the app: docs/reference/agent-protocol.md. Parts: ``protocol`` (constants, the error type),
``gate`` (the write gate and its lease), ``ops`` (the operations), ``history`` (mem0's
history connection let go and reopened for a restore), ``server`` (the socket).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .gate import WriteGate, gate_of
from .member import GateMember, serving
from .protocol import (
    IDLE_TIMEOUT_S,
    MAX_CONNECTIONS,
    MAX_REQUEST_BYTES,
    PROTOCOL,
    REQUEST_DEADLINE_S,
    SOCKET_NAME,
    AgentRequestError,
)
from .server import Agent
from .shared import SharedGate, gate_directory

__all__ = [
    "MAX_REQUEST_BYTES", "PROTOCOL", "SOCKET_NAME", "Agent", "AgentRequestError", "GateMember",
    "SharedGate", "WriteGate", "attach", "default_socket_path",
]  # fmt: skip

logger = logging.getLogger("memsync.agent")


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


def attach(
    memory: Any,
    socket_path: str | os.PathLike[str] | None = None,
    *,
    allow_uids: Sequence[int] = (),
    allow_gids: Sequence[int] = (),
    allow_read_uids: Sequence[int] = (),
    allow_read_gids: Sequence[int] = (),
    lease_max_s: float = 60.0,
    max_connections: int = MAX_CONNECTIONS,
    request_deadline_s: float = REQUEST_DEADLINE_S,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> Agent | GateMember:
    """Serve ``memory`` to memsync on a Unix socket from a daemon thread; return the agent.

    One socket per deployment: when another process of the same deployment (same history.db)
    already serves ``socket_path``, this one joins the write gate only and returns a
    ``GateMember`` (``serving`` False). Processes forked after ``attach`` need no call.

    Args:
        memory: the app's ``mem0.Memory`` (built once, used for the app's life).
        socket_path: where to listen (default: ``default_socket_path()``).
        allow_uids: peers allowed besides root and the app's own uid.
        allow_gids: peers allowed by any of their groups (primary or supplementary); with one
            group the socket becomes mode 0660, that group (the app's user must be a member),
            with more 0666 (their credentials decide).
        allow_read_uids: peers allowed to read only (``hello``, ``get``, ``search``,
            ``embed``): monitoring.
        allow_read_gids: the same, by any of the peer's groups.
        lease_max_s: the longest app writes are held, renewals included, in any
            ``2 * lease_max_s`` seconds.
        max_connections: connections served at once (fewer when the app lacks descriptors).
        request_deadline_s: the longest one request may take to arrive, first byte to newline.
        idle_timeout_s: a connection with no request for this long is closed.

    Effects: joins the deployment's write gate (``<history.db>.memsync-gate/``, created),
    wraps the Memory's public methods (the write gate), creates missing directories and the
    socket (modes: docs/reference/agent-protocol.md, "The socket"), starts one daemon thread,
    removes the socket at ``Memory.close()`` or a normal interpreter exit.

    Never raises: when it cannot serve (a file that is not a socket, another live agent,
    another uid's socket, a directory others may write, this process serving already), it
    logs an error and returns an agent that serves nothing, ``problem`` saying why; a gate
    directory that cannot be created is logged, and a pause then holds this process only.
    The app runs on either way.
    """
    path = Path(socket_path) if socket_path is not None else default_socket_path()
    config = getattr(memory, "config", None)
    history = getattr(config, "history_db_path", None)
    directory = gate_directory(history)
    gate = gate_of(memory)  # attached before a fork: the child's gate rejoined by itself
    if gate is None:
        gate = WriteGate(_shared(directory))
    with _attaching(directory):  # two processes attaching at once: one serves, one joins
        served = serving(path) if path.exists() else None
        if served is not None and served[1] == os.getpid():
            logger.error("memsync agent: attach called twice: this process serves %s", path)
            member = GateMember(memory, path, gate, served[1])
            member.problem = f"this process (pid {served[1]}) serves {path} already"
            return member
        if served is not None and history and served[0] == str(Path(history).resolve()):
            member = GateMember(memory, path, gate, served[1])
            logger.info("memsync agent: pid %s serves %s; joined its write gate", served[1], path)
            return member
        agent = Agent(
            memory,
            path,
            allow_uids=allow_uids,
            allow_gids=allow_gids,
            allow_read_uids=allow_read_uids,
            allow_read_gids=allow_read_gids,
            lease_max_s=lease_max_s,
            max_connections=max_connections,
            request_deadline_s=request_deadline_s,
            idle_timeout_s=idle_timeout_s,
            gate=gate,
        )
    if agent.serving:
        logger.info("memsync agent: serving %s (protocol %s)", path, PROTOCOL)
    return agent


def _shared(directory: Path | None) -> SharedGate | None:
    """This process's part of the deployment's shared gate; None (logged) when it cannot be made.

    Without it a pause holds this process only, and memsync says so when other processes write.
    """
    if directory is None:
        return None
    try:
        return SharedGate(directory)
    except OSError as error:
        logger.warning(
            "memsync agent: no write gate shared with other processes (%s); a pause holds "
            "this process only: make history.db's directory writable by the app",
            error,
        )
        return None


@contextlib.contextmanager
def _attaching(directory: Path | None) -> Any:
    """Hold ``<gate>/attach`` exclusive (no directory: nothing) while one process attaches."""
    fd = None
    if directory is not None:
        with contextlib.suppress(OSError):  # no gate directory: nothing to serialise with
            fd = os.open(directory / "attach", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if fd is None:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
