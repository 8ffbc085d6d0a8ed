"""Capture directories: a running capture's flock keeps it, a dead one's copies are removed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from memsync.stores.capture import CAPTURING_LOCK, remove_stale_captures

ROOT = Path(__file__).resolve().parents[2]


def test_stale_captures_go_and_held_or_just_made_ones_stay(tmp_path):
    held, dead, fresh, old = (
        tmp_path / f"capture-{name}" for name in ("held", "dead", "fresh", "old")
    )
    for directory in (held, dead, fresh, old):
        directory.mkdir()
        (directory / "history.db").write_text("copy")
    (dead / CAPTURING_LOCK).write_text("")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from memsync import flock; "
            f"h = flock.acquire(Path({str(held / CAPTURING_LOCK)!r})); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        removed = remove_stale_captures(tmp_path)
    finally:
        holder.communicate("", timeout=60)
    assert sorted(removed) == [dead, old]
    assert held.is_dir() and fresh.is_dir() and not dead.exists() and not old.exists()
    assert remove_stale_captures(tmp_path) == [held]  # its holder is gone now
