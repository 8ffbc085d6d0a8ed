"""``plan_reconcile`` on literal inventories: one rule per code, stable order, nothing parsed."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memsync.check import find_problems
from memsync.model import (
    CaptureWindow,
    EntityLink,
    Inventory,
    Point,
    Recovery,
)
from memsync.reconcile.actions import ActionKind
from memsync.reconcile.plan import plan_reconcile
from tests.helpers import values
from tests.helpers.values import T0

EARLY, LATE = (T0 - timedelta(days=2)).isoformat(), (T0 - timedelta(days=1)).isoformat()
WINDOW = CaptureWindow(
    vectors_at=T0, vectors_finished_at=T0, history_at=T0, history_finished_at=T0, longest_read_s=0.1
)


def point(pid: str, text: str = "a fact", at: str = EARLY, **payload: object) -> Point:
    return values.point(pid, text, at=at, **{"updated_at": at, **payload})


def event(
    memory_id: str, kind: str = "ADD", new: str | None = "a fact", at: str = EARLY, rowid: int = 1
):
    return values.event(memory_id, kind, new, at=at, rowid=rowid)


def inventory(points=(), events=(), entities=()) -> Inventory:
    return values.inventory(
        points, events, entities=entities, dims=(("embedding_model_dims", 384),), window=WINDOW
    )


def plan(stored: Inventory, only=None, recoveries=None, record_lost=False, forgetting=frozenset()):
    ids = iter(f"memsync-{n}" for n in range(100))
    return plan_reconcile(
        find_problems(stored, T0.date()),
        stored,
        recoveries or {},
        only=only,
        record_lost=record_lost,
        now=T0,
        new_id=lambda: next(ids),
        forgetting=forgetting,
    )


def summary(actions):
    return [(a.index, a.kind, a.code, a.memory_id, a.status) for a in actions]


def test_entity_relinks_come_after_every_per_memory_action():
    stored = inventory(
        [point("a", created_at="2026-01-01"), point("b", created_at="2026-02-01")],
        [event("a"), event("b", rowid=2)],
        [EntityLink(entity_id="e1", text="Oslo", linked_memory_ids=("a", "gone"))],
    )
    actions = plan(stored, only=frozenset({"dangling-entity-link", "duplicate-memory"}))
    assert summary(actions) == [
        (0, "delete-point", "duplicate-memory", "b", "pending"),
        (1, "relink-entity", "dangling-entity-link", "gone", "pending"),
    ]
    assert actions[1].params == {"entity_id": "e1", "remaining": ["a"]}


def test_policy_codes_are_planned_only_when_named():
    stored = inventory(
        [point("a", created_at="2026-01-01"), point("b", created_at="2026-02-01")],
        [event("a"), event("b", rowid=2)],
    )
    assert plan(stored) == []


def test_a_newer_point_records_the_missed_update_and_rewrites_its_stale_hash_once():
    stale = point("a", "edited", at=LATE, hash="0" * 32)
    actions = plan(inventory([stale], [event("a", new="original")]))
    assert summary(actions) == [
        (0, "record-event", "text-mismatch", "a", "pending"),
        (1, "update-point", "hash-mismatch", "a", "pending"),
    ]
    assert (
        actions[0].params["row"]["event"] == "UPDATE"
        and actions[0].params["row"]["id"] == "memsync-0"
    )
    assert actions[1].params == {"text": "edited"}


def test_newer_history_updates_the_point_through_mem0():
    actions = plan(inventory([point("a", "old")], [event("a", "UPDATE", new="new", at=LATE)]))
    assert [(a.kind, a.params) for a in actions] == [(ActionKind.UPDATE_POINT, {"text": "new"})]


@pytest.mark.parametrize(
    ("recoveries", "record_lost", "forgetting", "expected"),
    [
        ({}, False, frozenset(), ("report", "unrecoverable")),
        ({}, True, frozenset(), ("record-event", "pending")),
        (
            {"m": Recovery(snapshot_id="s1", storage=Path("/s"))},
            False,
            frozenset(),
            ("restore-point", "pending"),
        ),
        (
            {"m": Recovery(snapshot_id="s1", storage=Path("/s"))},
            False,
            frozenset({"m"}),
            ("record-event", "pending"),
        ),
    ],
    ids=["nothing-holds-it", "record-lost", "snapshot-holds-it", "forget-died"],
)
def test_a_missing_point_is_restored_recorded_or_reported(
    recoveries, record_lost, forgetting, expected
):
    actions = plan(
        inventory([], [event("m")]),
        recoveries=recoveries,
        record_lost=record_lost,
        forgetting=forgetting,
    )
    assert [(a.kind, a.status) for a in actions] == [expected]


def test_info_findings_plan_nothing():
    landing = event("m", at=T0.isoformat())  # inside the capture window: in-flight
    assert plan(inventory([], [landing]), only=frozenset({"in-flight", "missing-point"})) == []
