"""reconcile SIGKILLed while it puts points back from a remote-only snapshot: the next run
removes the dead run's scratch directory, reads the point again from the bucket (the
collection's file only) and finishes, leaving nothing in the snapshot or work directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from memsync.config import load
from memsync.demo import deployment as build
from tests.conftest import s3_section
from tests.process.test_reconcile import clean, live_texts
from tests.process.test_reconcile_reads import tree

ROOT = Path(__file__).resolve().parents[2]


def test_reconcile_killed_between_two_remote_restores_is_finished_by_the_next_run(
    make_deployment: Any, cli: Any, s3_endpoint: str, bucket: str
) -> None:
    deployment = make_deployment(count=20, extra_config=s3_section(s3_endpoint, bucket))
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config).json()
    snapshots = deployment.paths.root / "snapshots"
    shutil.rmtree(snapshots / made["id"])  # only the bucket has it
    memory = deployment.reopen()
    lost = [
        build.delete_with_failing_history(memory, deployment.paths, memory_id)
        for memory_id in deployment.seeded.live[:2]
    ]
    deployment.close()
    work_dir = load(deployment.config, os.environ).work_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    snapshots_before, work_before = tree(snapshots), sorted(os.listdir(work_dir))

    killed = subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat", "memsync.reconcile.apply:apply_action",
         "--nth", "2", "--", "reconcile", "--no-snapshot", "--config", str(deployment.config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    assert [p.name for p in work_dir.glob("reconcile-read-*")]  # SIGKILL: its scratch stays

    resumed = cli("reconcile", "--json", "--no-snapshot", config=deployment.config)

    assert resumed.code == 0, resumed.out + resumed.err
    assert resumed.json()["resumed"] is True
    assert set(lost) <= set(live_texts(deployment))
    clean(cli, deployment)
    assert tree(snapshots) == snapshots_before
    assert sorted(os.listdir(work_dir)) == work_before
