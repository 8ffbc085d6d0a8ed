"""What a forget, erase or prune selects, and what it did: values and pure functions."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from packaging.version import InvalidVersion, Version

from memsync import findings as registry
from memsync.erase import apply as erase
from memsync.errors import ConfigError, ExitCode
from memsync.model import Inventory, is_expired
from memsync.routes import queue as pending
from memsync.stores import versions


@dataclass(frozen=True, slots=True, kw_only=True)
class Targets:
    """What a forget will delete: memory ids with a point, ids only history knows, unknown ids."""

    with_point: tuple[str, ...]
    history_only: tuple[str, ...]
    not_found: tuple[str, ...]
    already_deleted: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        """Every memory id that will be deleted."""
        return self.with_point + self.history_only


@dataclass(frozen=True, slots=True, kw_only=True)
class Forgotten:
    """What a forget or prune did, and what the re-read proved.

    ``route``: the route it took (``"agent"``, ``"direct"``, ``"window"``), ``"queued"`` when it
    was queued as ``pending_id``, the route it would take in a dry run, or None when nothing
    needed one. ``downtime_s``: a window's downtime (seconds), else None.
    """

    targets: Targets
    dry_run: bool
    deleted: tuple[str, ...] = ()
    recorded: tuple[str, ...] = ()
    unproven: tuple[str, ...] = ()
    snapshot_id: str | None = None
    erased: dict[str, Any] = field(default_factory=dict)
    route: str | None = None
    downtime_s: float | None = None
    pending_id: str | None = None
    replicas: dict[str, Any] | None = None  # [protect]: the replicas' new generations (erase)
    empty_scope: dict[str, str] | None = None  # a --user/--agent/--run that matched nothing

    @property
    def scope_text(self) -> str:
        """``user_id=alice`` (the fields of ``empty_scope``), for the reports."""
        return " ".join(f"{k}={v}" for k, v in (self.empty_scope or {}).items())

    @property
    def exit_code(self) -> ExitCode:
        """3 when an id was not found or a scope matched nothing (a dry run too: the real run would exit 3), 5 when queued, 4 when a delete could not be proven or an erasure's bytes not verified gone, else 0."""
        if self.pending_id is not None:
            return ExitCode.QUEUED
        if self.targets.not_found or self.empty_scope:
            return ExitCode.PROBLEMS_FOUND
        return ExitCode.PARTIAL if self.unproven or self.unverified else ExitCode.OK

    @property
    def unverified(self) -> list[str]:
        """Why the erasure's bytes are not proven gone (also: the replicas not renewed)."""
        why = erase.unverified(self.erased) if self.erased else []
        problem = (self.replicas or {}).get("problem")
        return why + [f"replicas: {problem}"] if problem else why

    def to_json(self, command: str) -> dict[str, Any]:
        """``forget --json`` or ``prune --json`` (``command``): docs/reference/json-output.md."""
        targets = self.targets
        findings = [
            registry.make(
                "memory-not-found",
                "no point and no history row has this id: nothing was touched",
                memory_id=m,
            ).to_json()
            for m in targets.not_found
        ]
        if self.empty_scope:
            findings.append(
                registry.make(
                    "memory-not-found",
                    f"no memory of {self.scope_text} in the store: nothing was touched",
                ).to_json()
            )
        return {
            "command": command,
            "dry_run": self.dry_run,
            "targets": list(targets.all),
            "already_deleted": list(targets.already_deleted),
            "deleted": list(self.deleted),
            "recorded": list(self.recorded),
            "unproven": list(self.unproven),
            "safety_snapshot": self.snapshot_id,
            "erased": self.erased or None,
            "findings": findings,
            "route": self.route,
            "downtime_s": self.downtime_s,
            "pending_id": self.pending_id,
            "replicas": self.replicas,
        }


def select_targets(
    inventory: Inventory,
    memory_ids: Sequence[str] = (),
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    past: Collection[str] = (),
) -> Targets:
    """Resolve ids or a scope to memory ids, sorted. Pure.

    A scope matches points whose payload carries all the given ids, and ``past``: ids records
    tie to the scope (``erase.scope_past``) that history still knows without a point. An id
    with a point is deleted through mem0; an id whose history is live but has no point is
    closed with a DELETE event; an id history ends with DELETE is already deleted; any other id
    is unknown.
    """
    with_point: list[str] = []
    history_only: list[str] = []
    not_found: list[str] = []
    already: list[str] = []
    if memory_ids:
        for memory_id in dict.fromkeys(memory_ids):
            if memory_id in inventory.points:
                with_point.append(memory_id)
            elif memory_id in inventory.history:
                last = inventory.history[memory_id].last
                (already if last.event == "DELETE" else history_only).append(memory_id)
            else:
                not_found.append(memory_id)
    else:
        scope = {
            k: v for k, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)) if v
        }
        with_point = [
            point.id
            for point in inventory.points.values()
            if scope and all(point.payload.get(k) == v for k, v in scope.items())
        ]
        for memory_id in sorted(set(past) - set(with_point)):
            if memory_id in inventory.points or memory_id not in inventory.history:
                continue  # another scope's point now, or nothing left in history
            last = inventory.history[memory_id].last
            (already if last.event == "DELETE" else history_only).append(memory_id)
    return Targets(
        with_point=tuple(sorted(with_point)),
        history_only=tuple(sorted(history_only)),
        not_found=tuple(sorted(not_found)),
        already_deleted=tuple(sorted(already)),
    )


def select_expired(inventory: Inventory, today: date) -> Targets:
    """The memories whose ``expiration_date`` is before ``today`` (UTC), sorted. Pure."""
    expired = [point.id for point in inventory.points.values() if is_expired(point, today)]
    return Targets(with_point=tuple(sorted(expired)), history_only=(), not_found=())


def refuse_bad_mem0(version: str | None, bulk: bool) -> None:
    """Raise ConfigError (exit 10) when the installed mem0ai has a known delete bug. Pure."""
    if version is None:
        raise ConfigError("environment", ["mem0ai is not installed: deletes go through mem0's API"])
    try:
        parsed = Version(version)
    except InvalidVersion:
        return
    for row in versions.known_bad_mem0(str(parsed)):
        if bulk and row.refuses_bulk_delete:
            raise ConfigError(
                "environment", [f"mem0ai {version}: {row.problem}; upgrade mem0ai first"]
            )


def prove_gone(inventory: Inventory, memory_ids: Iterable[str]) -> list[str]:
    """The ids that are not gone: a point left, last event not DELETE, or an entity link. Pure."""
    linked = {m for entity in inventory.entities for m in entity.linked_memory_ids}
    unproven = []
    for memory_id in memory_ids:
        last = inventory.history.get(memory_id)
        if (
            memory_id in inventory.points
            or last is None
            or last.last.event != "DELETE"
            or memory_id in linked
        ):
            unproven.append(memory_id)
    return sorted(unproven)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """What a forget, erase or prune asks for; resolved to memory ids only when it is applied.

    ``memory_ids`` or one scope (``user_id``/``agent_id``/``run_id``) for forget and erase;
    nothing for prune (every memory expired on the day it is applied). A queued request keeps
    this selection, never the ids it resolved to, so an erasure of a user applied later also
    reaches the memories the app added meanwhile.
    """

    kind: pending.Kind
    memory_ids: tuple[str, ...] = ()
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    @property
    def erase(self) -> bool:
        """Whether the texts are erased too."""
        return self.kind == "erase"

    @property
    def scope(self) -> dict[str, str]:
        """The scope's given fields (``{"user_id": "alice"}``), empty for ids and prune."""
        pairs = (("user_id", self.user_id), ("agent_id", self.agent_id), ("run_id", self.run_id))
        return {name: value for name, value in pairs if value}

    def select(self, inventory: Inventory, today: date, past: Collection[str] = ()) -> Targets:
        """The targets in ``inventory`` (``select_expired`` or ``select_targets``). Pure.

        ``past``: the scope's ids from its records (``erase.scope_past``), for an erasure.
        """
        if self.kind == "prune":
            return select_expired(inventory, today)
        return select_targets(
            inventory, self.memory_ids, self.user_id, self.agent_id, self.run_id, past
        )

    def has_work(self, targets: Targets) -> bool:
        """Whether applying it would change anything (deletes, or an erasure). Pure."""
        return bool(targets.all or (self.erase and targets.already_deleted))

    def request(self, now: datetime) -> pending.PendingRequest:
        """The queue entry recording it, asked now by this process."""
        return pending.new_request(
            self.kind, now, memory_ids=self.memory_ids, user_id=self.user_id,
            agent_id=self.agent_id, run_id=self.run_id,
        )  # fmt: skip

    @classmethod
    def of(cls, request: pending.PendingRequest) -> Ask:
        """The selection a queued request recorded."""
        return cls(
            kind=request.kind, memory_ids=request.memory_ids, user_id=request.user_id,
            agent_id=request.agent_id, run_id=request.run_id,
        )  # fmt: skip
