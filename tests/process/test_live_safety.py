"""check and doctor on a deployment that a separate process is writing to through mem0."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import error_findings

ROOT = Path(__file__).resolve().parents[2]
WRITE_SECONDS = 20


@pytest.mark.slow(
    reason="a 20 s soak: check and doctor back to back while a real app writes through mem0"
)
@pytest.mark.parametrize("journal", ["rollback", "wal"])
def test_check_and_doctor_during_continuous_writes_fail_no_write_and_cry_no_wolf(
    make_deployment, cli, journal
):
    """In WAL mode check reads the live files in place (one read snapshot each, held while it
    judges); doctor still copies them. Neither may fail a write of the app's."""
    deployment = make_deployment(count=300)
    deployment.close()  # the app (another process) owns the store from here on
    if journal == "wal":
        assert cli("tune", "--wal", config=deployment.config).code == 0
    writer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.helpers.live_writer",
            str(deployment.paths.root),
            "stdin",  # writes until this test closes its stdin
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert writer.stdout.readline().strip() == "ready"
    runs = 0
    infos = 0
    deadline = time.monotonic() + WRITE_SECONDS
    while time.monotonic() < deadline or runs < 3:  # a loaded machine takes longer, not fewer
        result = cli("check", "--json", config=deployment.config)
        report = result.json()
        assert result.code == 0, error_findings(report)
        infos += report["counts"]["infos"]
        doctor = cli("doctor", "--json", config=deployment.config)
        assert doctor.code == 0, [r for r in doctor.json()["results"] if r["status"] == "error"]
        runs += 1
    out, _ = writer.communicate(input="", timeout=60)
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["failures"] == 0, stats["errors"][:5]
    assert stats["writes"] > 50 and runs >= 3
    final = cli("check", "--json", config=deployment.config)
    assert final.code == 0 and final.json()["counts"]["infos"] == 0
