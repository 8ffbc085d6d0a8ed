"""The tripwire's pure half: scope counts, drops beyond both thresholds, the baseline chosen,
and the manifest's ``scopes`` field (optional, typed, kept by the round trip)."""

from __future__ import annotations

import copy

import pytest

from memsync.errors import UnavailableError
from memsync.jobs.outcome import summarize
from memsync.model import count_scopes
from memsync.repository import Entry
from memsync.snapshot.tripwire import (
    Drop,
    Thresholds,
    choose_baseline,
    find_drops,
    id_order,
    split_drops,
)
from memsync.stores.manifest import parse
from tests.unit.test_manifest import DOCUMENT

DEFAULT = Thresholds(percent=20, memories=50)


def scopes(total: int, **kinds: dict[str, int]) -> dict:
    return {"total": total, "user_id": {}, "agent_id": {}, "run_id": {}, **kinds}


def test_count_scopes_counts_each_memory_once_in_total_and_once_per_scope_key():
    payloads = [
        {"user_id": "alice", "agent_id": "planner", "data": "x"},
        {"user_id": "alice", "run_id": "r1"},
        {"user_id": "bob", "agent_id": None, "run_id": ""},
        {"data": "no scope at all"},
        {"user_id": 7},  # a hostile payload: counted by its text
    ]
    assert count_scopes(payloads) == {
        "total": 5,
        "user_id": {"7": 1, "alice": 2, "bob": 1},
        "agent_id": {"planner": 1},
        "run_id": {"r1": 1},
    }


def test_count_scopes_of_an_empty_store():
    assert count_scopes([]) == {"total": 0, "user_id": {}, "agent_id": {}, "run_id": {}}


@pytest.mark.parametrize(
    ("before", "after", "trips"),
    [
        (300, 239, True),  # 61 (20.3%)
        (300, 241, False),  # 59 (19.7%): under 20%
        (300, 240, True),  # 60 is exactly 20%: reaches it
        (250, 200, True),  # exactly 50 memories (20%): reaches both
        (249, 200, False),  # 49 memories: under 50
        (60, 0, True),  # a scope that vanished entirely
        (50, 0, True),  # all of a scope of exactly 50 memories
        (10_000, 9_000, False),  # 1,000 memories but 10%
        (100, 150, False),  # growth
    ],
    ids=["just-over-both", "percent-under", "percent-equal", "memories-equal", "memories-under",
         "vanished", "scope-of-50-wiped", "many-but-few-percent", "growth"],
)  # fmt: skip
def test_a_drop_trips_when_it_reaches_both_thresholds(before, after, trips):
    assert DEFAULT.trips(before, after) is trips


@pytest.mark.parametrize(
    "thresholds",
    [Thresholds(percent=0, memories=50), Thresholds(percent=20, memories=0)],
    ids=["percent-0", "memories-0"],
)
def test_zero_in_either_threshold_disables_the_tripwire(thresholds):
    assert thresholds.enabled is False
    assert find_drops(scopes(500, user_id={"a": 500}), scopes(0), thresholds) == []


def test_find_drops_names_scopes_that_vanished_and_ignores_new_ones():
    previous = scopes(
        400,
        user_id={"alice": 200, "bob": 120, "carol": 80},
        agent_id={"planner": 70},
        run_id={"r1": 10},
    )
    current = scopes(
        140,
        user_id={"alice": 70, "carol": 70, "dave": 500},  # bob gone, dave new
        agent_id={},  # planner gone
        run_id={"r1": 0},
    )
    drops = find_drops(previous, current, DEFAULT)
    assert [(d.kind, d.scope_id, d.before, d.after) for d in drops] == [
        ("total", None, 400, 140),
        ("user_id", "alice", 200, 70),  # the largest drop of its kind first
        ("user_id", "bob", 120, 0),
        ("agent_id", "planner", 70, 0),
        ("run_id", "r1", 10, 0),  # emptied: named once anything trips, whatever its size
    ]
    assert drops[0].scope is None and drops[0].label == "all memories"
    assert drops[2].to_json() == {
        "kind": "user_id",
        "id": "bob",
        "scope": "user_id=bob",
        "before": 120,
        "after": 0,
        "dropped": 120,
        "percent": 100.0,
        "emptied": True,
        "deleted": None,
        "vanished": None,
    }


def test_an_emptied_scope_alone_below_the_thresholds_does_not_trip():
    previous = scopes(1000, user_id={"alice": 40, "bob": 960})
    current = scopes(960, user_id={"bob": 960})  # alice's 40 gone: 4% of all, 40 memories
    assert find_drops(previous, current, DEFAULT) == []


def test_a_reset_names_the_victim_beside_the_user_deleted_through_mem0():
    previous = scopes(200, user_id={"bob": 150, "alice": 50})
    drops = find_drops(previous, scopes(0), DEFAULT)
    assert [(d.kind, d.scope_id) for d in drops] == [
        ("total", None),
        ("user_id", "bob"),
        ("user_id", "alice"),  # 50 -> 0 is not beyond 50 memories, but the scope emptied
    ]
    bob = {f"b{n}" for n in range(150)}
    alice = {f"a{n}" for n in range(50)}
    members = {("total", None): bob | alice, ("user_id", "bob"): bob, ("user_id", "alice"): alice}
    split = split_drops(drops, previous, scopes(0), members, deleted=bob, vanished=alice)
    assert [(d.scope, d.deleted, d.vanished) for d in split] == [
        (None, 150, 50),
        ("user_id=bob", 150, 0),
        ("user_id=alice", 0, 50),
    ]


def test_split_drops_names_another_scope_that_lost_memories_without_a_delete_event():
    previous = scopes(400, user_id={"bob": 300, "carol": 100})
    current = scopes(80, user_id={"carol": 80})
    drops = find_drops(previous, current, DEFAULT)
    assert [d.scope for d in drops] == [None, "user_id=bob"]  # carol's 20 are not beyond
    carol = {f"c{n}" for n in range(100)}
    bob = {f"b{n}" for n in range(300)}
    members = {("total", None): bob | carol, ("user_id", "bob"): bob, ("user_id", "carol"): carol}
    lost = {f"c{n}" for n in range(20)}
    split = split_drops(drops, previous, current, members, deleted=bob, vanished=lost)
    assert [(d.scope, d.before, d.after, d.deleted, d.vanished) for d in split] == [
        (None, 400, 80, 300, 20),
        ("user_id=bob", 300, 0, 300, 0),
        ("user_id=carol", 100, 80, 0, 20),
    ]


def test_find_drops_reads_a_partial_or_odd_scopes_document_without_failing():
    previous = {"total": 300, "user_id": {"alice": 300}}  # no agent_id/run_id keys
    assert find_drops(previous, {"total": 300, "user_id": "odd"}, DEFAULT) == [
        Drop(kind="user_id", scope_id="alice", before=300, after=0)
    ]


def test_the_same_counts_never_trip():
    same = scopes(1000, user_id={"a": 600, "b": 400})
    assert find_drops(same, copy.deepcopy(same), DEFAULT) == []


def entry(snapshot_id: str, complete: bool = True) -> Entry:
    manifest = parse({**DOCUMENT, "id": snapshot_id}, snapshot_id, "test") if complete else None
    return Entry(id=snapshot_id, complete=complete, manifest=manifest, verified=None, size_bytes=0)


NEW = "20261201T120000Z"


def test_the_baseline_is_the_newest_complete_local_snapshot_before_the_new_one():
    local = [
        entry("20261130T120000Z"),
        entry("20261201T110000Z"),
        entry("20261201T115900Z", complete=False),  # incomplete: never a baseline
        entry(NEW),  # the new one itself
        entry("20261201T130000Z"),  # after it (a clock set back): not before it
    ]
    remote = [entry("20261201T115000Z")]
    chosen = choose_baseline(NEW, local, remote)
    assert chosen is not None and chosen.id == "20261201T110000Z"


def test_the_baseline_comes_from_the_bucket_only_when_no_local_one_exists():
    chosen = choose_baseline(
        NEW, [entry(NEW)], [entry("20261201T115000Z"), entry("20261130T000000Z")]
    )
    assert chosen is not None and chosen.id == "20261201T115000Z"
    assert choose_baseline(NEW, [entry(NEW)], []) is None


def test_id_order_sorts_a_counter_suffix_numerically():
    ids = ["20261201T120000Z-10", "20261201T120000Z-9", "20261201T120000Z", "20261201T115959Z"]
    assert sorted(ids, key=id_order) == [
        "20261201T115959Z",
        "20261201T120000Z",
        "20261201T120000Z-9",
        "20261201T120000Z-10",
    ]


# --- the manifest field ---------------------------------------------------------------------


def test_a_manifest_without_scopes_still_reads_and_writes_none():
    manifest = parse(copy.deepcopy(DOCUMENT), None, "test")
    assert manifest.scopes is None and "scopes" not in manifest.to_json()


def test_scopes_round_trip_as_a_known_field():
    counted = scopes(3, user_id={"alice": 2, "o'brien": 1}, agent_id={"planner": 1})
    manifest = parse({**copy.deepcopy(DOCUMENT), "scopes": counted}, None, "test")
    assert manifest.scopes == counted and manifest.extra == {}
    assert manifest.to_json()["scopes"] == counted


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"user_id": {"a": 1}}, "scopes.total"),
        ({"total": -1}, "scopes.total"),
        ({"total": 1, "user_id": {"a": "1"}}, "scopes.user_id.a"),
        ({"total": 1, "agent_id": {"a": True}}, "scopes.agent_id.a"),
        ({"total": 1, "run_id": ["a"]}, "scopes.run_id"),
        ([1], "scopes"),
    ],
    ids=["no-total", "negative", "text-count", "bool-count", "list", "not-an-object"],
)
def test_wrongly_typed_scopes_make_the_manifest_invalid_naming_the_field(value, field):
    with pytest.raises(UnavailableError, match=rf"not valid: {field}"):
        parse({**copy.deepcopy(DOCUMENT), "scopes": value}, None, "test")


# --- what a job record keeps (the textfile's memsync_tripwire_tripped) ----------------------


def test_a_snapshot_jobs_summary_keeps_the_tripwire_verdict_when_the_report_has_one():
    tripped = {"id": "S2", "size_bytes": 1, "tripwire": {"tripped": True, "pinned": "S1"}}
    assert summarize("snapshot", tripped) | {} == {
        "snapshot_id": "S2",
        "size_bytes": 1,
        "capture_near_timeout": 0,
        "tripwire_tripped": True,
        "tripwire_pinned": "S1",
        "tripwire_deleted": None,
        "tripwire_vanished": None,
    }
    older = summarize("snapshot", {"id": "S2", "size_bytes": 1})  # a memsync without it
    assert "tripwire_tripped" not in older


def test_memories_erased_on_purpose_are_taken_out_before_comparing():
    from memsync.erase.ledger import digest

    previous = scopes(500, user_id={"bob": 120, "dan": 380}, agent_id={"x": 200})
    current = scopes(380, user_id={"dan": 380}, agent_id={"x": 80})
    # forget --user bob --erase since: bob's 120 memories, all of them with agent x
    erased = {"total": 120, f"user_id:{digest('bob')}": 120, f"agent_id:{digest('x')}": 120}
    assert find_drops(previous, current, DEFAULT, erased) == []
    assert [(d.kind, d.scope_id) for d in find_drops(previous, current, DEFAULT)] == [
        ("total", None),
        ("user_id", "bob"),
        ("agent_id", "x"),
    ]  # without the ledger the same counts trip on bob, on agent x and on the total


def test_a_bug_deleting_more_than_the_erasure_still_trips():
    from memsync.erase.ledger import digest

    previous = scopes(500, user_id={"bob": 120, "dan": 380}, agent_id={"x": 200})
    current = scopes(300, user_id={"dan": 300}, agent_id={"x": 0})  # 80 of dan's went too
    erased = {"total": 120, f"user_id:{digest('bob')}": 120, f"agent_id:{digest('x')}": 120}
    drops = find_drops(previous, current, DEFAULT, erased)
    assert [(d.kind, d.scope_id, d.before, d.after) for d in drops] == [
        ("total", None, 380, 300),
        ("user_id", "dan", 380, 300),
        ("agent_id", "x", 80, 0),
    ]


def test_the_text_report_says_per_scope_what_was_deleted_and_what_vanished():
    from memsync.snapshot.guard import TripwireResult

    drops = (
        Drop(kind="total", scope_id=None, before=110, after=0, deleted=60, vanished=50),
        Drop(kind="user_id", scope_id="ben", before=60, after=0, deleted=60, vanished=0),
        Drop(kind="user_id", scope_id="ann", before=50, after=0, deleted=0, vanished=50),
    )
    result = TripwireResult(
        snapshot_id="S2", thresholds=DEFAULT, previous="S1", drops=drops, pinned_on=("local",),
        deleted_memories=60, vanished_memories=50,
    )  # fmt: skip
    text = result.text()
    assert "user_id=ben: 60 deleted through mem0 (DELETE history events), 0 vanished" in text
    assert (
        "user_id=ann: 0 deleted through mem0 (DELETE history events), 50 vanished without one (ERROR vanished-memories)"
        in text
    )
    assert "ERROR 50 memories vanished with no DELETE history event" in text
    assert result.errors is True
    assert [(f.code, f.scope) for f in result.findings()] == [
        ("vanished-memories", None),
        ("mass-deletion", None),
        ("mass-deletion", "user_id=ben"),
        ("vanished-memories", "user_id=ann"),
    ]


def test_every_memory_gone_and_none_deleted_sends_the_user_to_the_path_not_to_reconcile():
    from memsync.snapshot.guard import TripwireResult

    drops = (Drop(kind="total", scope_id=None, before=110, after=0, deleted=0, vanished=110),)
    result = TripwireResult(
        snapshot_id="S2", thresholds=DEFAULT, previous="S1", drops=drops, pinned_on=("local",),
        deleted_memories=0, vanished_memories=110,
    )  # fmt: skip
    text = result.text()
    assert "and nothing is left: check the path first (memsync config show)" in text
    assert "memsync restore S1" in text and "reconcile" not in text


def test_split_drops_names_the_whole_store_when_memories_of_no_scope_vanished():
    previous = scopes(1000, user_id={"bob": 100})
    current = scopes(898, user_id={})  # bob's 100 deleted, 2 memories of no scope vanished
    drops = find_drops(previous, current, DEFAULT)
    assert [d.scope for d in drops] == ["user_id=bob"]  # 10.2% of all: the total does not trip
    bob = {f"b{n}" for n in range(100)}
    everyone = bob | {f"n{n}" for n in range(900)}
    members = {("total", None): everyone, ("user_id", "bob"): bob}
    split = split_drops(drops, previous, current, members, deleted=bob, vanished={"n1", "n2"})
    assert [(d.scope, d.before, d.after, d.deleted, d.vanished) for d in split] == [
        (None, 1000, 898, 100, 2),
        ("user_id=bob", 100, 0, 100, 0),
    ]
