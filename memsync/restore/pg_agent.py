"""restore on pgvector while the app runs memsync's agent: history.db swapped with mem0's connection let go.

The **agent** route of ``restore.pgvector``: app writes paused (``pause``, lease ``[app]
pause_lease_s``), mem0's history connection closed by the agent (``history_release``: its
history lock held, so the app's history calls wait, none fails), the block run (the table swap
and the history.db swap), history.db opened again at its path (``history_reopen``, journal mode
put back), app writes resumed, and /proc read to prove the app holds the new file. A memsync
killed inside the block leaves the agent to reopen history when the connection closes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import structlog

from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import LockedError, UnavailableError
from memsync.routes.window import Taken
from memsync.stores.agent_client import AgentClient, AgentError, find_agent
from memsync.stores.locks import LockHolder, find_holder

logger = structlog.get_logger(__name__)


def history_holder(config: Config) -> LockHolder | None:
    """The process (other than this one) holding history.db open: the app's mem0. Reads /proc."""
    holder = find_holder(config.history_db_path, config.history_db_path.parent)
    return None if holder is None or holder.pid == os.getpid() else holder


def agent_for(deployment: Deployment, holder: LockHolder) -> AgentClient | None:
    """The agent of the app holding history.db (``[app] agent_socket``, else the holder's socket).

    None when no agent answers. Raises UnavailableError (exit 11) when the agent serves another
    deployment or is not the process holding history.db.
    """
    config = deployment.config
    client = find_agent(deployment.vector_store, config, holder_pid=holder.pid)
    if client is not None and client.hello.get("pid") != holder.pid:
        client.close()
        raise UnavailableError(
            f"the memsync agent at {client.path} is pid {client.hello.get('pid')}, but "
            f"{config.history_db_path} is held by {holder.describe()}",
            "point [app] agent_socket at the app that holds history.db",
        )
    return client


def holds_file(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has the file now at ``path`` open (same inode). Reads /proc."""
    try:
        wanted = path.stat()
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with suppress(OSError):
            found = os.stat(f"/proc/{pid}/fd/{fd}")
            if (found.st_dev, found.st_ino) == (wanted.st_dev, wanted.st_ino):
                return True
    return False


def _release(client: AgentClient) -> dict[str, Any]:
    """``history_release``; an agent of an older memsync (no such op) is named as such."""
    try:
        return dict(client.call("history_release"))
    except AgentError as error:
        if error.kind != "bad-request" or "unknown op" not in error.message:
            raise
        raise UnavailableError(
            f"the app's memsync agent at {client.path} cannot let history.db go (memsync "
            f"{client.hello.get('memsync')} in the app has no history_release)",
            "upgrade memsync in the app, or set [app] stop_command and start_command, or stop "
            "the app and run again",
        ) from error


@contextmanager
def history_released(config: Config, client: AgentClient, taken: Taken) -> Iterator[None]:
    """Run the block with app writes paused and mem0's history connection closed by the agent.

    Effects: ``taken.route`` is ``"agent"``; afterwards history.db is open again in the app
    at its path (the file there then) and app writes go on, also when the block raises.

    Raises:
        LockedError: (exit 12) another process still holds history.db after the release.
        UnavailableError: (exit 11) the agent failed a step, or after the block the app does
            not hold the file at the history path (restart the app).
    """
    path = config.history_db_path
    client.call("pause", lease_s=config.app.pause_lease_s)
    released: dict[str, Any] = {}
    try:
        released = _release(client)
        holder = history_holder(config)
        if holder is not None:
            raise LockedError(
                f"restore: {holder.describe()} still holds {path} after the app's agent let it go",
                "stop that process and run again (docs/how-to/pgvector.md#restore)",
            )
        taken.route = "agent"
        logger.info("route_taken", route="agent", what="restore", history=str(path))
        yield
    except BaseException:
        with suppress(UnavailableError):  # the agent reopens and resumes when we close anyway
            client.call("history_reopen", journal_mode=released.get("journal_mode"))
            client.call("resume")
        raise
    reopened = client.call("history_reopen", journal_mode=released["journal_mode"])
    resumed = client.call("resume")
    logger.info("history_reopened", inode=reopened.get("inode"), held_s=resumed.get("held_s"),
                lease_ran_out=resumed.get("lease_ran_out"))  # fmt: skip
    pid = int(client.hello["pid"])
    if not holds_file(pid, path):
        raise UnavailableError(
            f"restore: the app (pid {pid}) did not open the restored {path} again",
            "restart the app so that mem0 opens the restored history.db",
        )
