"""``tune``: switch the deployment's SQLite files to WAL mode (or back), said first, proven after.

Which files: history.db and every collection's ``storage.sqlite`` of the deployment
(``stores.journal_mode.live_files``). ``plan_tune`` is pure; ``apply_tune`` takes a route and
switches each file that needs it, then re-opens every file and reads its mode back.

Routes (docs/reference/commands/tune.md):
    direct: nobody holds the store (the app is stopped): memsync sets the mode itself.
    agent: the app holds the store and its memsync agent answers: the app's writes are paused
        (``AgentClient.paused``) while memsync sets the mode; the app's open connections carry
        on in the new mode at their next transaction.
    none: the app holds the store and no agent answers: ``LockedError`` (exit 12) with the two
        ways. Leaving WAL (``rollback``) needs every connection closed: direct only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import LockedError, MemsyncError, UnavailableError
from memsync.stores import journal_mode
from memsync.stores.agent_client import AgentClient, find_agent
from memsync.stores.journal_mode import ROLLBACK, WAL, LiveFile

logger = structlog.get_logger(__name__)

TARGETS = (WAL, ROLLBACK)
DEFAULT_LEASE_S = 30.0  # [app] pause_lease_s: how long the agent may hold the app's writes
__all__ = ["ROLLBACK", "TARGETS", "WAL", "Tuned", "TunedFile", "apply_tune", "plan_tune"]
NO_ROUTE_HINT = (
    "stop the app and run memsync tune --wal again, or attach memsync's agent in the app "
    "(docs/how-to/wal-mode.md) so memsync can pause its writes for the switch"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TunedFile:
    """One file's journal mode before and after ``tune``.

    Attributes:
        path: the live file.
        label: ``"history.db"`` or ``"collection <name>"``.
        before: its mode before (``"wal"``, ``"rollback"``; None: no SQLite header yet, left alone).
        after: its mode read back by a new connection after the switch (None on a dry run).
        change: the file needs switching (on a dry run: would be switched).
    """

    path: Path
    label: str
    before: str | None
    after: str | None
    change: bool

    def to_json(self) -> dict[str, Any]:
        """The file's entry in ``tune --json``'s ``files``."""
        return {
            "path": str(self.path),
            "label": self.label,
            "before": self.before,
            "after": self.after,
            "change": self.change,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Tuned:
    """What ``tune`` did (or, on a dry run, would do).

    Attributes:
        target: ``"wal"`` or ``"rollback"``.
        dry_run: nothing was written.
        route: ``"direct"`` or ``"agent"`` (on a dry run: the route it would take); None when
            nothing needs switching, or (dry run) when no route is open now.
        files: every live SQLite file, in capture order.
        holder: the process holding the store (``LockHolder.describe()``), or None.
        blocked: on a dry run with no route: why (the message exit 12 would give); else None.
        paused_s: agent route: seconds the app's writes were held (None otherwise).
        lease_ran_out: agent route: the app's writes resumed before every file was switched
            (harmless: a switch to WAL is safe while the app writes; it only waited longer).
    """

    target: str
    dry_run: bool
    route: str | None
    files: tuple[TunedFile, ...]
    holder: str | None = None
    blocked: str | None = None
    paused_s: float | None = None
    lease_ran_out: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """``tune --json`` (docs/reference/json-output.md)."""
        return {
            "command": "tune",
            "dry_run": self.dry_run,
            "target": self.target,
            "route": self.route,
            "holder": self.holder,
            "blocked": self.blocked,
            "files": [entry.to_json() for entry in self.files],
            "changed": len(self.changed),
            "paused_s": self.paused_s,
            "lease_ran_out": self.lease_ran_out,
        }

    @property
    def changed(self) -> tuple[TunedFile, ...]:
        """The files that needed (or would need) switching."""
        return tuple(f for f in self.files if f.change)


def plan_tune(files: Sequence[LiveFile], target: str) -> tuple[TunedFile, ...]:
    """One entry per file; ``change`` when its mode is known and differs from ``target``. Pure."""
    return tuple(
        TunedFile(
            path=live.path,
            label=live.label,
            before=live.mode,
            after=None,
            change=live.mode is not None and live.mode != target,
        )
        for live in files
    )


def apply_tune(deployment: Deployment, target: str, *, dry_run: bool = False) -> Tuned:
    """Switch every live SQLite file of the deployment to ``target`` mode; prove it after.

    Idempotent: files already in ``target`` mode are left as they are (and read back). On a
    dry run nothing is written and the route it would take is reported. The caller holds the
    operation lock.

    Raises:
        UnavailableError: no SQLite file of the deployment exists, a file is unreadable, or a
            file reads back in another mode than ``target`` (its file system cannot do WAL).
        LockedError: (exit 12) the app holds the store and no route is open (see module doc).
        TryLaterError: a file stayed busy.
    """
    config = deployment.config
    if target not in TARGETS:
        raise ValueError(f"unknown journal mode {target!r}")
    files = journal_mode.live_files(deployment.vector_store, config.history_db_path)
    if not files:
        raise UnavailableError(
            f"no SQLite file of the deployment exists (history.db {config.history_db_path}, "
            f"the collections under {deployment.vector_store.where})",
            "check the [mem0] paths and mem0_dir in the memsync config",
        )
    if not any(f.path == config.history_db_path for f in files):
        raise UnavailableError(
            f"tune: history.db {config.history_db_path} does not exist (nothing was switched)",
            "check [mem0] history_db_path and mem0_dir; memsync check names a likely wrong path",
        )
    planned = plan_tune(files, target)
    holder = deployment.vector_store.holder()
    held = holder is not None and holder.pid != os.getpid()
    described = holder.describe() if held and holder is not None else None
    tuned = Tuned(target=target, dry_run=dry_run, route=None, files=planned, holder=described)
    if not tuned.changed:
        return tuned if dry_run else replace(tuned, files=_read_back(planned))
    try:
        agent = _route(deployment, target, described)
    except LockedError as error:
        if dry_run:
            return replace(tuned, blocked=error.message)
        raise
    if agent is None:
        tuned = replace(tuned, route="direct")
        if not dry_run:
            _switch(tuned.changed, target)
    else:
        tuned = replace(tuned, route="agent")
        with agent:
            if not dry_run:
                tuned = _switch_paused(agent, tuned, _lease_s(config))
    if dry_run:
        return tuned
    result = replace(tuned, files=_read_back(planned))
    _require_target(result)
    return result


def _route(deployment: Deployment, target: str, holder: str | None) -> AgentClient | None:
    """The agent to switch through (None: direct, the store is free).

    Raises:
        LockedError: the app holds the store and no route is open (no agent, or leaving WAL).
        UnavailableError: the agent that answers serves another deployment.
    """
    config = deployment.config
    if holder is None:
        return None
    if target == ROLLBACK:
        raise LockedError(
            f"tune --rollback-journal: the store is held by {holder}; leaving WAL mode needs "
            "every connection to the files closed",
            "stop the app, then run memsync tune --rollback-journal again",
        )
    agent = find_agent(deployment.vector_store, config)
    if agent is None:
        raise LockedError(
            f"tune --wal: the store is held by {holder} and no memsync agent answers for it",
            NO_ROUTE_HINT,
        )
    return agent


def _lease_s(config: Config) -> float:
    """``[app] pause_lease_s`` (seconds), or the default when the config has no ``[app]``."""
    return float(getattr(getattr(config, "app", None), "pause_lease_s", DEFAULT_LEASE_S))


def _switch_paused(agent: AgentClient, tuned: Tuned, lease_s: float) -> Tuned:
    """Switch ``tuned``'s files with the app's writes held by its agent; record the pause."""
    with agent.paused(lease_s) as pause:
        _switch(tuned.changed, tuned.target)
    held = pause.get("held_s")
    ran_out = bool(pause.get("lease_ran_out", False))
    logger.info(
        "tune_paused",
        held_s=held,
        lease_ran_out=ran_out,
        agent_pid=agent.hello.get("pid"),
    )
    return replace(
        tuned,
        paused_s=float(held) if isinstance(held, int | float) else None,
        lease_ran_out=ran_out,
    )


def _switch(files: Sequence[TunedFile], target: str) -> None:
    """Set ``target`` mode on each file, in order (the store is free or the app paused).

    Raises as ``journal_mode.switch``; the message then also names the files switched before.
    """
    done: list[str] = []
    for entry in files:
        try:
            answer = journal_mode.switch(entry.path, target)
        except MemsyncError as error:
            if done:
                error.message += f"; already switched to {target}: {', '.join(done)}"
                error.args = (error.message,)
            raise
        done.append(str(entry.path))
        logger.info(
            "journal_mode_switched",
            path=str(entry.path),
            journal_mode=target,
            before=entry.before,
            answer=answer,
        )


def _read_back(files: Sequence[TunedFile]) -> tuple[TunedFile, ...]:
    """Each file with ``after`` read by a new connection (files without a header are left)."""
    return tuple(
        replace(entry, after=journal_mode.verify(entry.path) if entry.before else None)
        for entry in files
    )


def _require_target(tuned: Tuned) -> None:
    """Raise UnavailableError when a switched file reads back in another mode."""
    wrong = [f for f in tuned.files if f.before is not None and f.after != tuned.target]
    if wrong:
        listed = ", ".join(f"{f.path} ({f.after})" for f in wrong)
        raise UnavailableError(
            f"tune: {listed} did not switch to {tuned.target} mode (SQLite kept another mode: "
            "the file system may not support WAL's shared memory, e.g. a network file system)",
            "keep the files on a local file system, or leave them in rollback mode",
        )
