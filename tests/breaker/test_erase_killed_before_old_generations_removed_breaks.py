"""Breaker: ``forget --erase`` (no daemon) SIGKILLed once the new generation is on the replica.

Without a daemon, the erasure runs a ``litestream replicate`` of its own for the new
generation, then removes the older generations (``erase.replicas._remove``) and stops it.
Killed at ``_remove``, that Litestream outlives it, recorded nowhere memsync looks
(``protect-state.json``), holding a read transaction on every file; the older generations,
which hold the erased text, stay on the replica.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.breaker.pauseat import ROOT
from tests.helpers import litestream
from tests.process.test_protect import state_dir
from tests.process.test_protect_erase import MARKER, decompressed_hits, replicated_once


def litestreams_of(config_file: Path) -> list[int]:
    """The pids of Litestream processes replicating with ``config_file`` (by /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"replicate" in argv and str(config_file).encode() in argv:
                found.append(int(entry.name))
    return found


@pytest.mark.slow(reason="Litestream's first shipments, an erasure killed, the erasure again")
@pytest.mark.xfail(
    strict=True,
    reason="forget --erase SIGKILLed at _remove (new generation shipped, old ones not yet "
    "removed): the Litestream it started keeps running, unrecorded; running the same "
    "forget --erase again (what the docs say) exits 4 ('busy: another connection kept "
    "history.db-wal', live files not verified, older generations kept) and the erased text "
    "stays on the replica; the retry should stop or adopt that Litestream and finish",
)
def test_an_erasure_killed_before_removing_the_old_generations_is_finished_by_running_it_again(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, target, replica = replicated_once(
        make_deployment, tmp_path, cli, litestream.ensure()
    )
    config_file = state_dir(deployment) / "litestream.yml"
    try:
        killed = subprocess.run(
            [sys.executable, "-m", "tests.breaker.killat", "memsync.erase.replicas:_remove",
             "--", "forget", target, "--erase", "--yes", "--config", str(deployment.config)],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert killed.returncode == -signal.SIGKILL, killed.stderr

        again = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)

        hits = decompressed_hits(replica, MARKER.encode())
        assert again.code == 0, (again.code, again.json()["replicas"]["problem"], hits)
        assert hits == []
    finally:
        for pid in litestreams_of(config_file):  # the orphan this test's kill left
            os.kill(pid, signal.SIGTERM)
