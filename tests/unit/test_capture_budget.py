"""The capture budget's arithmetic: estimates, the rate it picks, which files it flags."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from memsync import capture_budget as budget
from memsync.doctor.wal import judge_budget
from memsync.stores.journal_mode import LiveFile
from memsync.stores.sqlite_files import CopyResult
from tests.helpers.values import T0

MB = 1_000_000


@pytest.fixture(autouse=True)
def _unfiltered_logs():
    """capture_logs sees info events only when no CLI run left a warning-level filter."""
    structlog.reset_defaults()


def live(name: str, mode: str | None, size: int) -> LiveFile:
    return LiveFile(path=Path(f"/srv/{name}"), label=name, mode=mode, size_bytes=size)


def rate(bytes_per_s: float, source: str = "history.db") -> budget.CopyRate:
    return budget.CopyRate(
        bytes_per_s=bytes_per_s, measured_at=T0, source=source, sample_bytes=10 * MB, sample_s=1.0
    )


@pytest.mark.parametrize(
    ("mode", "size", "near"),
    [
        ("rollback", 300 * MB, True),  # 3.0 s at 100 MB/s
        ("rollback", 250 * MB, False),  # 2.5 s: not above the threshold
        ("wal", 3000 * MB, False),  # WAL: readers never block the writer
        (None, 300 * MB, True),  # no header yet: mem0's default mode applies
    ],
    ids=["rollback-above", "rollback-at-threshold", "wal-huge", "unknown-mode"],
)
def test_a_file_is_near_the_timeout_when_not_wal_and_estimated_above_2_5_s(mode, size, near):
    built = budget.build_budget([live("storage.sqlite", mode, size)], rate(100 * MB))
    assert built.files[0].estimated_hold_s == pytest.approx(size / (100 * MB))
    assert built.files[0].near_timeout is near
    assert [f.path.name for f in built.near_timeout] == (["storage.sqlite"] if near else [])


def test_the_field_report_store_is_flagged_at_the_field_rate():
    # 200,000 points at 384 dims: ~840 MB; VACUUM INTO at 165 MB/s held the read 5.1 s.
    built = budget.build_budget([live("storage.sqlite", "rollback", 840 * MB)], rate(165 * MB))
    assert built.near_timeout[0].estimated_hold_s == pytest.approx(5.09, abs=0.01)


def test_the_slowest_recorded_rate_is_used_and_the_default_without_any():
    samples = [rate(400 * MB), rate(150 * MB, "collections"), rate(600 * MB)]
    assert budget.pick_rate(samples).bytes_per_s == 150 * MB
    assert budget.pick_rate([]) is budget.DEFAULT_RATE
    assert budget.DEFAULT_RATE.bytes_per_s == 100 * MB and budget.DEFAULT_RATE.measured_at is None


def test_an_agent_that_pauses_the_app_leaves_no_file_near_the_timeout():
    built = budget.build_budget([live("history.db", "rollback", 900 * MB)], rate(100 * MB))
    assert (
        built.near_timeout
        and not budget.CaptureBudget(files=built.files, rate=built.rate, agent=True).near_timeout
    )


def copy(size: int, seconds: float) -> CopyResult:
    return CopyResult(
        source=Path("/srv/history.db"),
        dest=Path("/tmp/copy"),
        started_at=T0,
        finished_at=T0 + timedelta(seconds=seconds),
        duration_s=seconds,
        size_bytes=size,
    )


def test_only_copies_of_at_least_4_mib_that_took_time_are_samples():
    samples = budget.samples_from_copies(
        [copy(8 * 1024 * 1024, 0.05), copy(1024 * 1024, 0.001), copy(9 * 1024 * 1024, 0.0)]
    )
    assert [(s.bytes_per_s, s.source) for s in samples] == [(8 * 1024 * 1024 / 0.05, "history.db")]


def test_recorded_samples_keep_the_newest_five_and_survive_a_reload(tmp_path):
    with capture_logs() as logs:
        for index in range(7):
            budget.record_samples(tmp_path, [rate((index + 1) * MB)])
    assert [e["event"] for e in logs] == ["capture_rate_recorded"] * 7
    loaded = budget.load_samples(tmp_path)
    assert [s.bytes_per_s for s in loaded] == [3 * MB, 4 * MB, 5 * MB, 6 * MB, 7 * MB]
    assert loaded[0].measured_at == T0
    assert (tmp_path / budget.RATE_FILE).stat().st_mode & 0o777 == 0o600


def test_an_unreadable_rate_file_falls_back_to_the_default(tmp_path):
    (tmp_path / budget.RATE_FILE).write_text("{not json", encoding="utf-8")
    with capture_logs() as logs:
        assert budget.pick_rate(budget.load_samples(tmp_path)) is budget.DEFAULT_RATE
    assert [(e["event"], e["log_level"]) for e in logs] == [("capture_rate_unreadable", "warning")]


def test_doctor_warns_per_file_near_the_timeout_and_names_the_fix():
    built = budget.build_budget(
        [live("storage.sqlite", "rollback", 600 * MB), live("history.db", "rollback", MB)],
        rate(150 * MB),
    )
    results = judge_budget(built)
    assert [(r.code, r.status, r.path) for r in results] == [
        ("wal-recommended", "warning", "/srv/storage.sqlite")
    ]
    assert results[0].fix is not None and results[0].fix.startswith("memsync tune --wal")
    assert "4.0 s" in results[0].message


def test_doctor_is_ok_when_every_file_is_in_wal_mode():
    built = budget.build_budget([live("storage.sqlite", "wal", 6000 * MB)], rate(150 * MB))
    [result] = judge_budget(built)
    assert (result.status, result.message) == (
        "ok",
        "every SQLite file is in WAL mode: captures never block the app's writer",
    )


def test_the_daemon_keeps_how_many_files_a_snapshot_job_warned_about():
    from memsync.jobs import summarize

    output = {"id": "20261201T000000Z", "size_bytes": 10, "capture_budget": {"near_timeout": [{}]}}
    assert summarize("snapshot", output)["capture_near_timeout"] == 1
    assert summarize("snapshot", {"id": "x"})["capture_near_timeout"] == 0
