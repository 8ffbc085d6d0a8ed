"""The one lock helper, with a real second process holding the lock."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memsync import flock, utc

HOLD = (
    "import sys, time; from pathlib import Path; from memsync import flock; "
    "h = flock.acquire(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)"
)


def test_a_lock_held_by_another_process_names_its_pid_and_dies_with_it(tmp_path):
    path = tmp_path / "operation.lock"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        note = flock.holder(path)
        assert note is not None and flock.holder_pid(note) == child.pid
        with pytest.raises(flock.LockHeld) as raised:
            flock.acquire(path)
        assert flock.holder_pid(raised.value.holder) == child.pid
    finally:
        child.kill()
        child.wait()
    assert flock.holder(path) is None
    with flock.hold(path) as handle:
        handle.seek(0)
        assert flock.holder_pid(handle.read()) is not None


def test_a_missing_lock_file_is_free(tmp_path):
    assert flock.holder(tmp_path / "absent.lock") is None


def test_utc_round_trip_and_naive_times_are_refused():
    moment = datetime(2026, 12, 1, 11, 18, 9, 500000, tzinfo=timezone(timedelta(hours=1)))
    text = utc.iso(moment)
    assert text == "2026-12-01T10:18:09.500000Z"
    assert utc.parse(text) == moment.astimezone(UTC)
    with pytest.raises(ValueError, match="naive"):
        utc.iso(datetime(2026, 12, 1))  # noqa: DTZ001
    with pytest.raises(ValueError, match="offset"):
        utc.parse("2026-12-01T10:18:09")
