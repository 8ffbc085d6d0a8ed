"""A memsync killed with SIGKILL leaves its scratch copy (a snapshot's plaintext) in work_dir;
the next run of the same kind removes it.

The leftovers are named as a killed run leaves them (``<prefix>-<pid>-*``, the pid of a process
that cannot exist: above the kernel's largest pid).
"""

from __future__ import annotations

import os
from pathlib import Path

from memsync import config

DEAD_PID = 2**22 + 1  # pid_max is at most 2**22: no process has this pid


def work_dir(deployment) -> Path:
    return config.load(deployment.config, os.environ).work_dir


def leftover(directory: Path, prefix: str) -> Path:
    path = directory / f"{prefix}-{DEAD_PID}-abcd1234"
    path.mkdir(parents=True)
    (path / "history.db").write_text("a killed run's plaintext copy")
    return path


def test_verify_and_restore_to_remove_what_a_killed_run_left(deployment, cli, tmp_path):
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    directory = work_dir(deployment)
    stale = [leftover(directory, p) for p in ("verify", "verify-plain", "verify-slice")]
    verified = cli("snapshot", "verify", made.json()["id"], config=deployment.config)
    assert verified.code == 0, verified.err
    assert not stale[0].exists()  # verify-plain: by the next verify of a sealed snapshot
    stale_to = leftover(directory, "restore-to")
    copied = cli(
        "restore", made.json()["id"], "--to", str(tmp_path / "copy"), config=deployment.config
    )
    assert copied.code == 0, copied.err
    assert not stale_to.exists()
    left = {p.name for p in directory.iterdir() if p.name.startswith(("verify", "restore-to"))}
    assert left == {stale[1].name, stale[2].name}  # each removed by the next run of its kind
