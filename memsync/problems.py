"""``find_problems``: every disagreement between captured stores, as findings. Pure.

The judging half of ``check`` (``memsync.check`` is the I/O half and re-exports these names).
Codes, severities and default fixes come from ``memsync.findings``; each finding carries its
scope and the expected and observed values, so nothing downstream parses a message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

from memsync import findings
from memsync.model import (
    Finding,
    Inventory,
    MemoryHistory,
    Point,
    parse_time,
    payload_hash,
)
from memsync.problems_common import (
    IN_FLIGHT_MARGIN,
    LIVE_EVENTS,
    SCOPE_KEYS,
    finding_or_in_flight,
    in_window,
    session_scope,
)
from memsync.problems_warnings import warnings_of

__all__ = [
    "IN_FLIGHT_MARGIN", "LIVE_EVENTS", "NOTHING_AROUND", "SCOPE_KEYS", "Surroundings",
    "find_problems", "in_window", "session_scope",
]  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Surroundings:
    """What check's I/O half saw around the capture that the inventory does not hold.

    Attributes:
        history_path: the configured history.db path (named in ``history-missing``).
        history_file_exists: False when history.db does not exist at all (as opposed to
            existing without rows or table): then a wrong path is the likely cause; None when
            not known (a snapshot's copies).
        store_location: the vector store's directory (named in ``private-tmp-mismatch``).
        foreign_holder: the process holding the vector store in another mount namespace
            (``pid 12 (python app.py)``), whose files are not the ones captured; None when
            no such process holds it.
        store_kind: the vector store's kind (``VectorStore.kind``: ``"local_qdrant"``,
            ``"pgvector"``, ...), worded into ``collection-missing``; None when not known.
    """

    history_path: str | None = None
    history_file_exists: bool | None = None
    store_location: str | None = None
    foreign_holder: str | None = None
    store_kind: str | None = None


NOTHING_AROUND = Surroundings()


def find_problems(
    inventory: Inventory, today: date, around: Surroundings = NOTHING_AROUND
) -> list[Finding]:
    """Return every disagreement between the captured stores, sorted as the contract says.

    Args:
        inventory: the captured stores, read into values.
        today: the current UTC date (for ``expired-memory``).
        around: what the capture's surroundings said (a missing history file, a store held
            in another mount namespace).

    Returns:
        Findings sorted by severity, code, collection, memory_id. A disagreement explained by
        a write inside the capture window is reported once, as ``in-flight`` (info). When the
        store is held in another mount namespace, the one ``private-tmp-mismatch`` finding
        stands for every disagreement (they compare files the app does not write). Pure.
    """
    found = _find_all(inventory, today, around)
    if around.foreign_holder is None:
        return found
    return [_foreign_store(inventory, around, len(found))]


def _foreign_store(inventory: Inventory, around: Surroundings, hidden: int) -> Finding:
    return findings.make(
        "private-tmp-mismatch",
        f"{around.foreign_holder} holds the vector store {around.store_location} in another "
        "mount namespace (PrivateTmp=yes?): the files memsync reads are not the ones the app "
        f"writes, so the {hidden} findings on them are not reported one by one",
        collection=inventory.collection,
        path=around.store_location,
        observed=hidden,
    )


def _find_all(inventory: Inventory, today: date, around: Surroundings) -> list[Finding]:
    found: list[Finding] = []
    found += _store_level(inventory, around)
    if inventory.qdrant_present and inventory.collection in inventory.collections:
        if inventory.history_present:
            found += _point_vs_history(inventory)
        found += _payload_checks(inventory.points.values(), inventory.collection)
        found += _point_sizes(inventory)
        found += warnings_of(inventory, today)
    return sorted(found, key=Finding.sort_key)


def _store_level(inventory: Inventory, around: Surroundings) -> list[Finding]:
    found = []
    live = sum(1 for memory in inventory.history.values() if memory.last.event in LIVE_EVENTS)
    if inventory.collection not in inventory.collections and live:
        found.append(_collection_missing(inventory, around, live))
    if not inventory.history_present and inventory.points:
        found.append(_history_missing(inventory, around))
    for name, files in sorted(inventory.legacy_stores.items()):
        found.append(
            findings.make(
                "legacy-point-store",
                f"collection {name!r} keeps qdrant-client's legacy dbm point store "
                f"({', '.join(files)}) beside the storage.sqlite qdrant-client reads: its points are "
                "invisible to mem0, not lost",
                collection=name,
                path=", ".join(files),
            )
        )
    for name, info in sorted(inventory.collections.items()):
        if name not in (inventory.collection, f"{inventory.collection}_entities"):
            continue
        for key, size in inventory.expected_dims:
            if info.vector_size is not None and info.vector_size != size:
                found.append(
                    findings.make(
                        "dimension-mismatch",
                        f"collection {name!r} stores vectors of size {info.vector_size} but {key} is {size}: "
                        "mem0 accepts it at start, then inserts and searches fail",
                        collection=name,
                        expected=size,
                        observed=info.vector_size,
                    )
                )
    return found


def _collection_missing(inventory: Inventory, around: Surroundings, live: int) -> Finding:
    if around.store_kind == "pgvector":  # mem0's table: a DROP, a restore elsewhere, a wrong db
        return findings.make(
            "collection-missing",
            f"table {inventory.collection!r} does not exist on {around.store_location} while "
            f"history has {live} live memories (dropped, restored into another database, or a "
            "wrong dbname/collection_name)",
            collection=inventory.collection,
            path=around.store_location,
        )
    if around.store_kind is None:  # a snapshot's copies: no live store to blame
        return findings.make(
            "collection-missing",
            f"collection {inventory.collection!r} is not in the copy while its history has {live} "
            "live memories",
            collection=inventory.collection,
        )
    where = "" if inventory.qdrant_present else " (the embedded Qdrant directory itself is gone)"
    return findings.make(
        "collection-missing",
        f"collection {inventory.collection!r} does not exist{where} while history has {live} live "
        "memories (a wiped /tmp, a deleted directory, a wrong path)",
        collection=inventory.collection,
    )


def _history_missing(inventory: Inventory, around: Surroundings) -> Finding:
    points = len(inventory.points)
    if around.history_file_exists is None:
        return findings.make(
            "history-missing",
            f"history.db is missing or has no history table while {points} points exist",
            collection=inventory.collection,
        )
    if around.history_file_exists:
        return findings.make(
            "history-missing",
            f"history.db has no history table or rows while {points} points exist",
            collection=inventory.collection,
            path=around.history_path,
            fix="memsync restore <snapshot> (history.db), or memsync reconcile to record "
            "the points' ADD events",
        )
    where = f" at {around.history_path}" if around.history_path else ""
    return findings.make(
        "history-missing",
        f"history.db does not exist{where} while {points} points exist: a wrong mem0_dir or "
        "history_db_path looks exactly like this",
        collection=inventory.collection,
        path=around.history_path,
    )


def _point_vs_history(inventory: Inventory) -> list[Finding]:
    found = []
    points, history = inventory.points, inventory.history
    for point_id, point in points.items():
        memory = history.get(point_id)
        if memory is None:
            found.append(
                finding_or_in_flight(
                    inventory,
                    "orphan-point",
                    point_id,
                    "point exists but history has no event for it (its history write failed or history "
                    "rows were deleted)",
                    _point_time(point),
                    scope=session_scope(point.payload),
                )
            )
        elif memory.last.event == "DELETE":
            found.append(
                finding_or_in_flight(
                    inventory,
                    "resurrected-point",
                    point_id,
                    f"point exists but the memory's last history event is DELETE (history row {memory.last.id})",
                    memory.last.at,
                    scope=session_scope(point.payload),
                    expected="DELETE",
                )
            )
        elif memory.last.event in LIVE_EVENTS:
            found += _text_mismatch(inventory, point, memory)
    for memory_id, memory in history.items():
        if memory.last.event in LIVE_EVENTS and memory_id not in points:
            found.append(
                finding_or_in_flight(
                    inventory,
                    "missing-point",
                    memory_id,
                    f"the memory's last history event is {memory.last.event} (history row {memory.last.id}) "
                    "but no point has its id",
                    memory.last.at,
                    expected=memory.last.event,
                )
            )
    return found


def _text_mismatch(inventory: Inventory, point: Point, memory: MemoryHistory) -> list[Finding]:
    """``text-mismatch`` when the payload text differs from the last live event's text."""
    data, last = point.payload.get("data"), memory.last
    if not isinstance(data, str) or last.new_memory is None or data == last.new_memory:
        return []
    return [
        finding_or_in_flight(
            inventory,
            "text-mismatch",
            point.id,
            f"payload data differs from the new_memory of the last {last.event} event (history row {last.id})",
            _latest(last.at, _point_time(point)),
            scope=session_scope(point.payload),
            expected=payload_hash(last.new_memory),
            observed=payload_hash(data),
        )
    ]


def _latest(*moments: datetime | None) -> datetime | None:
    present = [moment for moment in moments if moment is not None]
    return max(present) if present else None


def _point_time(point: Point) -> datetime | None:
    return _latest(
        parse_time(point.payload.get("updated_at")), parse_time(point.payload.get("created_at"))
    )


def _payload_checks(points: Iterable[Point], collection: str) -> list[Finding]:
    found = []
    for point in points:
        data = point.payload.get("data")
        if not isinstance(data, str):
            found.append(
                findings.make(
                    "missing-payload",
                    "point has no payload 'data' text: mem0 cannot return this memory",
                    collection=collection,
                    memory_id=point.id,
                    scope=session_scope(point.payload),
                )
            )
            continue
        stored = point.payload.get("hash")
        expected = payload_hash(data)
        if stored != expected:
            shown = (
                repr(stored)
                if isinstance(stored, str | None)
                else f"of type {type(stored).__name__}"
            )
            found.append(
                findings.make(
                    "hash-mismatch",
                    f"payload hash {shown} is not the md5 of payload data ({expected}): the payload was "
                    "edited outside mem0",
                    collection=collection,
                    memory_id=point.id,
                    scope=session_scope(point.payload),
                    expected=expected,
                    observed=stored if isinstance(stored, str) else None,
                )
            )
    return found


def _point_sizes(inventory: Inventory) -> list[Finding]:
    """Points whose vector is not the collection's size: mem0 cannot even open such a store.

    A collection with no declared size (pgvector's untyped ``vector`` column, in a table made
    outside mem0) is held to the configured size instead.
    """
    expected = inventory.collections[inventory.collection].vector_size
    against = f"the collection {expected}"
    if expected is None and inventory.expected_dims:
        key, expected = inventory.expected_dims[0]
        against = f"the collection declares no size and {key} is {expected}"
    if expected is None:
        return []
    return [
        findings.make(
            "dimension-mismatch",
            f"point's vector has {point.vector_size} dimensions, {against}",
            collection=inventory.collection,
            memory_id=point.id,
            fix="memsync reconcile re-embeds it through mem0 (or restore a snapshot)",
            scope=session_scope(point.payload),
            expected=expected,
            observed=point.vector_size,
        )
        for point in inventory.points.values()
        if point.vector_size is not None and point.vector_size != expected
    ]
