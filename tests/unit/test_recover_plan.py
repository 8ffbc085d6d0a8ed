"""recover's plan and the snapshot choice of restore/recover: values in, values out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memsync.errors import UsageError
from memsync.model import HistoryEvent, MemoryHistory, Point
from memsync.recover import ROLE_PREFIX, Scope, Status, past_of, plan_recover, recover_event
from memsync.repository import Entry
from memsync.snapshot.choose import parse_time, pick


def point(memory_id: str, text: str, user: str = "ana") -> Point:
    return Point(id=memory_id, payload={"data": text, "user_id": user}, vector_size=3)


def event(memory_id: str, kind: str, old: str | None, new: str | None, **extra) -> HistoryEvent:
    row = {
        "rowid": 1, "id": f"e-{memory_id}", "memory_id": memory_id, "old_memory": old,
        "new_memory": new, "event": kind, "created_at": "2026-11-30T10:00:00+00:00",
        "updated_at": "2026-11-30T11:00:00+00:00", "is_deleted": int(kind == "DELETE"),
        "actor_id": None, "role": None,
    }  # fmt: skip
    return HistoryEvent(**{**row, **extra})


def statuses(decisions) -> dict[str, str]:
    return {d.memory_id: d.status.value for d in decisions}


def test_only_memories_deleted_or_vanished_since_come_back_with_their_last_text():
    snap = {
        "deleted": point("deleted", "a"),
        "wiped": point("wiped", "b"),
        "live": point("live", "c"),
        "edited": point("edited", "d"),
        "erased": point("erased", "e"),
        "changed-then-deleted": point("changed-then-deleted", "f"),
        "missing": point("missing", "g"),
        "tombstoned": point("tombstoned", "h"),
        "queued": point("queued", "i"),
        "resumed": point("resumed", "j"),
        "someone-else": point("someone-else", "k", user="bo"),
        "changed-then-vanished": point("changed-then-vanished", "l"),
        "forgetting": point("forgetting", "m"),
        "blank-delete": point("blank-delete", "n"),
    }
    snap_history = {
        "tombstoned": MemoryHistory("tombstoned", event("tombstoned", "DELETE", "h", None), 2)
    }
    live = {"live": point("live", "c"), "edited": point("edited", "D")}
    rows = {
        "deleted": [event("deleted", "DELETE", "a", None)],
        "erased": [event("erased", "DELETE", None, None, actor_id="memsync")],
        "changed-then-deleted": [
            event("changed-then-deleted", "UPDATE", "f", "F", updated_at="T-update"),
            event("changed-then-deleted", "DELETE", "F", None, updated_at=None),
        ],
        "missing": [event("missing", "UPDATE", "x", "g")],
        "queued": [event("queued", "DELETE", "i", None)],
        "resumed": [event("resumed", "ADD", None, "j", actor_id="memsync", role=ROLE_PREFIX + "S")],
        "changed-then-vanished": [event("changed-then-vanished", "UPDATE", "l", "L")],
        "forgetting": [event("forgetting", "ADD", None, "m")],
        "blank-delete": [  # a DELETE row without text after rows that hold it: not an erasure
            event("blank-delete", "ADD", None, "n"),
            event("blank-delete", "DELETE", None, None),
        ],
    }
    pasts = {m: p for m, events in rows.items() if (p := past_of(events)) is not None}
    queued = [("req1", Scope(memory_ids=("queued",)))]
    decisions = plan_recover(
        Scope(user_id="ana"), "S", snap, snap_history, live, pasts, queued, (), ["forgetting"]
    )
    assert statuses(decisions) == {
        "deleted": "recover",
        "wiped": "recover",
        "live": "present",
        "edited": "changed",
        "erased": "erased",
        "changed-then-deleted": "recover",
        "missing": "recover",
        "tombstoned": "deleted-in-snapshot",
        "queued": "queued-delete",
        "resumed": "recover",
        "changed-then-vanished": "recover",
        "forgetting": "forgetting",
        "blank-delete": "recover",
    }
    by_id = {d.memory_id: d for d in decisions}
    # no event where history already says live: a resumed recover, a point lost without DELETE
    assert sorted(d.memory_id for d in decisions if d.status is Status.RECOVER and not d.event) == [
        "missing",
        "resumed",
    ]
    assert {d.memory_id: (d.text, d.text_at) for d in decisions if d.text is not None} == {
        "changed-then-deleted": ("F", "T-update"),
        "changed-then-vanished": ("L", "2026-11-30T11:00:00+00:00"),
    }
    assert by_id["changed-then-vanished"].event  # re-embedded: an event says so
    assert "newer snapshot" not in " ".join(d.why for d in decisions)  # no false hint
    assert "embedded again" in by_id["changed-then-deleted"].why


def test_ids_the_snapshot_lacks_are_reported_and_scopes_match_their_key_only():
    snap = {"a": point("a", "x"), "b": point("b", "y")}
    gone = past_of([event("gone", "DELETE", "t", None)])
    assert gone is not None
    decisions = plan_recover(
        Scope(memory_ids=("a", "zz", "gone", "new")), "S", snap, {}, {"new": point("new", "n")},
        {"gone": gone},
    )  # fmt: skip
    assert statuses(decisions) == {
        "a": "recover", "zz": "not-in-snapshot", "gone": "not-in-snapshot", "new": "present"
    }  # fmt: skip
    why = {d.memory_id: d.why for d in decisions}
    assert "last event for it is DELETE" in why["gone"] and "no row" in why["zz"]
    assert Scope(agent_id="ana").holds("a", {"user_id": "ana"}) is False
    assert Scope(run_id="r").holds("a", {"run_id": "r"}) is True


def test_the_recover_event_says_why_and_follows_the_contract():
    recorded = recover_event(
        "m", {"data": "t", "created_at": "c"}, "20261130T120000Z", datetime(2026, 12, 1, tzinfo=UTC)
    )
    assert (recorded.event, recorded.new_memory, recorded.old_memory) == ("ADD", "t", None)
    assert recorded.actor_id == "memsync" and recorded.id.startswith("memsync-")
    assert recorded.role == "memsync recover from 20261130T120000Z"
    assert (recorded.created_at, recorded.updated_at) == ("c", "2026-12-01T00:00:00Z")
    again = recover_event(
        "m", {"data": "new"}, "S", datetime(2026, 12, 1, tzinfo=UTC), re_embedded=True
    )
    assert again.new_memory == "new"
    assert again.role == "memsync recover from S (text from history, embedded again)"
    assert again.role.startswith(ROLE_PREFIX)  # a killed run is finished by the next one
    assert Status.RECOVERED.value == "recovered"


def entry(snapshot_id: str, *, verified: bool = True, complete: bool = True) -> Entry:
    return Entry(
        id=snapshot_id,
        complete=complete,
        manifest=None,
        verified={"ok": verified},
        size_bytes=0,
    )


def test_pick_takes_the_newest_complete_verified_snapshot_of_either_side():
    local = [entry("20261129T120000Z"), entry("20261130T120000Z", verified=False)]
    remote = [entry("20261130T120000Z"), entry("20261201T000000Z", complete=False)]
    assert pick(local, remote, None) == ("20261130T120000Z", "remote")
    assert pick(local + [entry("20261130T120000Z")], remote, None) == ("20261130T120000Z", "local")
    cut = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert pick(local, remote, cut) == ("20261129T120000Z", "local")  # strictly before
    assert pick(local, remote, datetime(2026, 11, 1, tzinfo=UTC)) is None
    assert pick([entry("20261130T120000Z"), entry("20261130T120000Z-1")], [], None) == (
        "20261130T120000Z-1",
        "local",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T12:00Z", datetime(2026, 11, 30, 12, 0, tzinfo=UTC)),
        ("2026-11-30T13:30:00+01:30", datetime(2026, 11, 30, 12, 0, tzinfo=UTC)),
        ("2026-11-30T12:00:00.5z", datetime(2026, 11, 30, 12, 0, 0, 500000, tzinfo=UTC)),
    ],
)
def test_before_accepts_iso_8601_with_z_or_an_offset(text, expected):
    assert parse_time(text) == expected


@pytest.mark.parametrize("text", ["2026-11-30T12:00", "2026-11-30", "yesterday", ""])
def test_before_refuses_other_times_as_usage_errors(text):
    with pytest.raises(UsageError):
        parse_time(text)


def test_latest_never_picks_a_snapshot_of_the_other_backend():
    # A new user moved to pgvector, took a snapshot there (not verified yet) and asked for
    # latest: the older embedded Qdrant snapshot in the same directory was chosen, then refused.
    from dataclasses import replace

    from memsync.model import CaptureWindow
    from memsync.stores.manifest import Manifest

    at = datetime(2026, 11, 30, tzinfo=UTC)
    window = CaptureWindow(
        vectors_at=at, vectors_finished_at=at, history_at=at, history_finished_at=at,
        longest_read_s=0.0,
    )  # fmt: skip

    def made(snapshot_id: str, mode: str, verified: bool = True) -> Entry:
        manifest = Manifest(
            id=snapshot_id, created_at=at, collection="mem0", capture=window, files=(), mode=mode
        )
        return replace(entry(snapshot_id, verified=verified), manifest=manifest)

    embedded = made("20261130T120000Z", "full")
    moved = made("20261201T120000Z", "pgvector", verified=False)
    assert pick([embedded, moved], [], None) == ("20261130T120000Z", "local")  # as it was
    assert pick([embedded, moved], [], None, "pgvector") is None
    assert pick([embedded, moved], [], None, "embedded") == ("20261130T120000Z", "local")
    verified = made("20261201T120000Z", "pgvector")
    assert pick([embedded, verified], [], None, "pgvector") == ("20261201T120000Z", "local")
    assert pick([embedded, verified], [], None, "embedded") == ("20261130T120000Z", "local")
