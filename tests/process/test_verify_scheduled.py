"""Scheduled verification on real snapshots of a real mem0 deployment, locally and in moto's S3.

Successive runs are simulated by passing ``now`` forward an interval at a time (never by
sleeping); the stored bytes are damaged behind memsync's back, on disk and in the bucket.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import boto3
import pytest

from memsync import config as config_module
from memsync.deployment import Deployment
from memsync.snapshot import verify_scheduled
from memsync.snapshot.verify_state import STATE_FILE
from memsync.stores.snapshots import id_time
from tests.conftest import s3_section

PREFIX = "memsync/verify"
CYCLE = timedelta(hours=6)
INTERVAL = timedelta(hours=1)
SCHEDULE = 'verify_cycle = "6h"\n\n[daemon]\nverify_every = "1h"\n'


@pytest.fixture
def two_sided(make_deployment, s3_endpoint, bucket, cli):
    """A deployment with four snapshots, each in the snapshot directory and in the bucket."""
    deployment = make_deployment(
        count=12, extra_config=SCHEDULE + s3_section(s3_endpoint, bucket, PREFIX)
    )
    deployment.close()
    deployment.bucket, deployment.endpoint = bucket, s3_endpoint
    deployment.ids = []
    for _ in range(4):
        made = cli("snapshot", "create", "--upload", "--json", config=deployment.config)
        assert made.code == 0, made.err
        deployment.ids.append(made.json()["id"])
    return deployment


def load(deployment):
    return config_module.load(deployment.config, dict(os.environ))


def stored_files(deployment) -> dict[str, list[str]]:
    directory = deployment.paths.root / "snapshots"
    return {
        sid: [
            f["path"] for f in json.loads((directory / sid / "manifest.json").read_text())["files"]
        ]
        for sid in deployment.ids
    }


def run_once(config, now, reads):
    report = verify_scheduled.run_scheduled(Deployment.open(config), now)
    for side in report.sides:
        for result in side.results:
            if result.ok:
                for path in result.paths:
                    reads[(side.side, result.snapshot_id, path)].append(now)
    return report


def test_slices_read_every_stored_file_on_both_sides_within_one_cycle(two_sided, cli):
    d = two_sided
    config = load(d)
    now = max(id_time(sid) for sid in d.ids) + timedelta(minutes=1)
    reads: dict[tuple[str, str, str], list[datetime]] = defaultdict(list)
    total_read = []
    for _ in range(9):
        report = run_once(config, now, reads)
        assert report.ok, report.to_json()
        assert [s.side for s in report.sides] == ["local", "remote"]
        for side in report.sides:
            newest = side.results[0]
            assert (newest.snapshot_id, newest.scope, newest.ok) == (d.ids[-1], "full", True)
            assert side.manifests == 4
        total_read.append(report.to_json()["bytes_read"])
        now += INTERVAL
    for side in ("local", "remote"):
        for sid, paths in stored_files(d).items():
            for path in paths:
                times = reads[(side, sid, path)]
                assert times, (side, sid, path)
                assert times[0] - id_time(sid) < CYCLE
                gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
                assert all(gap <= CYCLE for gap in gaps), (side, sid, path, times)
                assert now - INTERVAL - times[-1] < CYCLE
    everything = 2 * sum(
        (d.paths.root / "snapshots" / sid / p).stat().st_size
        for sid, paths in stored_files(d).items()
        for p in paths
    )
    assert min(total_read) < everything  # slices, not every byte every run
    state = json.loads((config.state_dir / STATE_FILE).read_text())
    assert len(state["sides"]) == 2 and state["last_ok_at"] is not None
    assert report.to_json()["coverage"] == {"local": 1.0, "remote": 1.0}
    listed = cli("snapshot", "list", "--remote", "--json", config=d.config).json()["snapshots"]
    assert [r["id"] for r in listed] == d.ids
    for row in listed:
        for side in ("local", "remote"):
            assert row[side]["verified"] is True and row[side]["verified_at"], row


def test_a_damaged_file_of_an_old_snapshot_is_found_by_the_run_whose_slice_reads_it(two_sided, cli):
    d = two_sided
    config = load(d)
    now = max(id_time(sid) for sid in d.ids) + timedelta(minutes=1)
    reads: dict[tuple[str, str, str], list[datetime]] = defaultdict(list)
    for _ in range(3):  # every snapshot verified once: from here on slices are single files
        assert run_once(config, now, reads).ok
        now += INTERVAL
    local_target = (d.ids[0], "history.db")
    remote_target = (d.ids[1], "qdrant/meta.json")
    damaged = d.paths.root / "snapshots" / d.ids[0] / "history.db"
    data = bytearray(damaged.read_bytes())
    data[2000] ^= 0xFF
    damaged.write_bytes(bytes(data))
    client = boto3.client("s3", endpoint_url=d.endpoint, region_name="us-east-1")
    key = f"{PREFIX}/{remote_target[0]}/{remote_target[1]}"
    client.put_object(Bucket=d.bucket, Key=key, Body=b'{"damaged": true}')
    found: dict[str, int] = {}
    for run in range(int(CYCLE / INTERVAL)):
        report = run_once(config, now, reads)
        for side in report.sides:
            if side.side in found:
                continue  # from then on the snapshot is verified completely (not verified)
            target = local_target if side.side == "local" else remote_target
            planned = any(
                item.snapshot_id == target[0] and target[1] in item.paths
                for item in side.plan.items
            )
            codes = {(r.snapshot_id, f.code, f.path) for r in side.results for f in r.findings}
            if planned:
                assert codes == {(target[0], "checksum-mismatch", _location(d, side.side, *target))}
                found[side.side] = run
            else:
                assert codes == set(), (run, side.side)  # nothing read: nothing reported
        now += INTERVAL
    assert set(found) == {"local", "remote"}  # both within one cycle of the damage
    listed = {
        r["id"]: r
        for r in cli("snapshot", "list", "--remote", "--json", config=d.config).json()["snapshots"]
    }
    assert listed[d.ids[0]]["local"]["verified"] is False
    assert listed[d.ids[0]]["remote"]["verified"] is True
    assert listed[d.ids[1]]["remote"]["verified"] is False
    assert listed[d.ids[1]]["local"]["verified"] is True
    again = verify_scheduled.run_scheduled(
        Deployment.open(config), now
    )  # found damage stays reported
    assert not again.ok
    result = cli("snapshot", "verify", "--scheduled", "--json", config=d.config)
    assert result.code == 3 and result.json()["counts"]["errors"] >= 2


def _location(d, side, snapshot_id, path):
    if side == "local":
        return str(d.paths.root / "snapshots" / snapshot_id / path)
    return f"s3://{d.bucket}/{PREFIX}/{snapshot_id}/{path}"


def test_dry_run_prints_the_plan_and_reads_or_writes_nothing(two_sided, cli):
    d = two_sided
    result = cli("snapshot", "verify", "--scheduled", "--dry-run", "--json", config=d.config)
    assert result.code == 0, result.err
    document = result.json()
    assert document["dry_run"] is True and document["bytes_read"] == 0
    for side in document["sides"]:
        newest = side["plan"][0]
        assert (newest["id"], newest["full"], newest["reason"]) == (d.ids[-1], True, "newest")
        assert side["snapshots"] == [] and side["manifests"] == 4
        assert side["budget_bytes"] == -(-side["other_bytes"] // 6) > 0  # 6h cycle / 1h runs
        assert side["planned_bytes"] < side["stored_bytes"]
    state_dir = load(d).state_dir
    assert not (state_dir / STATE_FILE).exists()
    assert not any((d.paths.root / "snapshots").glob("*/verified.json"))
    text = cli("snapshot", "verify", "--scheduled", "--dry-run", config=d.config)
    assert "would read" in text.out and d.ids[-1] in text.out


def test_scheduled_and_a_snapshot_together_is_a_usage_error(two_sided, cli):
    result = cli("snapshot", "verify", "--scheduled", two_sided.ids[0], config=two_sided.config)
    assert result.code == 2


def test_the_verify_job_records_what_status_and_the_textfile_show(make_deployment, cli, tmp_path):
    textfile = tmp_path / "memsync.prom"
    d = make_deployment(count=10, extra_config=SCHEDULE + f'textfile_path = "{textfile}"\n')
    d.close()
    ids = [cli("snapshot", "create", "--json", config=d.config).json()["id"] for _ in range(2)]
    job = cli("job", "verify", "--json", config=d.config)
    assert job.code == 0, job.err
    assert job.json()["scheduled"] is True and job.json()["bytes_read"] > 0
    status = cli("status", "--json", config=d.config)
    row = next(r for r in status.json()["jobs"] if r["job"] == "verify")
    assert row["last_outcome"] == "ok" and row["failing"] is False and row["scheduled"] is True
    assert row["summary"]["problems"] == 0 and row["summary"]["bytes_read"] > 0
    assert row["summary"]["coverage"] == {"local": 1.0}
    metrics = _metrics(textfile)
    assert metrics["memsync_verify_last_success_timestamp_seconds"] > 0
    assert metrics["memsync_verify_problems"] == 0
    assert metrics["memsync_verify_bytes_read"] == row["summary"]["bytes_read"]
    assert metrics['memsync_verify_cycle_coverage_ratio{side="local"}'] == 1.0
    assert "verified: last clean run" in cli("status", config=d.config).out
    newest = d.paths.root / "snapshots" / ids[-1] / "history.db"
    newest.write_bytes(newest.read_bytes()[:-4096])  # truncated behind memsync's back
    job = cli("job", "verify", "--json", config=d.config)
    assert job.code == 3
    status = cli("status", "--json", config=d.config)
    assert status.code == 3
    row = next(r for r in status.json()["jobs"] if r["job"] == "verify")
    assert row["failing"] is True and row["last_outcome"] == "problems"
    assert "snapshot verify --scheduled" in row["next_step"]
    later = _metrics(textfile)
    assert later["memsync_verify_problems"] >= 1
    assert later['memsync_job_failing{memsync_job="verify"}'] == 1
    assert (
        later["memsync_verify_last_success_timestamp_seconds"]
        == metrics["memsync_verify_last_success_timestamp_seconds"]
    )


def _metrics(path: Path) -> dict[str, float]:
    return {
        name: float(value)
        for line in path.read_text().splitlines()
        if line and not line.startswith("#")
        for name, value in [line.rsplit(" ", 1)]
    }


def test_every_manifest_is_checked_and_an_unfinished_upload_is_only_listed(two_sided):
    d = two_sided
    config = load(d)
    (d.paths.root / "snapshots" / d.ids[1] / "manifest.json").unlink()  # behind memsync's back
    client = boto3.client("s3", endpoint_url=d.endpoint, region_name="us-east-1")
    client.delete_object(Bucket=d.bucket, Key=f"{PREFIX}/{d.ids[2]}/manifest.json")
    now = max(id_time(sid) for sid in d.ids) + timedelta(minutes=1)
    report = verify_scheduled.run_scheduled(Deployment.open(config), now)
    local, remote = report.sides
    assert local.damaged_manifests == (d.ids[1],) and local.incomplete == ()
    assert local.manifests == 4
    codes = {(r.snapshot_id, r.scope, f.code) for r in local.results for f in r.findings}
    assert codes == {(d.ids[1], "manifest", "manifest-missing")}
    assert remote.incomplete == (d.ids[2],) and remote.errors == 0 and remote.manifests == 3
    assert d.ids[2] not in {item.snapshot_id for item in remote.plan.items}
    assert not report.ok
    verdict = json.loads((d.paths.root / "snapshots" / d.ids[1] / "verified.json").read_text())
    assert verdict["ok"] is False and verdict["codes"] == ["manifest-missing"]
