"""The per-memory rules of ``find_problems``: a point against its history, its payload, its size. Pure.

Each rule reads only the memories of the inventory it is given, so ``memsync.judge.rules`` runs
them on one chunk of memories at a time (a chunk holds both sides of every id in it).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from memsync import findings
from memsync.judge.common import LIVE_EVENTS, finding_or_in_flight, session_scope
from memsync.model import (
    Finding,
    Inventory,
    MemoryHistory,
    Point,
    parse_time,
    payload_hash,
)


def per_memory(inventory: Inventory) -> list[Finding]:
    """Every per-memory finding of the inventory's points and history (unsorted)."""
    found = []
    if inventory.history_present:
        found += _point_vs_history(inventory)
    found += _payload_checks(inventory.points.values(), inventory.collection)
    found += _point_sizes(inventory)
    return found


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
