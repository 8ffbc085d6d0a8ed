"""``find_problems`` on literal inventories: in-flight window, ordering, scopes, expiry."""

from __future__ import annotations

import pickle
from datetime import date, timedelta

import pytest

from memsync.check import find_problems, session_scope
from memsync.model import (
    CollectionInfo,
    EntityLink,
    HistoryEvent,
    MessageScope,
    Point,
)
from memsync.stores.qdrant_embedded.formats import PointDecodeError, decode_point
from tests.helpers.values import LONG_AGO, T0, event, inventory, point


def codes(findings):
    return [(f.code, f.severity.value, f.memory_id) for f in findings]


def test_agreeing_stores_give_no_findings():
    assert find_problems(inventory([point("a")], [event("a")]), T0.date()) == []


@pytest.mark.parametrize(
    ("points", "events", "expected"),
    [
        ([], [event("a")], ("missing-point", "error", "a")),
        (
            [point("a")],
            [event("a"), event("a", "DELETE", None, rowid=2)],
            ("resurrected-point", "error", "a"),
        ),
        ([point("a")], [], ("orphan-point", "error", "a")),
        ([point("a", "new")], [event("a", new="old")], ("text-mismatch", "error", "a")),
    ],
    ids=["missing", "resurrected", "orphan", "text"],
)
def test_disagreement_outside_the_window_is_an_error(points, events, expected):
    assert codes(find_problems(inventory(points, events), T0.date())) == [expected]


@pytest.mark.parametrize(
    ("points", "events"),
    [
        ([], [event("a", at=T0 + timedelta(seconds=1.5))]),
        (
            [point("a")],
            [event("a"), event("a", "DELETE", None, at=T0 + timedelta(seconds=1), rowid=2)],
        ),
        ([point("a", created_at=(T0 - timedelta(seconds=1)).isoformat())], []),
    ],
    ids=["add-landing", "delete-landing", "orphan-just-written"],
)
def test_disagreement_inside_the_window_is_in_flight_info(points, events):
    findings = find_problems(inventory(points, events), T0.date())
    assert [(f.code, f.severity.value) for f in findings] == [("in-flight", "info")]


def test_null_event_time_never_counts_as_in_flight():
    nulled = HistoryEvent(
        rowid=1,
        id="h",
        memory_id="a",
        old_memory=None,
        new_memory="x",
        event="ADD",
        created_at=None,
        updated_at=None,
        is_deleted=0,
        actor_id=None,
        role=None,
    )
    assert codes(find_problems(inventory([], [nulled]), T0.date())) == [
        ("missing-point", "error", "a")
    ]


def test_last_event_is_the_highest_rowid_even_with_older_timestamps():
    # mem0 < 1.0.8 wrote DELETE rows with NULL timestamps; order is by rowid only.
    events = [
        event("a", rowid=1),
        HistoryEvent(
            rowid=2,
            id="h2",
            memory_id="a",
            old_memory="a fact",
            new_memory=None,
            event="DELETE",
            created_at=None,
            updated_at=None,
            is_deleted=1,
            actor_id=None,
            role=None,
        ),
    ]
    assert codes(find_problems(inventory([point("a")], events), T0.date())) == [
        ("resurrected-point", "error", "a")
    ]


def test_findings_sort_by_severity_code_then_memory_id():
    points = [point("z", "one"), point("b", "two"), point("c", "t", hash="bad")]
    events = [event("c", new="t")]
    findings = find_problems(inventory(points, events), T0.date())
    assert codes(findings) == [
        ("hash-mismatch", "error", "c"),
        ("orphan-point", "error", "b"),
        ("orphan-point", "error", "z"),
    ]


def test_hash_and_payload_checks():
    points = [point("a", hash="0" * 32), Point(id="b", payload={"user_id": "u"}, vector_size=384)]
    findings = find_problems(inventory(points, [event("a"), event("b", rowid=2)]), T0.date())
    assert codes(findings) == [("hash-mismatch", "error", "a"), ("missing-payload", "error", "b")]


def test_expired_only_when_date_is_before_today():
    points = [
        point("old", "1", expiration_date="2026-10-31"),
        point("today", "2", expiration_date="2026-11-01"),
        point("future", "3", expiration_date="2027-01-01"),
    ]
    events = [event(p.id, new=p.payload["data"], rowid=i) for i, p in enumerate(points)]
    findings = find_problems(inventory(points, events), date(2026, 11, 1))
    assert codes(findings) == [("expired-memory", "warning", "old")]


def test_duplicate_reports_each_newer_point_of_a_scope():
    older = point("a", "same", created_at="2026-01-01T00:00:00+00:00")
    newer = point("b", "same", created_at="2026-02-01T00:00:00+00:00")
    newest = point("c", "same", created_at="2026-03-01T00:00:00+00:00")
    elsewhere = point("d", "same", user_id="other")
    events = [
        event(p.id, new="same", rowid=i) for i, p in enumerate([older, newer, newest, elsewhere])
    ]
    findings = find_problems(inventory([older, newer, newest, elsewhere], events), T0.date())
    assert codes(findings) == [
        ("duplicate-memory", "warning", "b"),
        ("duplicate-memory", "warning", "c"),
    ]


def test_dangling_link_and_orphan_messages_are_warnings():
    links = [EntityLink(entity_id="e1", text="Oslo", linked_memory_ids=("a", "gone"))]
    scopes = [
        MessageScope(scope="user_id=u", row_count=2, newest_at=LONG_AGO),
        MessageScope(scope="agent_id=x&user_id=v", row_count=3, newest_at=LONG_AGO),
    ]
    findings = find_problems(
        inventory([point("a")], [event("a")], entities=links, scopes=scopes), T0.date()
    )
    assert codes(findings) == [
        ("dangling-entity-link", "warning", "gone"),
        ("orphan-messages", "warning", None),
    ]


def test_collection_missing_only_with_live_memories_in_history():
    gone = inventory([], [event("a")], collections={}, qdrant=False)
    assert codes(find_problems(gone, T0.date())) == [("collection-missing", "error", None)]
    deleted_only = inventory(
        [], [event("a"), event("a", "DELETE", None, rowid=2)], collections={}, qdrant=False
    )
    assert find_problems(deleted_only, T0.date()) == []


def test_dimension_mismatch_names_the_config_key():
    wrong = {"mem0": CollectionInfo(name="mem0", vector_size=1536, distance="Cosine")}
    findings = find_problems(inventory([point("a")], [event("a")], collections=wrong), T0.date())
    assert codes(findings) == [
        ("dimension-mismatch", "error", None),
        ("dimension-mismatch", "error", "a"),
    ]
    assert "embedding_model_dims" in findings[0].message
    assert "384 dimensions, the collection 1536" in findings[1].message


@pytest.mark.parametrize(
    ("payload", "scope"),
    [
        ({"user_id": "a"}, "user_id=a"),
        ({"user_id": "a", "agent_id": "b", "run_id": "c"}, "agent_id=b&run_id=c&user_id=a"),
        ({"user_id": "x&y=z%"}, "user_id=x%26y%3Dz%25"),
        ({}, ""),
    ],
    ids=["user", "all-three", "escaped", "none"],
)
def test_session_scope_matches_mem0(payload, scope):
    assert session_scope(payload) == scope


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_restricted_unpickler_refuses_other_classes():
    with pytest.raises(PointDecodeError, match="refused class builtins.print"):
        decode_point(pickle.dumps(Evil()))


def test_garbage_blob_is_undecodable():
    with pytest.raises(PointDecodeError):
        decode_point(b"\x00not a pickle")


def test_real_qdrant_point_decodes_without_qdrant_classes():
    from qdrant_client.http import models

    blob = pickle.dumps(
        models.PointStruct(
            id="6a2f41a3-c54d-4b1f-9b8a-1d2b7b1fbb3c",
            vector={"": [0.5] * 8},
            payload={"data": "x", "text_lemmatized": "x"},
        )
    )
    decoded = decode_point(blob)
    assert decoded.id == "6a2f41a3-c54d-4b1f-9b8a-1d2b7b1fbb3c"
    assert decoded.vector_size == 8
    assert decoded.payload == {"data": "x"}
