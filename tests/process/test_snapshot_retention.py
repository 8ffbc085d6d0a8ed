"""One retention over the snapshot directory and a bucket (moto's S3 server on 127.0.0.1).

Snapshots are real captures of a real mem0 deployment, made at chosen times (the ``now``
create_snapshot takes) and uploaded through memsync; the bucket's other contents (a killed
upload's objects and multipart parts) are made with boto3 directly, as a killed writer leaves them.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from memsync import config as memsync_config
from memsync import snapshot
from memsync.deployment import Deployment
from memsync.repository import LocalRepository
from tests.conftest import s3_section

PREFIX = "memsync/ret"
NOW = datetime.now(UTC).replace(microsecond=0)


def sid(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%SZ")


def remote_deployment(make_deployment, endpoint: str, bucket: str, prefix: str, count: int):
    """A closed deployment with ``keep_last = 1`` and ``[s3]``, its bucket client and config."""
    deployment = make_deployment(count=count, extra_config=s3_section(endpoint, bucket, prefix))
    deployment.close()
    text = deployment.config.read_text().replace("keep_last = 3", "keep_last = 1")
    deployment.config.write_text(text)
    deployment.bucket = bucket
    deployment.client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    deployment.loaded = memsync_config.load(deployment.config, os.environ)
    return deployment


@pytest.fixture
def remote(make_deployment, s3_endpoint, bucket):
    return remote_deployment(make_deployment, s3_endpoint, bucket, PREFIX, 12)


def make(d, days_ago: float, *, upload: bool = True, local: bool = True) -> str:
    """A real snapshot taken as if ``days_ago`` days before now, on the sides asked for."""
    created = snapshot.create_snapshot(Deployment.open(d.loaded), NOW - timedelta(days=days_ago))
    if upload:
        snapshot.upload_snapshot(d.loaded, created.path)
    if not local:
        LocalRepository(created.path.parent).delete(created.id)
    return created.id


def remote_ids(d) -> set[str]:
    listed = d.client.list_objects_v2(Bucket=d.bucket, Prefix=PREFIX + "/").get("Contents", [])
    return {item["Key"].split("/")[2] for item in listed}


def local_ids(d) -> set[str]:
    return {p.name for p in (d.paths.root / "snapshots").iterdir()}


def decisions(result) -> dict[str, dict]:
    return {x["id"]: x for x in result.json()["decisions"]}


def test_one_decision_over_both_sides_with_reasons_pins_and_unpin(remote, cli):
    d = remote
    oldest = make(d, 20)
    verified = make(d, 10)
    pinned = make(d, 5)
    local_only = make(d, 2, upload=False)
    newest = make(d, 0.05, local=False)
    # verified in the bucket only: still the newest verified snapshot for both sides
    assert cli("snapshot", "verify", f"s3://{verified}", config=d.config).code == 0
    pin = cli(
        "snapshot", "pin", pinned, "--reason", "before the migration", "--json", config=d.config
    )
    assert pin.code == 0, pin.err
    assert pin.json()["sides"] == ["local", "remote"] and pin.json()["pin"]["by"] == "operator"
    listed = cli("snapshot", "list", "--remote", "--json", config=d.config).json()["snapshots"]
    assert {row["id"]: bool(row["pin"]) for row in listed} == {
        oldest: False,
        verified: False,
        pinned: True,
        local_only: False,
        newest: False,
    }
    text = cli("snapshot", "list", "--remote", config=d.config).out
    assert [line.endswith(" pinned") for line in text.splitlines()[1:]].count(True) == 1

    dry = cli("snapshot", "prune", "--dry-run", "--json", config=d.config)
    assert dry.code == 0, dry.err
    plan = decisions(dry)
    assert plan[newest] == {
        "id": newest,
        "sides": ["remote"],
        "keep": True,
        "action": "keep",
        "reasons": ["keep-last 1"],
        "remove_from": [],
    }
    assert plan[verified]["reasons"] == ["newest verified"]
    assert plan[verified]["sides"] == ["local", "remote"]
    assert plan[pinned]["reasons"] == ["pinned (operator: before the migration)"]
    assert plan[local_only]["remove_from"] == ["local"]
    assert plan[oldest]["remove_from"] == ["local", "remote"]
    assert {plan[i]["reasons"][0] for i in (local_only, oldest)} == {"no rule keeps it"}
    assert dry.json()["removed"] == [] and oldest in local_ids(d) | remote_ids(d)

    lines = cli("snapshot", "prune", "--dry-run", config=d.config).out.splitlines()
    assert lines[-1].endswith("keep 3, would remove 2")
    assert any(
        line.split()[:3] == ["REMOVE", oldest, "local+remote"] and "no rule keeps it" in line
        for line in lines
    )
    assert any(line.split()[:3] == ["KEEP", pinned, "local+remote"] for line in lines)

    done = cli("snapshot", "prune", "--yes", "--json", config=d.config)
    assert done.code == 0, done.err
    assert sorted(done.json()["removed"]) == sorted([oldest, local_only])
    assert local_ids(d) == {verified, pinned}
    assert remote_ids(d) == {verified, pinned, newest}

    unpin = cli("snapshot", "unpin", pinned, "--json", config=d.config)
    assert unpin.code == 0 and unpin.json()["was_pinned"] == {"local": True, "remote": True}
    job = cli("job", "retention", "--json", config=d.config)  # the daemon's job: both sides
    assert job.code == 0, job.err
    assert pinned in job.json()["removed"]
    assert local_ids(d) == {verified} and remote_ids(d) == {verified, newest}


def test_pin_of_a_snapshot_stored_nowhere_is_a_usage_error_and_dry_run_writes_nothing(remote, cli):
    d = remote
    kept = make(d, 1)
    missing = sid(NOW - timedelta(days=30))
    result = cli("snapshot", "pin", missing, config=d.config)
    assert result.code == 2 and missing in result.err and "stored nowhere" in result.err
    assert cli("snapshot", "pin", "../etc", config=d.config).code == 2
    dry = cli("snapshot", "pin", kept, "--dry-run", "--json", config=d.config)
    assert dry.code == 0 and dry.json()["pin"] is None
    assert not (d.paths.root / "snapshots" / kept / "pinned.json").exists()
    keys = {item["Key"] for item in d.client.list_objects_v2(Bucket=d.bucket)["Contents"]}
    assert f"{PREFIX}/{kept}/pinned.json" not in keys
    assert cli("snapshot", "pin", kept, config=d.config).code == 0
    undo = cli("snapshot", "unpin", kept, "--dry-run", "--json", config=d.config).json()
    assert undo["was_pinned"] == {"local": True, "remote": True}
    listed = cli("snapshot", "list", "--json", config=d.config).json()["snapshots"]
    assert listed[0]["pin"]["pinned"] is True  # the dry run unpinned nothing


def _killed_upload(d, snapshot_id: str, *, with_object: bool = True) -> str:
    """What a killed ``snapshot upload`` leaves: some objects, one multipart upload with a part."""
    if with_object:
        d.client.put_object(Bucket=d.bucket, Key=f"{PREFIX}/{snapshot_id}/history.db", Body=b"h")
    key = f"{PREFIX}/{snapshot_id}/qdrant/collection/mem0/storage.sqlite"
    started = d.client.create_multipart_upload(Bucket=d.bucket, Key=key)
    d.client.upload_part(
        Bucket=d.bucket, Key=key, UploadId=started["UploadId"], PartNumber=1, Body=b"p" * 1024
    )
    return str(started["UploadId"])


def uploads(d) -> set[str]:
    listed = d.client.list_multipart_uploads(Bucket=d.bucket, Prefix=PREFIX + "/")
    return {item["UploadId"] for item in listed.get("Uploads", [])}


def test_incomplete_remote_snapshots_older_than_a_day_go_with_their_uploads(remote, cli):
    d = remote
    kept = make(d, 3)
    old, parts_only, young = (sid(NOW - timedelta(hours=h)) for h in (50, 30, 2))
    old_upload = _killed_upload(d, old)
    parts_upload = _killed_upload(d, parts_only, with_object=False)
    young_upload = _killed_upload(d, young)
    dry = cli("snapshot", "prune", "--dry-run", "--json", config=d.config)
    plan = decisions(dry)
    for snapshot_id in (old, parts_only):
        assert plan[snapshot_id]["reasons"] == ["incomplete, older than 1 day"]
        assert plan[snapshot_id]["remove_from"] == ["remote"]
    assert plan[young]["keep"] and plan[young]["reasons"] == ["incomplete, younger than 1 day"]
    assert dry.json()["skipped_incomplete"] == [young]
    assert uploads(d) == {old_upload, parts_upload, young_upload}  # the dry run aborted none
    alone = cli("snapshot", "prune", "--local-only", "--dry-run", "--json", config=d.config).json()
    assert alone["sides"] == ["local"] and [x["id"] for x in alone["decisions"]] == [kept]
    assert remote_ids(d) == {kept, old, young}

    done = cli("snapshot", "prune", "--yes", "--json", config=d.config)
    assert done.code == 0, done.err
    assert sorted(done.json()["removed"]) == sorted([old, parts_only])
    aborted = {u["upload_id"] for u in done.json()["aborted_uploads"]}
    assert aborted == {old_upload, parts_upload}
    assert uploads(d) == {young_upload}
    assert remote_ids(d) == {kept, young}
    assert local_ids(d) == {kept}


def versioned(d) -> None:
    d.client.put_bucket_versioning(Bucket=d.bucket, VersioningConfiguration={"Status": "Enabled"})


def versions_under(d, snapshot_id: str) -> tuple[list, list]:
    listed = d.client.list_object_versions(Bucket=d.bucket, Prefix=f"{PREFIX}/{snapshot_id}/")
    return listed.get("Versions", []), listed.get("DeleteMarkers", [])


def test_a_versioned_bucket_reports_the_versions_left_and_purge_versions_deletes_them(remote, cli):
    d = remote
    versioned(d)
    old, newest = make(d, 2), make(d, 1)
    dry = cli("snapshot", "prune", "--dry-run", config=d.config)
    assert "would leave" in dry.out and "--purge-versions" in dry.out
    done = cli("snapshot", "prune", "--yes", "--json", config=d.config)
    assert done.code == 0 and done.json()["removed"] == [old]
    left = done.json()["versions"]
    data, markers = versions_under(d, old)
    assert left["versioning"] == "Enabled" and left["snapshots"] == [old]
    assert left["left"] == len(data) >= 4 and markers  # manifest and files, now noncurrent
    assert left["left_bytes"] == sum(v["Size"] for v in data) > 0 and left["purged"] == 0

    purged = cli("snapshot", "prune", "--yes", "--purge-versions", "--json", config=d.config)
    assert purged.code == 0, purged.err
    assert purged.json()["removed"] == []  # an earlier prune's versions are found too
    assert purged.json()["versions"]["purged"] == len(data)
    assert versions_under(d, old) == ([], [])
    assert remote_ids(d) == {newest} and versions_under(d, newest)[0]  # the kept one untouched


def test_object_lock_wins_over_purge_versions_with_one_line_and_exit_11(
    make_deployment, s3_endpoint, cli, request
):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    name = f"locked-ret-{abs(hash(request.node.name)) % 10**8}"
    client.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    d = make_deployment(count=12, extra_config=s3_section(s3_endpoint, name, PREFIX))
    d.close()
    d.config.write_text(d.config.read_text().replace("keep_last = 3", "keep_last = 1"))
    d.loaded = memsync_config.load(d.config, os.environ)
    old = make(d, 2)
    make(d, 1)
    key = f"{PREFIX}/{old}/history.db"
    [version] = client.list_object_versions(Bucket=name, Prefix=key)["Versions"]
    client.put_object_legal_hold(
        Bucket=name, Key=key, VersionId=version["VersionId"], LegalHold={"Status": "ON"}
    )
    result = cli("snapshot", "prune", "--yes", "--purge-versions", config=d.config)
    assert result.code == 11
    [line] = [x for x in result.err.splitlines() if "object lock" in x]
    assert "removed 1 snapshot(s)" in line and key in line
    assert old not in {p.name for p in (d.paths.root / "snapshots").iterdir()}
    held = client.list_object_versions(Bucket=name, Prefix=key)["Versions"]
    assert [v["VersionId"] for v in held] == [version["VersionId"]]  # the lock kept it


def test_pin_with_the_bucket_down_pins_the_local_copy_and_says_the_rest_is_not_done(
    make_deployment, cli
):
    import json
    import socket

    with socket.socket() as probe:  # nothing listens there
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    d = make_deployment(count=5, extra_config=s3_section(endpoint, "gone-bucket", PREFIX))
    d.close()
    snapshot_id = cli("snapshot", "create", "--json", config=d.config).json()["id"]
    pinned = cli("snapshot", "pin", snapshot_id, "--reason", "keep", "--json", config=d.config)
    assert pinned.code == 11 and pinned.out == ""
    error = json.loads(pinned.err.strip().splitlines()[-1])
    assert "snapshot directory only" in error["message"] and endpoint in error["message"]
    assert "again when the bucket answers" in error["hint"]
    document = json.loads((d.paths.root / "snapshots" / snapshot_id / "pinned.json").read_text())
    assert document["pinned"] is True and document["reason"] == "keep"
    plan = cli("snapshot", "prune", "--local-only", "--dry-run", "--json", config=d.config)
    [decision] = [x for x in plan.json()["decisions"] if x["id"] == snapshot_id]
    assert "pinned (operator: keep)" in decision["reasons"]
