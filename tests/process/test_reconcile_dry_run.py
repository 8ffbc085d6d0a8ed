"""``reconcile --dry-run`` downloads nothing: remote-only snapshots are listed, never fetched."""

from __future__ import annotations

import json
import shutil

from memsync.demo import deployment as build
from tests.conftest import s3_section


def test_dry_run_never_downloads_a_remote_snapshot_and_says_it_is_checked_when_applied(
    make_deployment, cli, s3_endpoint, bucket
):
    deployment = make_deployment(count=20, extra_config=s3_section(s3_endpoint, bucket))
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config).json()
    snapshots = deployment.paths.root / "snapshots"
    shutil.rmtree(snapshots / made["id"])  # only the bucket has it now
    memory = deployment.reopen()
    victim = build.delete_with_failing_history(memory, deployment.paths, deployment.seeded.live[0])
    deployment.close()
    before = sorted(p.name for p in snapshots.iterdir())

    result = cli("reconcile", "--dry-run", "--json", config=deployment.config)
    plan = json.loads(result.out)
    assert sorted(p.name for p in snapshots.iterdir()) == before  # nothing fetched, no .partial
    [action] = [a for a in plan["actions"] if a["memory_id"] == victim]
    assert action["kind"] != "restore-point"
    assert (
        f"remote snapshot {made['id']}" in action["why"]
        and "when the plan is applied" in action["why"]
    )

    applied = cli("reconcile", "--json", "--no-snapshot", config=deployment.config)
    assert applied.code == 0, applied.out
    assert [a["kind"] for a in json.loads(applied.out)["actions"]] == ["restore-point"]
