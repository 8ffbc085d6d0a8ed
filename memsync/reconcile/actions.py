"""What a reconcile plan is made of: action kinds, actions, and the context rules read. Pure.

``memsync.reconcile.plan`` turns findings into these; ``memsync.reconcile.apply`` applies them and keeps
them in its journal (``Action`` round-trips through JSON: its kind is written as the string).
History rows an action carries follow docs/reference/contract.md ("The direct writes memsync may
make"): ``memsync-<uuid4>`` ids, ``actor_id = "memsync"``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memsync.model import Finding, HistoryEvent, Inventory, Point, Recovery


class ActionKind(enum.StrEnum):
    """What an action does; the values are written to the journal and the JSON output."""

    DELETE_POINT = "delete-point"
    RESTORE_POINT = "restore-point"
    RECORD_EVENT = "record-event"
    UPDATE_POINT = "update-point"
    RELINK_ENTITY = "relink-entity"
    DELETE_MESSAGES = "delete-messages"
    REPORT = "report"  # nothing to do but say why


NEEDS_EMBEDDER = frozenset({ActionKind.UPDATE_POINT.value})
KNOWN_KINDS = frozenset(kind.value for kind in ActionKind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """One step of a plan.

    Attributes:
        kind: an ``ActionKind`` (a journal written by another version may hold an unknown
            string, kept as is so applying it fails cleanly).
        code: the finding it answers; ``memory_id`` the memory (or None).
        why: a sentence for the operator.
        params: what the action needs (texts, ids, a snapshot path, a prepared history row).
        status: ``pending``, ``done``, ``failed``, ``unrecoverable`` or ``superseded``.
    """

    index: int
    kind: ActionKind | str
    code: str
    memory_id: str | None
    why: str
    params: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"
    error: str | None = None

    def __post_init__(self) -> None:
        """Read a known kind loaded from a journal back as its ``ActionKind``."""
        if not isinstance(self.kind, ActionKind) and self.kind in KNOWN_KINDS:
            object.__setattr__(self, "kind", ActionKind(self.kind))


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What every rule may look at besides its findings (all values; nothing to call but ``new_id``)."""

    inventory: Inventory
    recoveries: Mapping[str, Recovery | None]
    record_lost: bool
    stamp: str
    new_id: Callable[[], str]
    forgetting: frozenset[str]
    wanted: frozenset[str]
    codes_of: Mapping[str, frozenset[str]]  # per memory id, the codes of all its findings
    history_writable: bool = True  # history.db exists, or --create-history asked for a new one

    def point(self, finding: Finding) -> Point | None:
        """The finding's point, when it has one."""
        return self.inventory.points.get(finding.memory_id) if finding.memory_id else None

    def last(self, finding: Finding) -> HistoryEvent | None:
        """The last history event of the finding's memory, when history has one."""
        memory = self.inventory.history.get(finding.memory_id) if finding.memory_id else None
        return memory.last if memory is not None else None


Rule = Callable[[Sequence[Finding], Context], list[Action]]


def act(
    finding: Finding,
    kind: ActionKind,
    why: str,
    *,
    code: str | None = None,
    target: str | None = None,
    status: str = "pending",
    **params: Any,
) -> Action:
    """An action answering ``finding`` (``target`` defaults to its memory id); numbered later."""
    return Action(
        index=0,
        kind=kind,
        code=code or finding.code,
        memory_id=target or finding.memory_id,
        why=why,
        params=params,
        status=status,
    )


def event_row(
    memory_id: str,
    event: str,
    old: str | None,
    new: str | None,
    created: str | None,
    updated: str | None,
    event_id: str,
) -> dict[str, Any]:
    """A history row memsync records (``history`` table columns, mem0ai 2.2.1 schema). Pure."""
    return {
        "id": event_id,
        "memory_id": memory_id,
        "old_memory": old,
        "new_memory": new,
        "event": event,
        "created_at": created,
        "updated_at": updated,
        "is_deleted": 1 if event == "DELETE" else 0,
        "actor_id": "memsync",
        "role": None,
    }


def text_of(point: Point) -> str | None:
    """The point's payload ``data`` text, or None when it holds none. Pure."""
    value = point.payload.get("data")
    return value if isinstance(value, str) else None


def payload_time(point: Point, key: str) -> str | None:
    """The payload's timestamp text under ``key`` as stored, or None. Pure."""
    value = point.payload.get(key)
    return value if isinstance(value, str) else None


def add_row(
    point: Point, new_id: Callable[[], str], memory_id: str | None = None
) -> dict[str, Any]:
    """The ADD event a point's lost history should have had."""
    return event_row(
        memory_id or point.id,
        "ADD",
        None,
        text_of(point),
        payload_time(point, "created_at"),
        payload_time(point, "updated_at"),
        new_id(),
    )
