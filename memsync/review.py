"""``review``, ``confirm``, ``audit``, ``export-context``: what the agent remembers, and from whom.

``plan_review``, ``find_audit`` and ``build_context`` are pure. ``confirm`` stamps the payload
key ``confirmed_at`` (UTC ISO 8601) through a route's writer (``memsync.routes``:
``update_metadata``, i.e. ``Memory.update``);
mem0ai 2.2.1 records that as an UPDATE whose old and new text are equal, which review and audit
treat as a metadata change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from memsync import routes, utc
from memsync.deployment import Deployment
from memsync.model import HistoryEvent, Point, is_expired, parse_time
from memsync.stores import capture, history

CONFIRMED_AT = "confirmed_at"
SOURCE_KEYS = (
    "source",
    "role",
    "actor_id",
    "user_id",
    "agent_id",
    "run_id",
    "created_at",
    "updated_at",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reviewed:
    """One memory to review: its text, when it was last confirmed, and where it came from."""

    memory_id: str
    text: str | None
    confirmed_at: datetime | None
    confirmed_by: str
    source: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """One row of ``review --json`` and ``export-context --json``."""
        return {
            "memory_id": self.memory_id,
            "text": self.text,
            "confirmed_at": utc.iso_or_none(self.confirmed_at),
            "confirmed_by": self.confirmed_by,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Listed:
    """``review`` (``user_id`` None) or ``export-context`` (one user's live memories)."""

    memories: tuple[Reviewed, ...]
    user_id: str | None = None
    due: int | None = None  # review: memories due in all (``memories`` holds at most --limit)

    def to_json(self) -> dict[str, Any]:
        """``review --json`` or ``export-context --json``."""
        rows = [r.to_json() for r in self.memories]
        if self.user_id is None:
            return {"command": "review", "due": self.due, "memories": rows}
        return {"command": "export-context", "user_id": self.user_id, "memories": rows}


def last_confirmed(point: Point) -> tuple[datetime | None, str]:
    """``confirmed_at`` when memsync stamped it, else ``updated_at``/``created_at``. Pure."""
    stamped = parse_time(point.payload.get(CONFIRMED_AT))
    if stamped is not None:
        return stamped, CONFIRMED_AT
    return parse_time(point.payload.get("updated_at")) or parse_time(
        point.payload.get("created_at")
    ), "updated_at"


def plan_review(
    points: Iterable[Point], now: datetime, older_than: timedelta, limit: int
) -> tuple[list[Reviewed], int]:
    """The ``limit`` memories confirmed longest ago (before ``now - older_than``), and the total.

    Oldest first; the total counts every memory due, shown or not. Pure.
    """
    cutoff = now - older_than
    rows = []
    for point in points:
        confirmed, by = last_confirmed(point)
        if confirmed is None or confirmed <= cutoff:
            rows.append(
                Reviewed(
                    memory_id=point.id,
                    text=_text(point),
                    confirmed_at=confirmed,
                    confirmed_by=by,
                    source={k: point.payload.get(k) for k in SOURCE_KEYS if k in point.payload},
                )
            )
    rows.sort(key=lambda r: (r.confirmed_at is not None, r.confirmed_at or now, r.memory_id))
    return rows[:limit], len(rows)


def _text(point: Point) -> str | None:
    value = point.payload.get("data")
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Audited:
    """One change in the audit window: what kind, by whom, and whether to look twice."""

    memory_id: str
    kind: str  # added | changed | metadata | deleted
    at: datetime
    actor_id: str | None
    role: str | None
    text: str | None
    source: str | None
    flagged: bool

    def to_json(self) -> dict[str, Any]:
        """One row of ``audit --json``'s ``changes``."""
        return {
            "memory_id": self.memory_id,
            "kind": self.kind,
            "at": utc.iso_or_none(self.at),
            "actor_id": self.actor_id,
            "role": self.role,
            "source": self.source,
            "text": self.text,
            "flagged": self.flagged,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Audit:
    """``audit``: the changes since ``since``."""

    since: datetime
    changes: tuple[Audited, ...]

    def to_json(self) -> dict[str, Any]:
        """``audit --json``."""
        return {
            "command": "audit",
            "since": utc.iso_or_none(self.since),
            "changes": [a.to_json() for a in self.changes],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmed:
    """``confirm``: the memories stamped (or, dry, to stamp), those not found, and the route."""

    memory_ids: tuple[str, ...]
    at: datetime
    taken: routes.Taken
    not_found: tuple[str, ...] = ()
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        """``confirm --json`` (a dry run: ``memory_ids`` and the ``route`` it would take)."""
        if self.dry_run:
            return {
                "command": "confirm",
                "dry_run": True,
                "memory_ids": list(self.memory_ids),
                "route": self.taken.route,
            }
        return {
            "command": "confirm",
            "confirmed": list(self.memory_ids),
            "not_found": list(self.not_found),
            "confirmed_at": utc.iso_or_none(self.at),
            **self.taken.as_json(),
        }


def find_audit(
    events: Iterable[HistoryEvent], points: Mapping[str, Point], since: datetime
) -> list[Audited]:
    """Memories added or changed since ``since``, newest first. Pure.

    An UPDATE with equal old and new text is a ``metadata`` change (``confirm`` writes those).
    A change whose role is not ``user`` is flagged: text that came from tools or fetched pages
    can become standing instructions.
    """
    found = []
    for event in events:
        moment = event.at
        if moment is None or moment < since:
            continue
        if event.event == "ADD":
            kind = "added"
        elif event.event == "UPDATE":
            kind = "metadata" if event.old_memory == event.new_memory else "changed"
        elif event.event == "DELETE":
            kind = "deleted"
        else:
            continue
        point = points.get(event.memory_id)
        payload = point.payload if point else {}
        role = event.role or (payload.get("role") if isinstance(payload.get("role"), str) else None)
        source = payload.get("source") if isinstance(payload.get("source"), str) else None
        flagged = kind in ("added", "changed") and role not in ("user", None)
        found.append(
            Audited(
                memory_id=event.memory_id,
                kind=kind,
                at=moment,
                actor_id=event.actor_id,
                role=role,
                text=event.new_memory,
                source=source,
                flagged=flagged,
            )
        )
    found.sort(key=lambda a: (a.at, a.memory_id), reverse=True)
    return found


def build_context(points: Iterable[Point], user_id: str, today: date) -> list[Reviewed]:
    """The user's live memories (expired ones left out), most recently confirmed first. Pure."""
    rows = []
    for point in points:
        if point.payload.get("user_id") != user_id:
            continue
        if is_expired(point, today):
            continue
        confirmed, by = last_confirmed(point)
        rows.append(
            Reviewed(
                memory_id=point.id,
                text=_text(point),
                confirmed_at=confirmed,
                confirmed_by=by,
                source={k: point.payload.get(k) for k in SOURCE_KEYS if k in point.payload},
            )
        )
    rows.sort(
        key=lambda r: (
            r.confirmed_at is None,
            -(r.confirmed_at.timestamp() if r.confirmed_at else 0),
            r.memory_id,
        )
    )
    return rows


def load_points_and_events(
    deployment: Deployment, with_events: bool
) -> tuple[dict[str, Point], list[HistoryEvent]]:
    """Capture the stores; return every point (full payload) and, optionally, every history event.

    Reads only (no lock); the copies are removed.
    """
    config = deployment.config
    with capture.temporary_capture(deployment.vector_store, config) as captured:
        points = deployment.vector_store.read_points(captured.vectors)
        events = (
            list(history.iter_events(captured.history_copy.dest))
            if with_events and captured.history_copy
            else []
        )
    return points, events


def confirm(
    deployment: Deployment,
    memory_ids: Sequence[str],
    now: datetime,
    taken: routes.Taken | None = None,
) -> tuple[list[str], list[str]]:
    """Stamp ``confirmed_at`` on each memory through a route; return (confirmed, not found).

    ``taken`` (optional) receives the route and a window's downtime (``routes.open_writer``).

    Raises:
        NoRouteError: (exit 12) the app holds the store and no agent or window can write.
        WindowError, WindowOverrunError, LockedError, ConfigError: as ``routes.open_writer``.
    """
    done: list[str] = []
    missing: list[str] = []
    with deployment.open_writer("confirm", taken) as writer:
        for memory_id in memory_ids:
            stamped = writer.update_metadata(memory_id, {CONFIRMED_AT: now.isoformat()})
            (done if stamped else missing).append(memory_id)
    return done, missing
