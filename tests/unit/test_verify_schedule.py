"""The slice planner of scheduled verification: values in, values out (no clock, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memsync.snapshot.verify_schedule import (
    Stored,
    coverage,
    plan_side,
    record_reads,
    runs_per_cycle,
    slice_budget,
)

START = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)


def stored(day: int, verified: bool = True, sizes: tuple[int, ...] = (5000, 700, 90)) -> Stored:
    created = START + timedelta(days=day)
    names = ("history.db", "qdrant/collection/mem0/storage.sqlite", "qdrant/meta.json")
    return Stored(
        snapshot_id=created.strftime("%Y%m%dT%H%M%SZ"),
        files=tuple(zip(names, sizes, strict=False)),
        verified=verified,
        created_at=created,
    )


@pytest.mark.parametrize(
    ("cycle", "interval", "runs"),
    [
        (timedelta(days=30), timedelta(days=1), 30),
        (timedelta(days=30), timedelta(hours=7), 102),
        (timedelta(hours=6), timedelta(days=1), 1),
        (timedelta(days=1), timedelta(0), 1),
    ],
    ids=["daily", "uneven", "interval-longer-than-cycle", "zero-interval"],
)
def test_runs_per_cycle_is_the_floor_of_cycle_over_interval(cycle, interval, runs):
    assert runs_per_cycle(cycle, interval) == runs


def test_slice_budget_is_the_ceiling_of_bytes_over_runs():
    assert slice_budget(1000, timedelta(days=30), timedelta(days=1)) == 34
    assert slice_budget(0, timedelta(days=30), timedelta(days=1)) == 0


def test_the_newest_snapshot_is_read_completely_first_whatever_the_record():
    snapshots = [stored(0), stored(1), stored(2)]
    newest = snapshots[-1]
    fresh = {newest.snapshot_id: dict.fromkeys([p for p, _ in newest.files], START)}
    plan = plan_side(
        snapshots, fresh, START + timedelta(days=2, hours=1), timedelta(days=30), timedelta(days=1)
    )
    first = plan.items[0]
    assert (first.snapshot_id, first.full, first.reason) == (newest.snapshot_id, True, "newest")
    assert first.paths == tuple(p for p, _ in newest.files)
    assert newest.snapshot_id not in {item.snapshot_id for item in plan.items[1:]}


def test_a_snapshot_not_verified_is_one_unit_read_completely():
    snapshots = [stored(0, verified=False), stored(1)]
    plan = plan_side(
        snapshots, {}, START + timedelta(days=1), timedelta(days=30), timedelta(days=1)
    )
    assert [(i.snapshot_id, i.full, i.reason) for i in plan.items[1:]] == [
        (snapshots[0].snapshot_id, True, "not verified")
    ]


def test_the_least_recently_read_files_come_first_and_the_budget_bounds_the_rest():
    snapshots = [stored(day, sizes=(100, 100, 100)) for day in range(4)]
    now = START + timedelta(days=4)
    read = {
        s.snapshot_id: {p: now - timedelta(hours=10 - i) for i, (p, _) in enumerate(s.files)}
        for s in snapshots
    }
    oldest = snapshots[2]
    read[oldest.snapshot_id]["qdrant/meta.json"] = now - timedelta(days=3)
    plan = plan_side(snapshots, read, now, timedelta(days=30), timedelta(days=10))
    assert plan.budget_bytes == slice_budget(900, timedelta(days=30), timedelta(days=10)) == 300
    slice_items = plan.items[1:]
    assert slice_items[0].snapshot_id == oldest.snapshot_id
    assert slice_items[0].paths[0] == "qdrant/meta.json"
    assert sum(i.size_bytes for i in slice_items) == 300


def test_a_file_that_would_pass_its_cycle_before_the_next_run_is_taken_beyond_the_budget():
    snapshots = [stored(day, sizes=(1000, 10, 10)) for day in range(3)]
    now = START + timedelta(days=40)
    cycle, interval = timedelta(days=30), timedelta(days=1)
    read = {
        s.snapshot_id: dict.fromkeys((p for p, _ in s.files), now - timedelta(days=1))
        for s in snapshots
    }
    late = snapshots[1]
    read[snapshots[0].snapshot_id]["qdrant/meta.json"] = now - timedelta(days=29, hours=1)
    read[late.snapshot_id]["history.db"] = now - timedelta(days=29, hours=2)
    plan = plan_side(snapshots, read, now, cycle, interval)
    taken = {(i.snapshot_id, p) for i in plan.items[1:] for p in i.paths}
    assert (late.snapshot_id, "history.db") in taken
    assert (snapshots[0].snapshot_id, "qdrant/meta.json") in taken
    assert any(i.reason.endswith(", due") for i in plan.items[1:])
    assert plan.planned_bytes - snapshots[-1].size_bytes > plan.budget_bytes


@pytest.mark.parametrize(
    ("cycle", "interval", "keep"),
    [
        (timedelta(days=7), timedelta(hours=6), 20),
        (timedelta(days=30), timedelta(days=1), 45),
        (timedelta(days=3), timedelta(hours=5), 10),
    ],
    ids=["week-6h", "month-daily", "uneven"],
)
def test_every_stored_byte_is_read_within_each_cycle_over_months_of_runs(cycle, interval, keep):
    """Daily snapshots, retention keeping ``keep``, runs every ``interval`` for 120 days."""
    last_read: dict[str, dict[str, datetime]] = {}
    verified: set[str] = set()
    now = START
    bytes_per_run: list[int] = []
    while now < START + timedelta(days=120):
        made = int((now - START) / timedelta(days=1))
        present = [
            stored(day, verified=False, sizes=(4000 + 37 * day, 300, 60))
            for day in range(max(0, made - keep + 1), made + 1)
        ]
        present = [
            Stored(
                snapshot_id=s.snapshot_id,
                files=s.files,
                verified=s.snapshot_id in verified,
                created_at=s.created_at,
            )
            for s in present
        ]
        plan = plan_side(present, last_read, now, cycle, interval)
        reads = {item.snapshot_id: item.paths for item in plan.items}
        verified |= {item.snapshot_id for item in plan.items if item.full}
        last_read = record_reads(last_read, reads, now, [s.snapshot_id for s in present])
        for snapshot in present:
            for path, _size in snapshot.files:
                anchor = last_read.get(snapshot.snapshot_id, {}).get(path, snapshot.created_at)
                assert now - anchor < cycle, (snapshot.snapshot_id, path, now)
        bytes_per_run.append(plan.planned_bytes - plan.items[0].size_bytes)
        now += interval
    steady = bytes_per_run[len(bytes_per_run) // 2 :]
    whole = sum(s.size_bytes for s in present[:-1])
    assert max(steady) < whole  # a slice, not everything
    assert set(last_read) <= {s.snapshot_id for s in present}
    assert coverage(present, last_read, now, cycle) == 1.0


def test_coverage_counts_only_bytes_read_within_the_cycle():
    snapshots = [stored(0, sizes=(600, 300, 100))]
    now = START + timedelta(days=10)
    sid = snapshots[0].snapshot_id
    read = {
        sid: {"history.db": now - timedelta(days=2), "qdrant/meta.json": now - timedelta(days=8)}
    }
    assert coverage(snapshots, read, now, timedelta(days=7)) == pytest.approx(0.6)
    assert coverage([], {}, now, timedelta(days=7)) == 1.0


def test_record_reads_drops_snapshots_no_longer_present():
    before = {"a": {"x": START}, "b": {"y": START}}
    later = START + timedelta(hours=1)
    after = record_reads(before, {"b": ["z"], "c": ["w"]}, later, ["b", "c"])
    assert after == {"b": {"y": START, "z": later}, "c": {"w": later}}
    assert before == {"a": {"x": START}, "b": {"y": START}}


def _config(tmp_path, daemon: str):
    from memsync import config as config_module

    path = tmp_path / "memsync.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[mem0.vector_store.config]\npath = "{tmp_path / "q"}"\n'
        f'[snapshot]\nverify_cycle = "7d"\n[daemon]\n{daemon}'
    )
    return config_module.load(path, {"HOME": str(tmp_path)})


@pytest.mark.parametrize(
    ("daemon", "interval"),
    [('verify_every = "6h"\n', timedelta(hours=6)), ('verify_at = "04:30"\n', timedelta(days=1))],
    ids=["every", "at"],
)
def test_the_daemon_schedules_the_verify_job_and_its_interval_sizes_the_slice(
    tmp_path, daemon, interval
):
    from memsync.jobs import build_jobs
    from memsync.snapshot.verify_scheduled import job_interval

    config = _config(tmp_path, daemon)
    jobs = {job.name: job for job in build_jobs(config)}
    assert jobs["verify"].argv == ("snapshot", "verify", "--scheduled")
    assert job_interval(config) == interval
    assert config.snapshot.verify_cycle == timedelta(days=7)


def test_the_textfile_has_the_verify_series_from_the_jobs_summary(tmp_path):
    import re

    from memsync.jobs import QueueFigures, judge_jobs, render_textfile, summarize

    config = _config(tmp_path, 'verify_every = "1d"\n')
    never = render_textfile(
        judge_jobs(config, {"jobs": {}}, START), {"jobs": {}}, QueueFigures(count=0)
    )
    assert "memsync_verify_last_success_timestamp_seconds 0" in never.splitlines()
    output = {
        "bytes_read": 4096,
        "counts": {"errors": 2, "warnings": 0},
        "last_ok_at": "2026-11-01T03:00:00Z",
        "coverage": {"local": 1.0, "remote": 0.25},
    }
    record = {"last_outcome": "problems", "failing": True, "summary": summarize("verify", output)}
    state = {"jobs": {"verify": record}}
    text = render_textfile(judge_jobs(config, state, START), state, QueueFigures(count=0))
    samples = dict(re.findall(r"^(memsync_verify_\S+) (\S+)$", text, re.MULTILINE))
    assert samples == {
        "memsync_verify_last_success_timestamp_seconds": str(round(START.timestamp())),
        "memsync_verify_bytes_read": "4096",
        "memsync_verify_problems": "2",
        'memsync_verify_cycle_coverage_ratio{side="local"}': "1",
        'memsync_verify_cycle_coverage_ratio{side="remote"}': "0.250",
    }
