"""Retention ages safety snapshots out on their own schedule (``[snapshot] keep_safety_days``).

Real captures of a real mem0 deployment, made at chosen times (the ``now`` create_snapshot
takes); the safety ones through the same call reconcile and forget make (``by=...``).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

from memsync import config as memsync_config
from memsync import snapshot
from memsync.deployment import Deployment

NOW = datetime.now(UTC).replace(microsecond=0)


def made(deployment, days_ago: float, by: str | None = None) -> str:
    loaded = memsync_config.load(deployment.config, os.environ)
    return snapshot.create_snapshot(
        Deployment.open(loaded), NOW - timedelta(days=days_ago), by=by
    ).id


def decisions(cli, deployment, *extra: str) -> dict[str, dict]:
    result = cli("snapshot", "prune", "--json", *extra, config=deployment.config)
    assert result.code == 0, result.err
    return {d["id"]: d for d in result.json()["decisions"]}


def test_an_old_safety_snapshot_is_removed_by_its_own_schedule_and_ordinary_ones_are_kept(
    make_deployment, cli
):
    deployment = make_deployment(count=8)
    deployment.close()
    text = deployment.config.read_text().replace("keep_last = 3", "keep_last = 2")
    deployment.config.write_text(text)
    oldest, older, newest = made(deployment, 20), made(deployment, 10), made(deployment, 1)
    old_safety = made(deployment, 9, by="reconcile")
    young_safety = made(deployment, 2, by="forget")
    manifest = deployment.paths.root / "snapshots" / old_safety / "manifest.json"
    assert json.loads(manifest.read_text())["label"] == {"kind": "safety", "by": "reconcile"}
    planned = decisions(cli, deployment, "--dry-run")
    # the safety snapshots take no keep_last place: the two newest ordinary ones keep theirs
    assert planned[newest]["reasons"] == ["keep-last 1"]
    assert planned[older]["reasons"] == ["keep-last 2"] and planned[older]["keep"]
    assert planned[young_safety]["keep"] and planned[young_safety]["reasons"] == ["keep-safety 7d"]
    assert not planned[old_safety]["keep"]
    assert planned[old_safety]["reasons"] == ["safety snapshot older than keep_safety_days"]
    assert not planned[oldest]["keep"]
    pruned = decisions(cli, deployment, "--yes")
    assert pruned == planned
    left = {p.name for p in (deployment.paths.root / "snapshots").iterdir()}
    assert left == {newest, older, young_safety}
    # the setting moves the schedule: a day keeps none of them
    deployment.config.write_text(
        deployment.config.read_text().replace(
            "keep_last = 2", "keep_last = 2\nkeep_safety_days = 1"
        )
    )
    again = decisions(cli, deployment, "--yes")
    assert not again[young_safety]["keep"] and again[older]["keep"] and again[newest]["keep"]
    assert {p.name for p in (deployment.paths.root / "snapshots").iterdir()} == {newest, older}
