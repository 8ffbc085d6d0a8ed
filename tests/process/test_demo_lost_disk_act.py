"""The demo's lost-disk act (``memsync.demo.lost_disk``) as the demo runs it.

Real parts: a deployment built through mem0 (hash embedder), the real CLI as a subprocess (the
demo's own runner), the daemon running the pinned Litestream binary (``make tools``) with a
directory replica, the demo's app as a process adding every 50 ms, SIGKILLs and the store
directories deleted; the act's counts are checked here against the stores the restore left.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.demo import lost_disk
from memsync.demo.__main__ import DemoFailed, memsync
from tests.helpers import litestream


@pytest.mark.slow(
    reason="the act lets the app add memories for 4-10 s under the daemon, as the demo does"
)
def test_the_act_loses_a_handful_of_acknowledged_adds_and_the_snapshot_would_lose_them_all(
    tmp_path: Path,
) -> None:
    litestream.ensure()  # build/tools/, where the act finds it as `make demo` leaves it
    said: list[str] = []
    root = tmp_path / "lost-disk"
    counts = lost_disk.lost_disk_act(root, memsync, said.append, DemoFailed, random.Random(1))

    assert 60 <= counts["acked"] == counts["daily_lost"]
    assert counts["lost"] < counts["acked"] and counts["window_s"] <= lost_disk.RPO_S
    acked = [line.split()[1] for line in (root / "acks.log").read_text().splitlines()]
    history = sqlite3.connect(root / "mem0" / "history.db")
    added = {row[0] for row in history.execute("SELECT memory_id FROM history WHERE event='ADD'")}
    history.close()
    kept = [memory_id for memory_id in acked if memory_id in added]
    assert len(kept) >= counts["acked"] - counts["lost"]  # every one the act counted back is
    assert acked[: len(kept)] == kept  # what was lost is the tail: no hole before a kept add
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "memsync",
            "--config",
            str(root / "memsync.toml"),
            "check",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(checked.stdout)
    assert checked.returncode == 0 and report["counts"]["errors"] == 0
    assert report["counts"]["points"] == lost_disk.SEEDED + len(kept)
    assert any("would have lost all" in line for line in said)
