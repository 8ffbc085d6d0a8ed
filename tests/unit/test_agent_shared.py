"""Where the agent's cross-process write gate lives, and why memsync says a pause was not whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.agent.shared import gate_directory
from memsync.stores.agent_client import not_held_reason


def test_the_gate_lives_beside_history_db_and_an_in_memory_history_has_none() -> None:
    assert gate_directory("/srv/app/mem0/history.db") == Path(
        "/srv/app/mem0/history.db.memsync-gate"
    )
    assert gate_directory(":memory:") is None and gate_directory(None) is None


def test_a_pause_is_whole_only_when_it_held_every_writer_to_its_end() -> None:
    held = {"lease_s": 30.0, "lease_ran_out": False, "covered": [10, 11], "uncovered": {}}
    assert not_held_reason(held) is None
    outside = {**held, "uncovered": {12: "python cron.py", 9: "python other.py"}}
    reason = not_held_reason(outside)
    assert reason is not None and "\n" not in reason
    assert reason.startswith("pid 9 (python other.py), pid 12 (python cron.py) had history.db")
    assert "attach the agent in every app process" in reason
    assert not_held_reason({**held, "lease_ran_out": True}) == (
        "the pause lease (30.0 s) ran out before the capture ended"
    )


def test_a_gate_directory_that_cannot_be_made_leaves_the_gate_in_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from memsync.agent import _shared

    assert _shared(None) is None
    assert _shared(Path("/proc/self/no-such-dir/history.db.memsync-gate")) is None
    assert "a pause holds this process only" in caplog.text
