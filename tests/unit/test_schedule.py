"""Pure decisions of the daemon and of the delete safety rules (time is a value)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from memsync.config import JobSchedule
from memsync.doctor import judge_mem0_version
from memsync.errors import ConfigError
from memsync.forget import refuse_bad_mem0
from memsync.jobs import Job, backoff_s, classify, latest_slot, next_run, plan_catch_up

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
UTC_ZONE = ZoneInfo("UTC")


def job(name: str, at: time | None = None, every: timedelta | None = None) -> Job:
    return Job(name=name, argv=(name,), when=JobSchedule(at=at, every=every))


def test_a_job_missed_while_down_runs_once_at_start_and_one_done_for_its_slot_does_not():
    jobs = [
        job("snapshot", at=time(3, 30)),
        job("prune", at=time(3, 10)),
        job("check", every=timedelta(minutes=15)),
    ]
    state = {
        "snapshot": {
            "last_success_at": "2026-11-28T03:30:05Z"
        },  # yesterday's slot: today's 03:30 missed
        "prune": {"last_success_at": "2026-11-29T03:10:02Z"},  # done for today's slot
        "check": {"last_success_at": "2026-11-29T11:50:00Z"},  # due again at 12:05
    }
    assert plan_catch_up(jobs, state, NOW, UTC_ZONE) == ["snapshot"]


def test_never_run_jobs_run_at_start():
    assert plan_catch_up([job("check", every=timedelta(hours=1))], {}, NOW, UTC_ZONE) == ["check"]


def test_at_slots_follow_the_configured_time_zone():
    slot = latest_slot(JobSchedule(at=time(3, 30)), NOW, ZoneInfo("America/New_York"), None)
    assert slot == datetime(2026, 11, 29, 8, 30, tzinfo=UTC)  # 03:30 EST


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (0, "ok"),
        (3, "problems"),
        (5, "queued"),
        (12, "locked"),
        (75, "try-later"),
        (11, "failed"),
        (1, "failed"),
        (2, "failed"),
        (130, "interrupted"),
    ],
    ids=[
        "ok",
        "problems",
        "queued",
        "locked",
        "try-later",
        "unavailable",
        "bug",
        "usage",
        "interrupted",
    ],
)
def test_outcomes_from_exit_statuses(code, outcome):
    assert classify(code) == outcome


def test_backoff_doubles_caps_and_stays_inside_an_interval():
    assert [backoff_s(n, None) for n in (1, 2, 3)] == [30.0, 60.0, 120.0]
    assert backoff_s(20, None) == 3600.0
    assert backoff_s(5, 20.0) == 5.0


def test_backoff_stays_a_number_after_months_of_failures():
    # an hourly retry for a year: memsync <= 0.2 computed 30 * 2**8759 and crashed the loop
    assert backoff_s(24 * 365, None) == 3600.0


@pytest.mark.parametrize(
    ("version", "bulk", "refused"),
    [("1.0.2", True, True), ("1.0.2", False, False), ("2.2.1", True, False), (None, False, True)],
    ids=["bad-bulk", "bad-by-id", "good", "absent"],
)
def test_mem0_releases_with_delete_bugs_are_refused_for_bulk_deletes(version, bulk, refused):
    if refused:
        with pytest.raises(ConfigError):
            refuse_bad_mem0(version, bulk)
    else:
        refuse_bad_mem0(version, bulk)


def test_known_bad_mem0_versions_are_judged():
    assert [p[0] for p in judge_mem0_version("1.0.2", on_disk=False)] == [
        "error",
        "error",
        "warning",
        "warning",
    ]
    assert judge_mem0_version("1.0.2", on_disk=True)[0][1].startswith("delete_all")
    assert judge_mem0_version("2.2.1", on_disk=False) == []


BERLIN = ZoneInfo("Europe/Berlin")


def runs_of(
    when: JobSchedule, start: datetime, end: datetime, zone: ZoneInfo, duration: timedelta
) -> list[datetime]:
    """The daemon's loop, with time as a value: run at each next time, the next counted from the end."""
    runs, due = [], next_run(when, start, zone)
    while due is not None and due < end:
        runs.append(due)
        due = next_run(when, due + duration, zone)
    return runs


@pytest.mark.parametrize(
    ("start", "change_day", "times_that_day"),
    [
        (datetime(2026, 3, 27, 12, 0, tzinfo=UTC), "2026-03-29", ["03:30"]),  # 02:30 does not exist
        (datetime(2026, 10, 23, 12, 0, tzinfo=UTC), "2026-10-25", ["02:30"]),  # 02:30 exists twice
    ],
    ids=["spring-forward", "fall-back"],
)
def test_a_daily_job_runs_once_per_local_day_across_a_dst_change(start, change_day, times_that_day):
    runs = runs_of(
        JobSchedule(at=time(2, 30)), start, start + timedelta(days=5), BERLIN, timedelta(seconds=40)
    )
    local = [r.astimezone(BERLIN) for r in runs]
    days = [d.date().isoformat() for d in local]
    assert (
        len(days) == len(set(days)) == 5
    )  # once per local day (schedule 1.2.2 ran twice the day after spring)
    assert [
        d.strftime("%H:%M") for d in local if d.date().isoformat() == change_day
    ] == times_that_day
    assert all(d.strftime("%H:%M") == "02:30" for d in local if d.date().isoformat() != change_day)


def test_an_interval_counts_from_the_end_of_the_previous_run():
    runs = runs_of(
        JobSchedule(every=timedelta(minutes=15)),
        NOW,
        NOW + timedelta(hours=1),
        UTC_ZONE,
        timedelta(minutes=2),
    )
    assert [r - NOW for r in runs] == [
        timedelta(minutes=15),
        timedelta(minutes=32),
        timedelta(minutes=49),
    ]
