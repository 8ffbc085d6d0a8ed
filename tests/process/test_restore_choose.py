"""restore latest, restore --before TIME, restore --to DIR: the snapshot chosen, the copy apart."""

from __future__ import annotations

import json
import time
from datetime import timedelta

from memsync.demo import deployment as build
from memsync.stores.snapshots import id_time
from tests.conftest import HASH, s3_section
from tests.helpers.holders import app_holding
from tests.process.test_cli import fingerprint, run_memsync


def snapshot(cli, deployment, *flags: str, verify: bool = True) -> str:
    deployment.close()
    made = cli("snapshot", "create", "--json", *flags, config=deployment.config)
    assert made.code == 0, made.err
    snapshot_id = made.json()["id"]
    if verify:
        assert cli("snapshot", "verify", snapshot_id, config=deployment.config).code == 0
    time.sleep(1.1)  # snapshot ids have one-second resolution
    return snapshot_id


def add(deployment, text: str) -> str:
    memory = deployment.reopen()
    memory_id = memory.add(text, user_id="ana", infer=False)["results"][0]["id"]
    deployment.close()
    return memory_id


def test_restore_latest_takes_the_newest_verified_snapshot(deployment, cli):
    older = snapshot(cli, deployment)
    newer_memory = add(deployment, "written between the snapshots")
    newer = snapshot(cli, deployment, verify=False)
    latest = cli("restore", "latest", "--force", "--dry-run", "--json", config=deployment.config)
    assert latest.code == 0, latest.err
    assert latest.json()["snapshot_id"] == older  # the newer one was never verified
    assert latest.json()["chosen"] == {
        "by": "latest",
        "before": None,
        "where": "local",
        "snapshot_id": older,
        "passed_over": [newer],
    }
    said = cli("restore", "latest", "--force", "--dry-run", config=deployment.config)
    assert (
        f"passed over 1 newer snapshot(s) with no passing verification: {newer} -> memsync "
        f"snapshot verify {newer} records one"
    ) in said.out, said.out
    assert cli("snapshot", "verify", newer, config=deployment.config).code == 0
    result = cli("restore", "latest", "--force", "--json", config=deployment.config)
    assert result.code == 0, result.err
    assert result.json()["snapshot_id"] == newer and result.json()["check_after"]["errors"] == 0
    memory = deployment.reopen()
    assert memory.get(newer_memory) is not None
    deployment.close()


def test_with_nothing_verified_the_hint_names_a_snapshot_latest_can_take_not_a_safety_one(
    deployment, cli
):
    ordinary = snapshot(cli, deployment, verify=False)
    memory_id = add(deployment, "forgotten after the snapshot")
    forgot = cli("forget", memory_id, "--yes", "--json", config=deployment.config)
    assert forgot.code == 0, forgot.err  # it takes a safety snapshot first, newer, unverified
    listed = cli("snapshot", "list", "--json", config=deployment.config).json()
    assert any(s["id"] != ordinary for s in listed["snapshots"]), listed
    refused = cli("restore", "latest", "--force", config=deployment.config)
    assert refused.code == 11, refused.err
    assert f"memsync snapshot verify {ordinary} " in refused.err, refused.err


def test_restore_before_a_time_with_z_or_an_offset_and_from_the_bucket(
    make_deployment, cli, s3_endpoint, bucket
):
    deployment = make_deployment(count=20, extra_config=s3_section(s3_endpoint, bucket))
    first = snapshot(cli, deployment, "--upload", verify=False)
    remote = f"s3://{bucket}/memsync/test/{first}"
    assert cli("snapshot", "verify", remote, config=deployment.config).code == 0
    later_memory = add(deployment, "written after the first snapshot")
    second = snapshot(cli, deployment)
    cut = id_time(second)
    offset = (cut + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S+01:00")
    chose = cli("restore", "--before", offset, "--dry-run", "--json", config=deployment.config)
    assert chose.code == 0, chose.err
    # only the bucket's copy of the first snapshot is verified: it is read from there
    assert chose.json()["chosen"] == {
        "by": "before",
        "before": cut.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "where": "remote",
        "snapshot_id": first,
        "passed_over": [],  # the local copy of the same snapshot is not newer
    }
    zulu = (cut + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (
        cli("restore", "--before", zulu, "--dry-run", "--json", config=deployment.config).json()[
            "snapshot_id"
        ]
        == second
    )
    result = cli("restore", "--before", offset, "--force", "--json", config=deployment.config)
    assert result.code == 0 and result.json()["check_after"]["errors"] == 0
    memory = deployment.reopen()
    assert memory.get(later_memory) is None  # the state before the second snapshot
    deployment.close()

    for bad, why in (("2026-11-30T12:00", "no Z or UTC offset"), ("noon", "not an ISO 8601")):
        refused = cli("restore", "--before", bad, "--force", config=deployment.config)
        assert refused.code == 2 and why in refused.err
    too_early = (id_time(first) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%MZ")
    none = cli("restore", "--before", too_early, "--force", "--json", config=deployment.config)
    assert none.code == 11 and "passed verification" in json.loads(none.err)["message"]
    both = cli("restore", first, "--before", zulu, config=deployment.config)
    assert both.code == 2 and "--before chooses" in both.err


def test_restore_to_a_new_directory_never_touches_the_live_deployment(deployment, cli, tmp_path):
    snapshot_id = snapshot(cli, deployment)
    held = list(deployment.seeded.live)
    after_snapshot = add(deployment, "written after the snapshot")
    live = fingerprint(deployment.paths.root)
    copy = tmp_path / "inspect"
    with app_holding(deployment.paths.qdrant):  # the app keeps running: no lock is needed
        dry = cli(
            "restore", "latest", "--to", str(copy), "--dry-run", "--json", config=deployment.config
        )
        assert dry.code == 0 and not copy.exists()
        done = run_memsync(
            "restore", "latest", "--to", str(copy), "--json", "--config", str(deployment.config)
        )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["snapshot_id"] == snapshot_id and document["check_after"]["errors"] == 0
    assert document["mem0"]["vector_store"]["config"]["path"] == str(copy / "qdrant")
    assert document["mem0"]["history_db_path"] == str(copy / "mem0" / "history.db")
    assert fingerprint(deployment.paths.root) == live  # byte-identical

    memory = build.open_memory(build.Paths(copy), embedder=HASH)  # mem0 opens the copy
    try:
        assert all(memory.get(memory_id) is not None for memory_id in held)
        assert memory.get(after_snapshot) is None
    finally:
        build.close_memory(memory)
    check = run_memsync("check", "--json", "--config", document["config"])
    assert check.returncode == 0 and json.loads(check.stdout)["counts"]["points"] == len(held)
    assert json.loads((copy / "mem0-config.json").read_text())["vector_store"]["config"][
        "path"
    ] == str(copy / "qdrant")

    again = cli("restore", snapshot_id, "--to", str(copy), config=deployment.config)
    assert again.code == 2 and "not empty" in again.err
    inside = cli(
        "restore", snapshot_id, "--to", str(deployment.paths.qdrant / "x"), config=deployment.config
    )
    assert inside.code == 2 and "live deployment" in inside.err
    assert fingerprint(deployment.paths.root) == live


def test_a_dry_run_names_the_aside_paths_the_real_restore_takes(deployment, cli):
    snapshot_id = snapshot(cli, deployment)
    taken = deployment.paths.history_db.with_name(f"history.db.pre-restore-{snapshot_id}")
    taken.write_bytes(b"an earlier restore's copy, kept")
    dry = cli("restore", snapshot_id, "--force", "--dry-run", "--json", config=deployment.config)
    assert dry.code == 0, dry.err
    planned = {m["live"]: m["aside"] for m in dry.json()["moves"]}
    assert planned[str(deployment.paths.history_db)] == f"{taken}-1"
    done = cli("restore", snapshot_id, "--force", "--json", config=deployment.config)
    assert done.code == 0, done.err
    assert {m["live"]: m["aside"] for m in done.json()["moves"]} == planned
    assert taken.read_bytes() == b"an earlier restore's copy, kept"
