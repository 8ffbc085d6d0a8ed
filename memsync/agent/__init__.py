"""memsync's agent inside the app: maintenance writes through the app's own ``mem0.Memory``.

Embedded Qdrant allows one process, and the app holds its store for life, so memsync cannot
write it while the app runs. Two lines in the app, after it builds its ``Memory``::

    from memsync.agent import attach
    attach(memory)

start one daemon thread serving a Unix socket (``default_socket_path``) on which memsync asks
the app's own ``Memory`` to delete, update, put back points, repair entity links, and to pause
the app's writes for an exact capture. The package imports only the standard library; it calls
the ``Memory`` it is given (mem0ai 2.2.1's ``Memory``). Wire protocol, permissions and cost to
the app: docs/reference/agent-protocol.md. Parts: ``protocol`` (constants, the error type),
``gate`` (the write gate and its lease), ``ops`` (the operations), ``history`` (mem0's
history connection let go and reopened for a restore), ``server`` (the socket).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .gate import WriteGate
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

__all__ = [
    "MAX_REQUEST_BYTES", "PROTOCOL", "SOCKET_NAME", "Agent", "AgentRequestError", "WriteGate",
    "attach", "default_socket_path",
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
) -> Agent:
    """Serve ``memory`` to memsync on a Unix socket from a daemon thread; return the agent.

    Args:
        memory: the app's ``mem0.Memory`` (built once, used for the app's life).
        socket_path: where to listen (default: ``default_socket_path()``).
        allow_uids: peers allowed besides root and the app's own uid.
        allow_gids: peers allowed by any of their groups (primary or supplementary); the socket
            becomes mode 0660, group the first.
        allow_read_uids: peers allowed to read only (``hello``, ``get``, ``search``,
            ``embed``): monitoring.
        allow_read_gids: the same, by any of the peer's groups.
        lease_max_s: the longest app writes are held, renewals included, in any
            ``2 * lease_max_s`` seconds.
        max_connections: connections served at once (fewer when the app lacks descriptors).
        request_deadline_s: the longest one request may take to arrive, first byte to newline.
        idle_timeout_s: a connection with no request for this long is closed.

    Effects: wraps the Memory's public methods (the write gate), creates missing directories
    (0700, 0750 with group peers), the socket (0600, 0660 with group peers), starts one daemon
    thread, removes the socket at ``Memory.close()`` or interpreter exit.

    Never raises for the socket: when it cannot serve (a file that is not a socket, another
    live agent, another uid's socket, a directory others may write), it logs an error and
    returns an agent that serves nothing, ``agent.problem`` saying why; the app runs on.
    """
    path = Path(socket_path) if socket_path is not None else default_socket_path()
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
    )
    if agent.serving:
        logger.info("memsync agent: serving %s (protocol %s)", path, PROTOCOL)
    return agent
