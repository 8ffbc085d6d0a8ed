"""Literal model values for the pure tests: points, history events and inventories."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from memsync.model import (
    CaptureWindow,
    CollectionInfo,
    EntityLink,
    HistoryEvent,
    Inventory,
    MemoryHistory,
    MessageScope,
    Point,
    payload_hash,
)

T0 = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
LONG_AGO = T0 - timedelta(days=1)
WINDOW = CaptureWindow(
    vectors_at=T0,
    vectors_finished_at=T0 + timedelta(seconds=1),
    history_at=T0 + timedelta(seconds=1),
    history_finished_at=T0 + timedelta(seconds=2),
    longest_read_s=1.0,
)
DIMS = (("mem0.vector_store.config.embedding_model_dims", 384),)


def _stamp(at: datetime | str) -> str:
    return at.isoformat() if isinstance(at, datetime) else at


def point(
    pid: str,
    text: str = "a fact",
    *,
    at: datetime | str = LONG_AGO,
    size: int = 384,
    **payload: object,
) -> Point:
    """A memory point as mem0ai 2.2.1 stores it (``hash`` is the md5 of ``data``), user ``u``.

    It has no ``updated_at`` unless given in ``payload``.
    """
    base = {"data": text, "hash": payload_hash(text), "created_at": _stamp(at), "user_id": "u"}
    return Point(id=pid, payload={**base, **payload}, vector_size=size)


def event(
    memory_id: str,
    kind: str = "ADD",
    new: str | None = "a fact",
    *,
    at: datetime | str = LONG_AGO,
    rowid: int = 1,
) -> HistoryEvent:
    """One history row of ``memory_id`` (mem0ai 2.2.1 schema)."""
    stamp = _stamp(at)
    return HistoryEvent(
        rowid=rowid,
        id=f"h{rowid}",
        memory_id=memory_id,
        old_memory=None,
        new_memory=new,
        event=kind,
        created_at=stamp,
        updated_at=stamp,
        is_deleted=0,
        actor_id=None,
        role="user",
    )


def inventory(
    points: Iterable[Point] = (),
    events: Iterable[HistoryEvent] = (),
    *,
    entities: Iterable[EntityLink] = (),
    scopes: Iterable[MessageScope] = (),
    collections: Mapping[str, CollectionInfo] | None = None,
    size: int = 384,
    qdrant: bool = True,
    history: bool = True,
    dims: tuple[tuple[str, int], ...] = DIMS,
    window: CaptureWindow = WINDOW,
) -> Inventory:
    """An inventory of the ``mem0`` collection; the last of a memory's events (in order) is its last."""
    events = list(events)
    last: dict[str, MemoryHistory] = {}
    for item in events:
        previous = last.get(item.memory_id)
        count = previous.row_count + 1 if previous else 1
        last[item.memory_id] = MemoryHistory(memory_id=item.memory_id, last=item, row_count=count)
    if collections is None:
        collections = {"mem0": CollectionInfo(name="mem0", vector_size=size, distance="Cosine")}
    return Inventory(
        collection="mem0",
        qdrant_present=qdrant,
        collections=collections,
        points={p.id: p for p in points},
        history_present=history,
        history=last,
        history_rows=len(events),
        entities=tuple(entities),
        message_scopes=tuple(scopes),
        expected_dims=dims,
        window=window,
    )
