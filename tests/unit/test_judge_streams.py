"""Judging memories a chunk at a time (``judge_memories``) finds what the whole inventory does.

``check`` merges the vector copy's points with history's memories by id and judges them in
chunks (issue 13: check's memory at 1,000,000 rows); every finding must be the one
``find_problems`` gives for the whole inventory, for rules on one memory and rules across
memories (duplicates, entity links, orphan messages, store-level counts) alike.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest

from memsync.judge import rules as problems
from memsync.judge.memory_rules import per_memory
from memsync.judge.rules import (
    LIVE_EVENTS,
    Memories,
    OutOfOrder,
    find_problems,
    judge_memories,
    merge_by_id,
    session_scope,
)
from memsync.judge.warning_rules import dangling_links, duplicates, expired, orphan_messages
from memsync.model import EntityLink, MessageScope
from tests.helpers.values import LONG_AGO, T0, event, inventory, point

TEXTS = ("tea", "coffee", "chess", "rust")


def random_inventory(rng: random.Random):
    """Points and history disagreeing in every way check knows, some inside the window."""
    points, events, rowid = [], [], 0
    for number in range(rng.randrange(0, 60)):
        memory_id = f"{number:08x}-0000-4000-8000-000000000000"
        text = rng.choice(TEXTS)
        at = T0 + timedelta(seconds=1) if rng.random() < 0.1 else LONG_AGO
        user = rng.choice(("u", "v"))
        if rng.random() < 0.85:
            extra = {}
            if rng.random() < 0.1:
                extra["hash"] = "0" * 32  # edited outside mem0
            if rng.random() < 0.1:
                extra["expiration_date"] = "2020-01-01"
            size = 384 if rng.random() < 0.95 else 12
            points.append(point(memory_id, text, at=at, size=size, user_id=user, **extra))
        for _ in range(rng.randrange(0, 3)):
            rowid += 1
            kind = rng.choice(("ADD", "UPDATE", "DELETE"))
            new = None if kind == "DELETE" else rng.choice((text, "other"))
            events.append(event(memory_id, kind, new, at=at, rowid=rowid))
    ids = [p.id for p in points] + [e.memory_id for e in events]
    ids += ["ffffffff-0000-4000-8000-000000000000"]
    entities = [
        EntityLink(entity_id=f"e{n}", text="x", linked_memory_ids=tuple(rng.sample(ids, 2)))
        for n in range(rng.randrange(0, 3))
        if len(ids) >= 2
    ]
    scopes = [
        MessageScope(scope=scope, row_count=3, newest_at=LONG_AGO)
        for scope in ("user_id=u", "user_id=v", "user_id=w")
        if rng.random() < 0.5
    ]
    return inventory(
        points,
        events,
        entities=entities,
        scopes=scopes,
        history=rng.random() < 0.9,
        qdrant=rng.random() < 0.95,
    )


def streamed(whole, chunk: int):
    """The inventory's points and memories as two sorted streams, merged, judged in chunks."""
    points = [whole.points[key] for key in sorted(whole.points)]
    memories = [whole.history[key] for key in sorted(whole.history)]
    summary = replace(whole, points={}, history={})
    judged = judge_memories(
        Memories(
            summary=summary,
            pairs=merge_by_id(points, memories),
            points_again=lambda: iter(points),
        ),
        T0.date(),
        chunk=chunk,
    )
    return judged


def every_rule_on_the_whole(whole):
    """Each rule run once on the whole inventory (the judge before chunking): the oracle."""
    live = sum(1 for memory in whole.history.values() if memory.last.event in LIVE_EVENTS)
    found = problems._store_level(whole, problems.NOTHING_AROUND, live, len(whole.points))
    if whole.qdrant_present and whole.collection in whole.collections:
        found += per_memory(whole) + expired(whole, T0.date()) + dangling_links(whole)
        found += duplicates(whole)
        found += orphan_messages(whole, {session_scope(p.payload) for p in whole.points.values()})
    return sorted(found, key=lambda finding: finding.sort_key())


@pytest.mark.parametrize("seed", range(60))
def test_chunked_judging_finds_exactly_what_each_rule_finds_on_the_whole(seed: int) -> None:
    whole = random_inventory(random.Random(seed))
    expected = every_rule_on_the_whole(whole)
    assert find_problems(whole, T0.date()) == expected
    for chunk in (1, 3, 10_000):
        judged = streamed(whole, chunk)
        assert judged.findings == expected, (seed, chunk)
        assert judged.points == len(whole.points)
        assert judged.memories == len(whole.history)


def test_duplicates_in_different_chunks_are_found_by_the_second_pass() -> None:
    first = point("00000000-0000-4000-8000-000000000001", "tea", at="2026-01-01T00:00:00+00:00")
    later = point("ffffffff-0000-4000-8000-000000000001", "tea", at="2026-02-01T00:00:00+00:00")
    other = point("88888888-0000-4000-8000-000000000001", "tea", user_id="someone else")
    whole = inventory(
        [first, other, later],
        [event(p.id, new="tea", rowid=n) for n, p in enumerate([first, other, later], start=1)],
    )
    judged = streamed(whole, chunk=1)
    assert [(f.code, f.memory_id, f.expected) for f in judged.findings] == [
        ("duplicate-memory", later.id, first.id)
    ]


def test_merge_pairs_each_id_once_in_order() -> None:
    whole = inventory(
        [point("a"), point("c")], [event("b"), event("c", rowid=2), event("d", rowid=3)]
    )
    pairs = list(merge_by_id(sorted(whole.points.values()), sorted(whole.history.values())))
    assert [(i, p is not None, m is not None) for i, p, m in pairs] == [
        ("a", True, False),
        ("b", False, True),
        ("c", True, True),
        ("d", False, True),
    ]


@pytest.mark.parametrize("side", ["points", "memories"])
def test_a_stream_out_of_order_stops_the_merge(side: str) -> None:
    whole = inventory([point("a"), point("b")], [event("a"), event("b", rowid=2)])
    points, memories = list(whole.points.values()), list(whole.history.values())
    if side == "points":
        points.reverse()
    else:
        memories.reverse()
    with pytest.raises(OutOfOrder):
        list(merge_by_id(points, memories))


def test_an_entity_linking_a_point_without_history_is_no_dangling_link() -> None:
    linked = EntityLink(entity_id="e1", text="Lisbon", linked_memory_ids=("a", "gone"))
    deleted_now = event("gone", "DELETE", None, at=T0 + timedelta(seconds=1))
    whole = inventory([point("a")], [deleted_now], entities=[linked])
    found = [(f.code, f.memory_id) for f in find_problems(whole, T0.date())]
    assert found == [("orphan-point", "a"), ("in-flight", "gone")]
    for chunk in (1, 2):
        assert [(f.code, f.memory_id) for f in streamed(whole, chunk).findings] == found
