"""restore: a full temporary directory during the check after the swap: the report says the swap was made.

The snapshot's create judged errors (orphan points), so after the fast path's swap the check
runs in full; above ``SPILL_ROWS`` its points are sorted through a temporary SQLite database.
With the temporary directory full (a 64 KiB tmpfs, in a private mount namespace) that sort
raises TryLaterError after the swap. Before this was held, the restore exited 75 with "free
space in the temporary directory ..., then try again", although both stores were already
replaced (the old ones moved aside), and gave no report of the swap: a user who "tried again"
with --force moved the restored stores aside a second time. Now it reports the swap, says why
the check did not run (``check_error``), leaves older pre-restore copies, and exits 4.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

DRIVER = (
    "import sys\n"
    "import memsync.stores.qdrant_embedded.rows as rows\n"
    "rows.SPILL_ROWS = 10\n"
    "from memsync.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


@pytest.mark.slow(reason="3,000 points of 1.5 kB: enough for the sort to spill past its cache")
@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare -m")
def test_a_full_tmpdir_after_the_swap_reports_the_swap_it_made(
    deployment: Any, cli: Any, tmp_path: Path
) -> None:
    store = deployment.memory.vector_store
    count = 3000
    ids = [f"00000000-0000-4000-8000-{n:012d}" for n in range(count)]
    text = "x" * 1500
    for start in range(0, count, 500):
        chunk = ids[start : start + 500]
        store.insert(
            vectors=[[0.01] * 384 for _ in chunk],
            ids=chunk,
            payloads=[{"data": f"{text}{i}", "user_id": "orphans", "hash": "h"} for i in chunk],
        )
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code in (0, 3), made.err  # 3: the snapshot holds errors, and is made
    assert made.json()["check"]["errors"] > 0  # orphan points: the check after runs in full
    snapshot_id = made.json()["id"]
    mount = tmp_path / "tinytmp"
    mount.mkdir()
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {mount} && "
        f"(dd if=/dev/zero of={mount}/fill bs=4k count=64 2>/dev/null; true) && "
        f"SQLITE_TMPDIR={mount} TMPDIR={mount} {sys.executable} -c '{DRIVER}' "
        f"restore {snapshot_id} --force --json --config {deployment.config}"
    )
    run = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    aside = Path(f"{deployment.paths.history_db}.pre-restore-{snapshot_id}")
    assert aside.exists()  # the swap was made
    assert run.returncode == 4, (run.returncode, run.stdout[-800:], run.stderr[-1500:])
    report = json.loads(run.stdout)
    assert report["snapshot_id"] == snapshot_id
    assert str(aside) in report["moved_aside"]
    assert report["verification"]["check_after"] == "failed" and report["check_after"] is None
    assert "temporary" in report["check_error"], report["check_error"]
    after = cli("check", "--json", config=deployment.config)  # with room again, check runs
    assert after.code == 3 and after.json()["counts"]["errors"] > 0  # the snapshot's orphans
