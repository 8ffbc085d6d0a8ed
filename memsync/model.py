"""Frozen value types shared by every layer: what the stores hold and what memsync finds.

The per-row types (``Point``, ``HistoryEvent``, ``MemoryHistory``) are NamedTuples: a check
builds one per point and per memory, and a NamedTuple is built several times faster than a
frozen dataclass. Nothing here does I/O. Datetimes are timezone-aware UTC; sizes are bytes; durations seconds.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from memsync.errors import ExitCode
from memsync.utc import iso


def parse_time(value: object) -> datetime | None:
    """Parse a stored ISO 8601 timestamp to aware UTC; naive values are taken as UTC. Pure.

    Returns None for NULL or unparseable values (they never count as "in the window").
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def expires_on(payload: Mapping[str, Any]) -> date | None:
    """The payload's ``expiration_date``, or None. Pure.

    Parsed exactly as mem0ai 2.2.1 does (``date.fromisoformat`` of the whole value): a value
    that is not a plain date never expires for mem0, so not for memsync either.
    """
    value = payload.get("expiration_date")
    if not value:
        return None
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        return None


def payload_hash(data: str) -> str:
    """Return the payload ``hash`` mem0 stores for text ``data``: md5 hex of its UTF-8 bytes. Pure.

    mem0ai 2.2.1 computes ``hashlib.md5(data.encode()).hexdigest()`` on every add and update.
    A lone surrogate (which mem0 itself cannot encode) is hashed with ``surrogatepass`` so a
    hostile payload yields a digest that never matches, never an exception.
    """
    return hashlib.md5(data.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


def is_expired(point: Point, today: date) -> bool:
    """Whether a point's expiration date is before ``today`` (UTC), as mem0 hides it. Pure."""
    expires = expires_on(point.payload)
    return expires is not None and expires < today


class Severity(enum.Enum):
    """How bad a finding is; ERROR findings make check/doctor exit 3."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Sort rank: errors first."""
        return {"error": 0, "warning": 1, "info": 2}[self.value]


class Point(NamedTuple):
    """One point of a Qdrant collection, as read from a capture (the vector itself is dropped).

    Attributes:
        id: the point id as Qdrant normalises it (a lowercase hyphenated UUID for mem0).
        payload: the point's payload (mem0 keys: data, hash, created_at, updated_at, user_id, ...).
        vector_size: length of the default (unnamed) dense vector; None when there is none.
    """

    id: str
    payload: Mapping[str, Any]
    vector_size: int | None


class HistoryEvent(NamedTuple):
    """One row of mem0's ``history`` table (mem0ai 2.2.1 schema).

    Attributes:
        rowid: SQLite rowid; the highest rowid of a memory is its last event.
        event: ``ADD``, ``UPDATE`` or ``DELETE`` (as stored; other values are kept as is).
        created_at, updated_at: the row's own timestamps as stored (ISO 8601 text, or None);
            parsed only when needed, through ``at``.
    """

    rowid: int
    id: str
    memory_id: str
    old_memory: str | None
    new_memory: str | None
    event: str
    created_at: str | None
    updated_at: str | None
    is_deleted: int | None
    actor_id: str | None
    role: str | None

    @property
    def at(self) -> datetime | None:
        """When the event happened (UTC): ``updated_at``, else ``created_at``; None if neither parses."""
        return parse_time(self.updated_at) or parse_time(self.created_at)


class MemoryHistory(NamedTuple):
    """What history says about one memory: its last event and how many rows it has."""

    memory_id: str
    last: HistoryEvent
    row_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectionInfo:
    """A collection's parameters from Qdrant's ``meta.json``.

    Attributes:
        vector_size: size of the default dense vector; None for named-vector collections.
        distance: Qdrant's distance name (``Cosine``, ``Dot``, ``Euclid``, ``Manhattan``).
        sparse_vectors: names of the sparse vectors (mem0 adds ``bm25``).
    """

    name: str
    vector_size: int | None
    distance: str | None
    sparse_vectors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class EntityLink:
    """An entity point of ``<collection>_entities`` and the memory ids it links."""

    entity_id: str
    text: str | None
    linked_memory_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageScope:
    """Raw ``messages`` rows of one session scope (mem0's scope string)."""

    scope: str
    row_count: int
    newest_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureWindow:
    """When the stores were captured (UTC): vectors first, then history.

    Attributes:
        vectors_at: start of the first collection's copy (its read snapshot).
        vectors_finished_at: end of the last collection's copy.
        history_at: start of the history copy (its read snapshot).
        history_finished_at: end of the history copy.
        longest_read_s: the longest single read transaction on a live file, seconds.
        in_flight_margin_s: how long before ``vectors_at`` a write may have started and still
            be in flight (``[check] in_flight_margin_s``; not recorded in manifests).
    """

    vectors_at: datetime
    vectors_finished_at: datetime
    history_at: datetime
    history_finished_at: datetime
    longest_read_s: float
    in_flight_margin_s: float = 2.0  # writes start before they land: mem0 stamps, embeds, inserts

    @property
    def in_flight_margin(self) -> timedelta:
        """``in_flight_margin_s`` as a duration."""
        return timedelta(seconds=self.in_flight_margin_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Inventory:
    """Everything ``check`` judges, read from one capture of both stores.

    Attributes:
        collection: the configured memory collection's name.
        qdrant_present: whether the embedded Qdrant directory (with meta.json) exists.
        collections: parameters of every collection in meta.json, by name.
        points: the memory collection's points by id (newest row wins); empty when absent.
        history_present: whether history.db exists and has a ``history`` table.
        history: per memory_id, its last event and row count.
        history_rows: number of rows in ``history``.
        entities: entity points of ``<collection>_entities`` (empty when absent).
        message_scopes: the ``messages`` table grouped by session scope.
        expected_dims: ``(config key, size)`` pairs the collections' vector size must match.
        window: the capture instants.
        legacy_stores: files of a legacy point store the vector store's client no longer reads,
            by collection (``VectorCapture.legacy_files``; {} when none).
    """

    collection: str
    qdrant_present: bool
    collections: Mapping[str, CollectionInfo]
    points: Mapping[str, Point]
    history_present: bool
    history: Mapping[str, MemoryHistory]
    history_rows: int
    entities: tuple[EntityLink, ...]
    message_scopes: tuple[MessageScope, ...]
    expected_dims: tuple[tuple[str, int], ...]
    window: CaptureWindow
    legacy_stores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """Where a missing point can be recovered from: a snapshot holding it with the right text.

    Attributes:
        snapshot_id: the snapshot's id.
        storage: the vector-store copy in that snapshot's plaintext (``<plaintext>/<capture_dir>``,
            the ``root`` that ``VectorStore.find_point`` reads).
    """

    snapshot_id: str
    storage: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One problem found, with a stable code (docs/reference/findings.md) and a fix.

    Build one with ``memsync.findings.make``, which takes the severity and default fix from the
    registry. The structured fields carry what the message says in words, so no consumer ever
    parses a message.

    Attributes:
        scope: mem0's session scope string (``user_id=alice&agent_id=...``) of the point or
            the raw messages concerned; ``""`` for a point with none; None when no scope applies.
        expected: the value the authority holds (config or collection vector size, md5 hex of
            the text, the last history event, ...); None when the finding compares nothing.
        observed: the value found instead; None when nothing was found. The pairs for each code
            are listed in docs/reference/findings.md.
    """

    code: str
    severity: Severity
    message: str
    collection: str | None = None
    memory_id: str | None = None
    path: str | None = None
    fix: str | None = None
    scope: str | None = None
    expected: str | int | None = None
    observed: str | int | None = None

    def sort_key(self) -> tuple[int, str, str, str]:
        """Contract order: severity, code, collection, memory_id."""
        return (self.severity.rank, self.code, self.collection or "", self.memory_id or "")

    def to_json(self) -> dict[str, Any]:
        """Return the finding as the contract's JSON object (keys are only ever added)."""
        return {
            "code": self.code,
            "severity": self.severity.value,
            "collection": self.collection,
            "memory_id": self.memory_id,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
            "scope": self.scope,
            "expected": self.expected,
            "observed": self.observed,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckReport:
    """The result of ``check``: sorted findings plus the counts and capture instants."""

    findings: tuple[Finding, ...]
    points: int
    history_memories: int
    history_rows: int
    window: CaptureWindow
    extra_counts: Mapping[str, int] = field(default_factory=dict)
    scopes: Mapping[str, Any] | None = None  # the memories per scope (``count_scopes``)

    def count(self, severity: Severity) -> int:
        """Number of findings of ``severity``."""
        return sum(1 for finding in self.findings if finding.severity is severity)

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return self.count(Severity.ERROR) == 0

    @property
    def exit_code(self) -> ExitCode:
        """0 when ok, else 3."""
        return ExitCode.OK if self.ok else ExitCode.PROBLEMS_FOUND

    def counts(self) -> dict[str, int]:
        """The contract's ``counts`` object."""
        return {
            "points": self.points,
            "history_memories": self.history_memories,
            "errors": self.count(Severity.ERROR),
            "warnings": self.count(Severity.WARNING),
            "infos": self.count(Severity.INFO),
        }

    def to_json(self, backend: str = "embedded-qdrant") -> dict[str, Any]:
        """The contract's ``check --json`` document (``backend``: ``VectorStore.kind``)."""
        window = self.window
        return {
            "command": "check",
            "ok": self.ok,
            "backend": backend,
            "counts": {**self.counts(), "history_rows": self.history_rows},
            "capture": {
                "vectors_at": iso(window.vectors_at),
                "history_at": iso(window.history_at),
                "vectors_finished_at": iso(window.vectors_finished_at),
                "history_finished_at": iso(window.history_finished_at),
                "longest_read_s": round(window.longest_read_s, 4),
            },
            "findings": [finding.to_json() for finding in self.findings],
        }


OK, WARNING, ERROR = "ok", "warning", "error"  # the three statuses of a doctor result


@dataclass(frozen=True, slots=True, kw_only=True)
class DoctorResult:
    """One doctor probe result: ``status`` is ``ok``, ``warning`` or ``error``."""

    code: str
    status: str
    message: str
    path: str | None = None
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the result as the contract's JSON object."""
        return {
            "code": self.code,
            "status": self.status,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
        }


SCOPE_KINDS = ("user_id", "agent_id", "run_id")  # mem0ai 2.2.1's scope payload keys
TOTAL = "total"


def count_scopes(payloads: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Count memories in all and per scope id: the manifest's ``scopes`` field. Pure.

    Args:
        payloads: the payloads of the memory collection's points (one per memory).

    Returns:
        ``{"total": n, "user_id": {id: n}, "agent_id": {id: n}, "run_id": {id: n}}``, ids
        sorted. A memory counts once in ``total`` and once under each scope key it carries; an
        absent, null or empty value is no scope. Non-string ids are counted by ``str(value)``.
    """
    total = 0
    counts: dict[str, dict[str, int]] = {kind: {} for kind in SCOPE_KINDS}
    for payload in payloads:
        total += 1
        for kind in SCOPE_KINDS:
            value = payload.get(kind)
            if value is None or value == "":
                continue
            scope_id = str(value)
            counts[kind][scope_id] = counts[kind].get(scope_id, 0) + 1
    return {TOTAL: total, **{kind: dict(sorted(counts[kind].items())) for kind in SCOPE_KINDS}}


def add_scopes(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Two ``count_scopes`` documents added up (the counts of both sets of memories). Pure."""
    added: dict[str, Any] = {TOTAL: int(first.get(TOTAL, 0)) + int(second.get(TOTAL, 0))}
    for kind in SCOPE_KINDS:
        counts = dict(first.get(kind) or {})
        for scope_id, count in (second.get(kind) or {}).items():
            counts[scope_id] = counts.get(scope_id, 0) + count
        added[kind] = dict(sorted(counts.items()))
    return added
