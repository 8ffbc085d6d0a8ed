"""reconcile reads remote snapshots into a scratch area it removes, never into the snapshot directory.

A bucket of several remote-only snapshots; a lost point one of them holds and one none holds
(added after all of them). reconcile downloads only the two files of the one snapshot that can
hold the first, reads the others' manifests only, says so, and leaves the snapshot directory and
the work directory as they were, also when the bucket's copy turns out damaged.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import boto3

from memsync.config import load
from memsync.demo import deployment as build
from tests.conftest import s3_section

COLLECTION_FILE = "qdrant/collection/mem0/storage.sqlite"


def tree(directory: Path) -> dict[str, int]:
    """Every file under ``directory`` with its size."""
    return {
        str(p.relative_to(directory)): p.stat().st_size for p in directory.rglob("*") if p.is_file()
    }


def remote_only_snapshots(make_deployment, cli, s3_endpoint, bucket, count: int):
    """A deployment whose ``count`` snapshots are in the bucket only (the local copies removed)."""
    deployment = make_deployment(  # margin 0: a memory stamped after the copies is not in them
        count=20, extra_config=s3_section(s3_endpoint, bucket), in_flight_margin_s=0.0
    )
    deployment.close()
    made = []
    for _ in range(count):
        made.append(
            cli("snapshot", "create", "--upload", "--json", config=deployment.config).json()
        )
    snapshots = deployment.paths.root / "snapshots"
    for snapshot in made:
        shutil.rmtree(snapshots / snapshot["id"])
    return deployment, [snapshot["id"] for snapshot in made], snapshots


def test_applied_reconcile_fetches_only_what_can_hold_the_memory_and_leaves_no_download(
    make_deployment, cli, s3_endpoint, bucket
):
    deployment, made, snapshots = remote_only_snapshots(
        make_deployment, cli, s3_endpoint, bucket, 3
    )
    (snapshots / "notes.txt").write_text("the operator's own file\n")  # the directory is not empty
    work_dir = load(deployment.config, os.environ).work_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    memory = deployment.reopen()
    held = build.delete_with_failing_history(memory, deployment.paths, deployment.seeded.live[0])
    late = memory.add("a fact no snapshot saw", user_id="alice", infer=False)["results"][0]["id"]
    build.delete_with_failing_history(memory, deployment.paths, late)
    deployment.close()
    snapshots_before, work_before = tree(snapshots), sorted(os.listdir(work_dir))

    result = cli("reconcile", "--json", "--no-snapshot", config=deployment.config)
    outcome = json.loads(result.out)

    assert tree(snapshots) == snapshots_before  # nothing downloaded into the snapshot directory
    assert sorted(os.listdir(work_dir)) == work_before  # the scratch area is gone
    by_id = {a["memory_id"]: a for a in outcome["actions"]}
    assert by_id[held]["kind"] == "restore-point" and by_id[held]["status"] == "done"
    assert by_id[late]["kind"] != "restore-point"
    newest, *older = sorted(made, reverse=True)
    read = outcome["read"]
    assert [r["snapshot"] for r in read] == [newest, *older]
    assert read[0]["side"] == "remote" and read[0]["skipped"] is None
    assert read[0]["files"] == ["history.db", COLLECTION_FILE]  # not the entity collection
    assert all(r["skipped"] and r["files"] == [] and r["fetched_bytes"] == 0 for r in read[1:])
    assert outcome["fetched_bytes"] == read[0]["fetched_bytes"] > 0
    listed = cli("snapshot", "list", "--remote", "--json", config=deployment.config).json()
    sizes = {row["id"]: row["size_bytes"] for row in listed["snapshots"]}
    assert outcome["fetched_bytes"] < sizes[newest]  # two files, not the whole snapshot
    assert held in {p for p in build.point_ids(deployment.reopen())}
    deployment.close()

    again = cli("reconcile", "--no-snapshot", config=deployment.config)  # only `late` is left
    assert (
        "snapshots read for lost points: none (3 skipped by their manifest or unreadable); "
        "0 bytes fetched" in again.out
    ), again.out
    assert tree(snapshots) == snapshots_before


def test_a_damaged_remote_copy_fails_reconcile_and_still_leaves_no_download(
    make_deployment, cli, s3_endpoint, bucket
):
    deployment, made, snapshots = remote_only_snapshots(
        make_deployment, cli, s3_endpoint, bucket, 2
    )
    work_dir = load(deployment.config, os.environ).work_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    memory = deployment.reopen()
    build.delete_with_failing_history(memory, deployment.paths, deployment.seeded.live[0])
    deployment.close()
    newest = max(made)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    key = f"memsync/test/{newest}/{COLLECTION_FILE}"
    client.put_object(Bucket=bucket, Key=key, Body=b"not the snapshot's bytes")
    snapshots_before, work_before = tree(snapshots), sorted(os.listdir(work_dir))
    stale = work_dir / "reconcile-read-999999999-left"  # a SIGKILLed reconcile's (no such pid)
    (stale / newest).mkdir(parents=True)
    (stale / newest / "history.db").write_bytes(b"x" * 1000)

    result = cli("reconcile", "--json", "--no-snapshot", config=deployment.config)

    assert not stale.exists()  # a killed run's scratch directory is removed by the next
    assert result.code == 11, result.out + result.err
    assert f"snapshot {newest}: {COLLECTION_FILE}" in result.err  # one line: what, where
    assert tree(snapshots) == snapshots_before
    assert sorted(os.listdir(work_dir)) == work_before
