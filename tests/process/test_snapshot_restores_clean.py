"""A snapshot is good only if it restores clean (issue 11, point 3).

Real mem0 deployments, real snapshot directories, a live app writing through mem0 from another
process (tests/helpers/live_writer.py), real restores into an empty deployment.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import IN_FLIGHT_MARGIN_S

ROOT = Path(__file__).resolve().parents[2]


def _orphan_one_memory(deployment) -> str:
    """Delete every history row of one live memory by hand: its point becomes an orphan."""
    victim = sorted(deployment.seeded.live)[0]
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)  # the seed's writes out of the margin: an error
    with sqlite3.connect(deployment.paths.history_db) as db:
        db.execute("DELETE FROM history WHERE memory_id = ?", (victim,))
    db.close()
    return victim


def test_create_on_a_damaged_pair_exits_3_keeps_it_and_retention_keeps_the_clean_one(
    deployment, cli
):
    deployment.close()
    clean = cli("snapshot", "create", "--json", config=deployment.config)
    assert clean.code == 0, clean.err
    clean_id = clean.json()["id"]
    assert cli("snapshot", "verify", clean_id, config=deployment.config).code == 0
    time.sleep(1.05)  # a fresh second-resolution id
    _orphan_one_memory(deployment)
    damaged = cli("snapshot", "create", "--json", config=deployment.config)
    assert damaged.code == 3, damaged.err
    report = damaged.json()
    assert report["check"]["errors"] == 1
    base = deployment.paths.root / "snapshots"
    assert (base / report["id"] / "manifest.json").is_file()
    listed = cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    assert report["id"] in [row["id"] for row in listed]
    # A verification recorded as ok (as a memsync before this change wrote one for a pair whose
    # writes were in flight) must not make retention protect it over the older clean one.
    (base / report["id"] / "verified.json").write_text(json.dumps({"ok": True}))
    text = deployment.config.read_text().replace("keep_last = 3", "keep_last = 1")
    deployment.config.write_text(text)
    dry = cli("snapshot", "prune", "--dry-run", "--json", config=deployment.config).json()
    decisions = {d["id"]: d for d in dry["decisions"]}
    assert decisions[clean_id]["action"] == "keep", decisions
    assert "newest verified" in decisions[clean_id]["reasons"]
    assert "newest verified" not in decisions[report["id"]]["reasons"]


def test_verify_reports_a_pair_with_errors_as_one_that_would_not_restore_clean(deployment, cli):
    deployment.close()
    victim = _orphan_one_memory(deployment)
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 3
    # the report names the finding, not only its count (JSON and text)
    listed = made.json()["check"]["error_findings"]
    assert [(f["code"], f["memory_id"]) for f in listed] == [("orphan-point", victim)]
    time.sleep(1.05)  # a fresh second-resolution id
    text = cli("snapshot", "create", config=deployment.config)
    assert text.code == 3 and f"ERROR orphan-point {victim}: " in text.out, text.out
    verdict = cli("snapshot", "verify", "--json", made.json()["id"], config=deployment.config)
    assert verdict.code == 3
    findings = verdict.json()["findings"]
    codes = {f["code"] for f in findings}
    assert "restore-unclean" in codes and "orphan-point" in codes
    assert [f["memory_id"] for f in findings if f["code"] == "orphan-point"] == [victim]


@pytest.mark.slow(
    reason="snapshots while a real app writes, then restores each into a fresh deployment and checks it"
)
def test_snapshots_taken_while_the_app_writes_restore_clean_or_list_what_is_unsettled(
    make_deployment, cli
):
    deployment = make_deployment(count=200)
    deployment.close()
    fresh = make_deployment(count=0, name="fresh")
    fresh.close()
    snapshots = deployment.paths.root / "snapshots"
    fresh.config.write_text(
        fresh.config.read_text().replace(
            f'directory = "{fresh.paths.root / "snapshots"}"', f'directory = "{snapshots}"'
        )
    )
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.live_writer", str(deployment.paths.root), "12"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert writer.stdout.readline().strip() == "ready"
    made = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        result = cli("snapshot", "create", "--json", config=deployment.config)
        assert result.code == 0, result.err
        made.append(result.json()["id"])
        time.sleep(0.5)
    out, _ = writer.communicate(timeout=60)
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["failures"] == 0 and stats["writes"] > 50 and len(made) >= 3
    restored = 0
    for snapshot_id in made:
        manifest = json.loads((snapshots / snapshot_id / "manifest.json").read_text())
        unsettled = manifest["check"].get("unsettled", [])
        verdict = cli("snapshot", "verify", "--json", snapshot_id, config=deployment.config)
        codes = {f["code"] for f in verdict.json()["findings"]}
        if unsettled:
            in_flight = {f.get("memory_id") for f in manifest["check"]["findings"]}
            assert set(unsettled) <= in_flight and "restore-unclean" in codes
            continue
        assert verdict.code == 0 and "in-flight" not in codes, codes
        done = cli("restore", "--force", "--json", snapshot_id, config=fresh.config)
        assert done.code == 0, done.err
        checked = cli("check", "--json", config=fresh.config)
        assert checked.json()["counts"]["errors"] == 0, checked.json()["findings"][:5]
        restored += 1
    assert restored >= 1
