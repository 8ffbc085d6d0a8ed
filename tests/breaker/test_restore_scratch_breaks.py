"""restore from the bucket after a lost disk, SIGKILLed once the snapshot is downloaded: the
next restore removes the dead run's download from work_dir and finishes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from memsync.config import load
from tests.conftest import s3_section

ROOT = Path(__file__).resolve().parents[2]


def test_restore_killed_after_its_download_leaves_nothing_once_rerun(
    make_deployment: Any, cli: Any, s3_endpoint: str, bucket: str
) -> None:
    deployment = make_deployment(count=10, extra_config=s3_section(s3_endpoint, bucket))
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config).json()
    shutil.rmtree(deployment.paths.root / "snapshots" / made["id"])  # only the bucket has it
    shutil.rmtree(deployment.paths.qdrant)
    deployment.paths.history_db.unlink()
    work_dir = load(deployment.config, os.environ).work_dir
    target = f"s3://{made['id']}"  # in the configured bucket

    killed = subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat", "memsync.restore:has_data",
         "--", "restore", target, "--config", str(deployment.config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert list(work_dir.glob("restore-*"))  # SIGKILL: the downloaded snapshot stays

    restored = cli("restore", target, config=deployment.config)
    assert restored.code == 0, restored.out + restored.err + target
    assert not list(work_dir.glob("restore-*"))  # the dead run's download removed
