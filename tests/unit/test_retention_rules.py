"""Retention over both sides (pure): keep_hourly/yearly/within, pins, merge, incomplete ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memsync.config import SnapshotConfig
from memsync.errors import ConfigError
from memsync.model import CaptureWindow
from memsync.repository import Entry
from memsync.snapshot import Candidate, merge, plan_retention
from memsync.stores.manifest import FileEntry, Manifest

START = datetime(2024, 6, 1, 0, 10, tzinfo=UTC)


def sid(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%SZ")


def candidate(moment: datetime, **extra) -> Candidate:
    fields = {"complete": True, "verified": False} | extra
    return Candidate(id=sid(moment), time=moment, **fields)


def by_id(decisions):
    return {d.id: d for d in decisions}


def test_keep_hourly_keeps_the_newest_of_each_of_the_last_n_hours():
    # every 20 minutes for 5 hours
    series = [candidate(START + timedelta(minutes=20 * i)) for i in range(15)]
    decisions = plan_retention(series, SnapshotConfig(keep_hourly=3))
    kept = [d for d in decisions if d.keep]
    assert [d.id for d in kept] == [sid(START + timedelta(minutes=20 * i)) for i in (14, 11, 8)]
    assert [d.reasons for d in kept] == [
        ("keep-hourly 2024-06-01T04",),
        ("keep-hourly 2024-06-01T03",),
        ("keep-hourly 2024-06-01T02",),
    ]


def test_keep_yearly_keeps_the_newest_of_each_year():
    series = [candidate(START + timedelta(days=100 * i)) for i in range(12)]  # 2024 .. 2027
    decisions = plan_retention(series, SnapshotConfig(keep_yearly=3))
    kept = {d.id: d.reasons for d in decisions if d.keep}
    years = {i[:4] for i in kept}
    assert years == {"2027", "2026", "2025"} and len(kept) == 3
    newest_2025 = max(c.id for c in series if c.id.startswith("2025"))
    assert kept[newest_2025] == ("keep-yearly 2025",)


def test_keep_within_counts_from_the_newest_snapshot_not_from_now():
    series = [candidate(START + timedelta(days=i)) for i in range(30)]
    policy = SnapshotConfig.model_validate({"keep_within": "7d"})
    decisions = plan_retention(series, policy, now=START + timedelta(days=400))
    kept = [d for d in decisions if d.keep]
    # younger than 7 days counted from the newest (day 29): days 23..29; day 22 is exactly 7d
    assert [d.id for d in kept] == [sid(START + timedelta(days=i)) for i in range(29, 22, -1)]
    assert all(d.reasons == ("keep-within 7d",) for d in kept)
    assert all(d.reasons == ("no rule keeps it",) for d in decisions if not d.keep)


def test_keep_within_alone_is_a_policy_and_nothing_at_all_is_refused():
    with pytest.raises(ConfigError, match="keep_"):
        plan_retention([candidate(START)], SnapshotConfig())
    plan_retention([candidate(START)], SnapshotConfig.model_validate({"keep_within": "12h"}))


def test_a_pinned_snapshot_is_kept_whatever_the_policy_says_and_says_by_whom():
    old = candidate(START, pin={"pinned": True, "by": "tripwire", "reason": "mass deletion"})
    plain = candidate(START + timedelta(hours=1), pin={"pinned": True, "by": "operator"})
    newest = candidate(START + timedelta(days=3))
    decisions = by_id(plan_retention([old, plain, newest], SnapshotConfig(keep_last=1)))
    assert decisions[old.id].keep and decisions[old.id].reasons == (
        "pinned (tripwire: mass deletion)",
    )
    assert decisions[plain.id].reasons == ("pinned (operator)",)
    assert decisions[newest.id].reasons == ("keep-last 1",)


def test_an_incomplete_remote_snapshot_goes_after_a_day_and_only_from_the_bucket():
    now = START + timedelta(days=10)
    old = candidate(now - timedelta(days=2), complete=False, sides=("remote",))
    young = candidate(now - timedelta(hours=3), complete=False, sides=("remote",))
    both = candidate(
        now - timedelta(days=3),
        complete=False,
        sides=("local", "remote"),
        incomplete_on=("local", "remote"),
    )
    pinned = candidate(
        now - timedelta(days=4), complete=False, sides=("remote",), pin={"pinned": True}
    )
    complete = candidate(now - timedelta(days=1))
    decisions = by_id(
        plan_retention([old, young, both, pinned, complete], SnapshotConfig(keep_last=1), now=now)
    )
    assert (decisions[old.id].keep, decisions[old.id].reasons) == (
        False,
        ("incomplete, older than 1 day",),
    )
    assert decisions[old.id].remove_from == ("remote",)
    assert decisions[both.id].remove_from == ("remote",)  # the local directory is left
    assert decisions[young.id].keep and decisions[young.id].reasons == (
        "incomplete, younger than 1 day",
    )
    assert decisions[pinned.id].keep and decisions[pinned.id].reasons[0] == "pinned (operator)"
    assert decisions[complete.id].reasons == ("keep-last 1",)  # incomplete ones count for no rule


def manifest(snapshot_id: str, errors: int = 0) -> Manifest:
    moment = datetime.strptime(snapshot_id, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    window = CaptureWindow(
        vectors_at=moment,
        vectors_finished_at=moment,
        history_at=moment,
        history_finished_at=moment,
        longest_read_s=0.0,
    )
    return Manifest(
        id=snapshot_id,
        created_at=moment,
        collection="mem0",
        capture=window,
        files=(FileEntry(path="history.db", size=1, sha256="0" * 64),),
        check={"errors": errors, "findings": []},
    )


def entry(snapshot_id: str, *, complete=True, verified=False, pin=None, errors=0) -> Entry:
    return Entry(
        id=snapshot_id,
        complete=complete,
        manifest=manifest(snapshot_id, errors) if complete else None,
        verified={"ok": True} if verified else None,
        size_bytes=1,
        pin=pin,
    )


def test_merge_makes_one_candidate_per_id_and_newest_verified_is_decided_once():
    a, b, c = (sid(START + timedelta(hours=h)) for h in (0, 1, 2))
    listed = {
        "local": [entry(a), entry(b, verified=True), entry(c)],
        # the bucket verified the oldest; the local side verified b: b is the newest verified
        "remote": [entry(a, verified=True), entry(b), entry(c, complete=False)],
    }
    candidates = merge(listed)
    assert [(x.id, x.sides, x.incomplete_on) for x in candidates] == [
        (a, ("local", "remote"), ()),
        (b, ("local", "remote"), ()),
        (c, ("local", "remote"), ("remote",)),
    ]
    decisions = by_id(plan_retention(candidates, SnapshotConfig(keep_last=1)))
    assert decisions[c].reasons == ("keep-last 1",)  # complete locally: the policy decides
    assert decisions[b].reasons == ("newest verified",)
    assert not decisions[a].keep and decisions[a].remove_from == ("local", "remote")


def test_merge_reads_pins_from_either_side_and_ignores_unpinned_documents():
    a, b = sid(START), sid(START + timedelta(hours=1))
    listed = {
        "local": [entry(a, pin={"pinned": False, "reason": "was"}), entry(b)],
        "remote": [entry(a), entry(b, pin={"pinned": True, "by": "operator", "reason": "x"})],
    }
    pins = {c.id: c.pin for c in merge(listed)}
    assert pins[a] is None and pins[b] == {"pinned": True, "by": "operator", "reason": "x"}


def test_a_verified_snapshot_with_errors_on_one_side_is_not_the_newest_verified():
    a, b = sid(START), sid(START + timedelta(hours=1))
    listed = {"local": [entry(a, verified=True), entry(b, verified=True, errors=1)]}
    decisions = by_id(plan_retention(merge(listed), SnapshotConfig(keep_last=1)))
    assert decisions[a].reasons == ("newest verified",)
    assert decisions[b].reasons == ("keep-last 1",)


def test_a_local_snapshot_waiting_for_its_upload_is_kept_until_it_is_uploaded():
    a, b, c = (sid(START + timedelta(hours=h)) for h in (0, 1, 2))
    listed = {"local": [entry(a), entry(b), entry(c)], "remote": [entry(c)]}
    candidates = merge(listed, upload_pending={a})  # a's upload failed
    assert [x.upload_pending for x in candidates] == [True, False, False]
    decisions = by_id(plan_retention(candidates, SnapshotConfig(keep_last=1)))
    assert decisions[a].keep and decisions[a].reasons == ("upload pending",)
    assert not decisions[b].keep and decisions[b].remove_from == ("local",)
    assert decisions[c].reasons == ("keep-last 1",)
    uploaded = by_id(plan_retention(merge(listed), SnapshotConfig(keep_last=1)))
    assert not uploaded[a].keep  # once uploaded (marker gone) the policy decides again
