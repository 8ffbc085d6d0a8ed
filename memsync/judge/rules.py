"""``find_problems``: every disagreement between captured stores, as findings. Pure.

The judging half of ``check`` (``memsync.check`` is the I/O half and re-exports these names).
Codes, severities and default fixes come from ``memsync.findings``; each finding carries its
scope and the expected and observed values, so nothing downstream parses a message.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from memsync import findings
from memsync.judge.common import (
    LIVE_EVENTS,
    SCOPE_KEYS,
    in_window,
    session_scope,
)
from memsync.judge.memory_rules import per_memory
from memsync.judge.warning_rules import (
    dangling_links,
    duplicate_key,
    duplicates,
    expired,
    orphan_messages,
)
from memsync.model import Finding, Inventory, MemoryHistory, Point, add_scopes, count_scopes

__all__ = [
    "CHUNK_MEMORIES", "LIVE_EVENTS", "NOTHING_AROUND", "SCOPE_KEYS",
    "Judged", "Memories", "OutOfOrder", "Surroundings", "find_problems", "judge_memories",
    "merge_by_id", "of_inventory", "in_window", "session_scope",
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
        missing_collection: what ``collection-missing`` says of the live store, in its
            backend's words (``VectorStore.describe_missing``: what is missing, its likely
            causes, the path to name); None when not known (a snapshot's copies).
    """

    history_path: str | None = None
    history_file_exists: bool | None = None
    store_location: str | None = None
    foreign_holder: str | None = None
    missing_collection: tuple[str, str, str | None] | None = None


NOTHING_AROUND = Surroundings()
CHUNK_MEMORIES = 10_000  # ids judged together; a chunk of points and events is a few MB

# (memory_id, its point or None, its history or None): one per id, from ``merge_by_id`` or an
# inventory's dicts.
Paired = tuple[str, Point | None, MemoryHistory | None]


class OutOfOrder(Exception):  # noqa: N818 - a signal to the caller, not an error shown
    """A stream given to ``merge_by_id`` was not in ascending id order (the merge stopped)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Memories:
    """A capture's memories as one pass of pairs, for ``judge_memories``.

    Attributes:
        summary: the inventory's other fields (collections, entities, message scopes, history
            rows, window, ...); its ``points`` and ``history`` are not read.
        pairs: every id once, with its point and its history (either may be None), any order.
        points_again: reads every point again (any order); called only when two points may be
            duplicates (the second pass of ``duplicate-memory``).
    """

    summary: Inventory
    pairs: Iterable[Paired]
    points_again: Callable[[], Iterable[Point]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Judged:
    """What ``judge_memories`` found: sorted findings, points and memories seen."""

    findings: list[Finding]
    points: int
    memories: int
    scopes: dict[str, Any] = field(default_factory=dict)  # the points per scope (count_scopes)


def merge_by_id(points: Iterable[Point], memories: Iterable[MemoryHistory]) -> Iterator[Paired]:
    """Pair points and history memories by id; both in ascending id order, ids unique. Pure.

    Yields one ``(memory_id, point, memory)`` per id, in order; holds one item of each side.

    Raises:
        OutOfOrder: an id is not greater than the one before it on its side.
    """
    point_stream, memory_stream = iter(points), iter(memories)
    point, memory = next(point_stream, None), next(memory_stream, None)
    last_point = last_memory = ""
    while point is not None or memory is not None:
        if point is not None and (memory is None or point.id <= memory.memory_id):
            if last_point and point.id <= last_point:
                raise OutOfOrder(f"point {point.id} after {last_point}")
            last_point = point.id
            paired = memory if memory is not None and memory.memory_id == point.id else None
            yield point.id, point, paired
            point = next(point_stream, None)
            if paired is not None:
                if last_memory and paired.memory_id <= last_memory:
                    raise OutOfOrder(f"memory {paired.memory_id} after {last_memory}")
                last_memory = paired.memory_id
                memory = next(memory_stream, None)
        else:
            assert memory is not None
            if last_memory and memory.memory_id <= last_memory:
                raise OutOfOrder(f"memory {memory.memory_id} after {last_memory}")
            last_memory = memory.memory_id
            yield memory.memory_id, None, memory
            memory = next(memory_stream, None)


def of_inventory(inventory: Inventory) -> Memories:
    """An inventory's memories as ``Memories`` (pairs from its two dicts). Pure."""

    def pairs() -> Iterator[Paired]:
        for point_id, point in inventory.points.items():
            yield point_id, point, inventory.history.get(point_id)
        for memory_id, memory in inventory.history.items():
            if memory_id not in inventory.points:
                yield memory_id, None, memory

    return Memories(summary=inventory, pairs=pairs(), points_again=inventory.points.values)


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
    return judge_memories(of_inventory(inventory), today, around).findings


def judge_memories(
    memories: Memories,
    today: date,
    around: Surroundings = NOTHING_AROUND,
    chunk: int = CHUNK_MEMORIES,
) -> Judged:
    """``find_problems`` over one pass of memories, ``chunk`` ids at a time.

    Per-memory rules run on each chunk; what spans memories is gathered on the way (counts,
    live scopes, the memories entities link, a 64-bit hash per duplicate key) and judged at the
    end, so memory stays at one chunk plus a few bytes per point. When two points' keys hash
    alike, ``points_again`` is read once to judge just those. Pure (but for that read).

    Raises:
        OutOfOrder: from ``memories.pairs`` (a stream out of order); nothing is returned.
    """
    summary = memories.summary
    tally = _Tally(
        judged=summary.qdrant_present and summary.collection in summary.collections,
        linked={memory_id for entity in summary.entities for memory_id in entity.linked_memory_ids},
    )
    found: list[Finding] = []
    points: dict[str, Point] = {}
    history: dict[str, MemoryHistory] = {}
    for memory_id, point, memory in memories.pairs:
        if point is not None:
            points[memory_id] = point
        if memory is not None:
            history[memory_id] = memory
        if len(points) + len(history) >= chunk:
            found += tally.chunk(replace(summary, points=points, history=history), today)
            points, history = {}, {}
    found += tally.chunk(replace(summary, points=points, history=history), today)
    found = _store_level(summary, around, tally.live, tally.points) + found
    if tally.judged:
        found += tally.across(summary, memories.points_again)
    found.sort(key=Finding.sort_key)
    if around.foreign_holder is not None:
        found = [_foreign_store(summary, around, len(found))]
    return Judged(
        findings=found, points=tally.points, memories=tally.memories, scopes=tally.counted
    )


@dataclass(slots=True, kw_only=True)
class _Tally:
    """What ``judge_memories`` gathers across chunks."""

    judged: bool  # the memory collection exists: per-memory rules apply
    linked: set[str]  # memory ids entity points link
    points: int = 0
    memories: int = 0
    live: int = 0  # memories whose last event is ADD or UPDATE
    scopes: set[str] = field(default_factory=set)
    keys: array[int] = field(default_factory=lambda: array("q"))
    linked_points: dict[str, Point] = field(default_factory=dict)
    linked_history: dict[str, MemoryHistory] = field(default_factory=dict)
    counted: dict[str, Any] = field(default_factory=lambda: count_scopes(()))

    def chunk(self, inventory: Inventory, today: date) -> list[Finding]:
        """Count and judge one chunk (``inventory``'s points and history are the chunk's)."""
        points, history = inventory.points, inventory.history
        self.points += len(points)
        self.memories += len(history)
        self.live += sum(1 for memory in history.values() if memory.last.event in LIVE_EVENTS)
        self.counted = add_scopes(self.counted, count_scopes(p.payload for p in points.values()))
        if not self.judged:
            return []
        if inventory.message_scopes:
            self.scopes.update(session_scope(point.payload) for point in points.values())
        for point in points.values():
            key = duplicate_key(point)
            if key is not None:
                self.keys.append(hash(key))
        for memory_id in self.linked.intersection(points.keys() | history.keys()):
            if memory_id in points:
                self.linked_points[memory_id] = points[memory_id]
            if memory_id in history:
                self.linked_history[memory_id] = history[memory_id]
        return per_memory(inventory) + expired(inventory, today)

    def across(
        self, summary: Inventory, points_again: Callable[[], Iterable[Point]]
    ) -> list[Finding]:
        """The rules that span memories, from what the chunks gathered."""
        linked = replace(summary, points=self.linked_points, history=self.linked_history)
        found = dangling_links(linked)
        repeated = _repeated(self.keys)
        if repeated:
            candidates = {
                point.id: point
                for point in points_again()
                if (key := duplicate_key(point)) is not None and hash(key) in repeated
            }
            found += duplicates(replace(summary, points=candidates, history={}))
        return found + orphan_messages(summary, self.scopes)


def _repeated(keys: array[int]) -> set[int]:
    """The values that occur more than once in ``keys``. Pure."""
    ordered = sorted(keys)
    return {a for a, b in zip(ordered, ordered[1:], strict=False) if a == b}


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


def _store_level(
    inventory: Inventory, around: Surroundings, live: int, points: int
) -> list[Finding]:
    found = []
    if inventory.collection not in inventory.collections and live:
        found.append(_collection_missing(inventory, around, live))
    if not inventory.history_present and points:
        found.append(_history_missing(inventory, around, points))
    for name, files in sorted(inventory.legacy_stores.items()):
        found.append(
            findings.make(
                "legacy-point-store",
                f"collection {name!r} keeps qdrant-client's legacy dbm point store "
                f"({', '.join(files)}) beside or instead of the storage.sqlite qdrant-client reads: "
                "its points are invisible to mem0, not lost",
                collection=name,
                path=", ".join(files),
            )
        )
    stored = {
        inventory.collection: points,
        f"{inventory.collection}_entities": len(inventory.entities),
    }
    for name, info in sorted(inventory.collections.items()):
        if name not in stored or info.vector_size is None:
            continue
        found += [
            _dimension_mismatch(name, info.vector_size, key, size, stored[name])
            for key, size in inventory.expected_dims
            if info.vector_size != size
        ]
    return found


def _dimension_mismatch(name: str, old: int, key: str, size: int, stored: int) -> Finding:
    """A collection of vector size ``old`` while ``key`` says ``size``; ``stored`` points in it.

    With points stored under the old size the embedder changed after they were written: the
    fix names ``memsync migrate``. An empty collection keeps the registry's fix.
    """
    effect = "mem0 accepts it at start, then inserts and searches fail"
    if not stored:
        return findings.make(
            "dimension-mismatch",
            f"collection {name!r} stores vectors of size {old} but {key} is {size}: {effect}",
            collection=name,
            expected=size,
            observed=old,
        )
    return findings.make(
        "dimension-mismatch",
        f"collection {name!r} holds {stored} points of size {old} but {key} is {size}: the "
        f"embedder changed after they were written; {effect}",
        collection=name,
        expected=size,
        observed=old,
        fix=findings.changed_embedder_fix(key, old),
    )


def _collection_missing(inventory: Inventory, around: Surroundings, live: int) -> Finding:
    if around.missing_collection is None:  # a snapshot's copies: no live store to blame
        return findings.make(
            "collection-missing",
            f"collection {inventory.collection!r} is not in the copy while its history has {live} "
            "live memories",
            collection=inventory.collection,
        )
    what, causes, path = around.missing_collection
    return findings.make(
        "collection-missing",
        f"{what} while history has {live} live memories ({causes})",
        collection=inventory.collection,
        path=path,
    )


def _history_missing(inventory: Inventory, around: Surroundings, points: int) -> Finding:
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
