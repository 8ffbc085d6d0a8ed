"""plan_retention: restic's keep rules over snapshots spread across months (time is a value)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memsync.config import SnapshotConfig
from memsync.errors import ConfigError
from memsync.snapshot import Candidate, plan_retention


def candidate(moment: datetime, complete: bool = True, verified: bool = False) -> Candidate:
    return Candidate(
        id=moment.strftime("%Y%m%dT%H%M%SZ"), time=moment, complete=complete, verified=verified
    )


START = datetime(2026, 1, 1, 3, 30, tzinfo=UTC)
# two snapshots a day (03:30 and 15:30) for 120 days
SERIES = [candidate(START + timedelta(hours=12 * i)) for i in range(240)]


def kept(decisions):
    return [d.id for d in decisions if d.keep]


def test_keep_last_keeps_the_newest_n():
    decisions = plan_retention(SERIES, SnapshotConfig(keep_last=3))
    assert kept(decisions) == [c.id for c in sorted(SERIES, key=lambda c: c.id, reverse=True)[:3]]


def test_keep_daily_keeps_the_newest_of_each_of_the_last_n_days():
    decisions = plan_retention(SERIES, SnapshotConfig(keep_daily=7))
    ids = kept(decisions)
    assert len(ids) == 7 and all(i.endswith("T153000Z") for i in ids)
    assert len({i[:8] for i in ids}) == 7


def test_keep_weekly_uses_iso_weeks_and_monthly_uses_months():
    weekly = kept(plan_retention(SERIES, SnapshotConfig(keep_weekly=4)))
    weeks = {
        datetime.strptime(i, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).isocalendar()[:2] for i in weekly
    }
    assert len(weekly) == len(weeks) == 4
    monthly = kept(plan_retention(SERIES, SnapshotConfig(keep_monthly=6)))
    assert [i[:6] for i in monthly] == ["202604", "202603", "202602", "202601"]
    assert monthly[1] == "20260331T153000Z"  # the newest of March


def test_rules_add_up_and_every_kept_snapshot_says_why():
    decisions = plan_retention(SERIES, SnapshotConfig(keep_last=2, keep_daily=3, keep_monthly=2))
    by_id = {d.id: d for d in decisions}
    newest = sorted(by_id)[-1]
    assert set(by_id[newest].reasons) == {
        "keep-last 1",
        "keep-daily 2026-04-30",
        "keep-monthly 2026-04",
    }
    assert len(kept(decisions)) == 2 + 2 + 1  # last 2 (one shared with daily), 2 more days, March
    assert all(d.reasons for d in decisions)
    assert {d.reasons for d in decisions if not d.keep} == {("no rule keeps it",)}


def test_the_newest_verified_snapshot_is_never_removed():
    series = list(SERIES)
    series[10] = Candidate(id=series[10].id, time=series[10].time, complete=True, verified=True)
    decisions = {d.id: d for d in plan_retention(series, SnapshotConfig(keep_last=1))}
    assert decisions[series[10].id].keep and decisions[series[10].id].reasons == (
        "newest verified",
    )


def test_an_incomplete_local_snapshot_is_kept_and_counts_for_no_rule():
    partial = candidate(START + timedelta(days=500), complete=False)
    decisions = plan_retention([*SERIES, partial], SnapshotConfig(keep_last=1))
    first, second = decisions[:2]
    assert (first.id, first.keep, first.reasons) == (
        partial.id,
        True,
        ("incomplete, never pruned",),
    )
    assert second.reasons == ("keep-last 1",)  # the newest complete one


def test_an_empty_policy_is_refused():
    with pytest.raises(ConfigError, match="keep_"):
        plan_retention(SERIES, SnapshotConfig())
