"""``memsync doctor`` on the backup side: the bucket as it is, S3 gone, room for the next snapshot.

A real deployment, moto's S3 server on 127.0.0.1, ``memsync doctor --json`` as a subprocess.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from typing import Any

import boto3

from tests.conftest import s3_section
from tests.helpers.s3_proxy import provider_lacking
from tests.process.test_cli import run_memsync
from tests.store.test_s3_action_words import refusing_endpoint

PREFIX = "memsync/doctor"


def doctor(deployment: Any) -> tuple[int, dict[str, dict[str, Any]], dict[str, Any]]:
    """Run doctor; return its exit, its backup-side results by code, and the whole report."""
    result = run_memsync("doctor", "--json", "--config", str(deployment.config))
    assert result.stderr.count("Traceback") == 0, result.stderr
    report = json.loads(result.stdout)
    wanted = ("s3-", "uploads-pending", "snapshot-space")
    by_code = {r["code"]: r for r in report["results"] if r["code"].startswith(wanted)}
    errors = any(r["status"] == "error" for r in report["results"])
    assert result.returncode == (3 if errors else 0)  # doctor's own rule
    return result.returncode, by_code, report


def client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


def statuses(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {code: result["status"] for code, result in results.items()}


def test_a_good_bucket_is_ok_on_every_s3_result(make_deployment, s3_endpoint, bucket):
    s3 = client(s3_endpoint)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    rule = {
        "ID": "abort",
        "Status": "Enabled",
        "Filter": {"Prefix": ""},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2},
    }
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [rule]})
    deployment = make_deployment(count=10, extra_config=s3_section(s3_endpoint, bucket, PREFIX))
    deployment.close()
    made = run_memsync("snapshot", "create", "--upload", "--config", str(deployment.config))
    assert made.returncode == 0, made.stderr
    _code, results, _report = doctor(deployment)
    assert statuses(results) == {
        "snapshot-space": "ok",
        "uploads-pending": "ok",
        "s3-reachable": "ok",
        "s3-access": "ok",
        "s3-versioning": "ok",
        "s3-object-lock": "ok",
        "s3-lifecycle": "ok",
        "s3-list-versions": "ok",
        "s3-delete-version": "ok",
        "s3-incomplete-uploads": "ok",
    }
    assert "after 2 day(s)" in results["s3-lifecycle"]["message"]
    assert "versioning enabled" in results["s3-versioning"]["message"]
    assert not probes_left(s3, bucket)


def probes_left(s3: Any, bucket: str) -> list[str]:
    """Versions or delete markers doctor's probes left in the bucket (none: it changes nothing)."""
    listed = s3.list_object_versions(Bucket=bucket)
    entries = listed.get("Versions", []) + listed.get("DeleteMarkers", [])
    return [e["Key"] for e in entries if ".memsync-doctor" in e["Key"]]


def test_a_provider_without_the_version_calls_is_named_with_what_it_costs(
    make_deployment, s3_endpoint, bucket
):
    s3 = client(s3_endpoint)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    with provider_lacking(s3_endpoint, "list-versions", "delete-version", "object-lock") as lacking:
        deployment = make_deployment(
            count=5, extra_config=s3_section(lacking.endpoint, bucket, PREFIX)
        )
        deployment.close()
        code, results, _report = doctor(deployment)
    assert code == 3
    assert lacking.answered == {"list-versions": 1, "delete-version": 1, "object-lock": 1}
    assert results["s3-reachable"]["status"] == "ok" and results["s3-access"]["status"] == "ok"
    listing, deleting = results["s3-list-versions"], results["s3-delete-version"]
    assert listing["status"] == "error" and deleting["status"] == "error"
    assert (
        "ListObjectVersions fails" in listing["message"] and "NotImplemented" in listing["message"]
    )
    assert "purge-memory and forget --erase cannot see" in listing["message"]
    assert "--delete-versions" in deleting["message"] and "NotImplemented" in deleting["message"]
    for result in (listing, deleting):
        assert "lifecycle rule that expires noncurrent versions" in result["fix"]
    lock = results["s3-object-lock"]
    assert lock["status"] == "warning" and "object lock unknown" in lock["message"]
    assert "GetObjectLockConfiguration answered NotImplemented" in lock["message"]
    assert results["s3-incomplete-uploads"]["status"] == "ok"  # the other probes still ran
    assert not probes_left(s3, bucket)


def test_a_missing_bucket_is_an_access_error(make_deployment, s3_endpoint):
    deployment = make_deployment(
        count=5, extra_config=s3_section(s3_endpoint, "no-bucket-for-doctor", PREFIX)
    )
    deployment.close()
    code, results, _report = doctor(deployment)
    assert code == 3
    assert statuses(results) == {
        "uploads-pending": "ok",
        "s3-reachable": "ok",
        "s3-access": "error",
    }
    assert "bucket does not exist" in results["s3-access"]["message"]
    assert results["s3-access"]["fix"]


def test_an_unreachable_endpoint_is_a_result_not_a_crash(make_deployment):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    deployment = make_deployment(count=5, extra_config=s3_section(endpoint, "anywhere", PREFIX))
    deployment.close()
    code, results, report = doctor(deployment)
    assert code == 3
    assert statuses(results) == {"uploads-pending": "ok", "s3-reachable": "error"}
    assert endpoint in results["s3-reachable"]["message"]
    assert "check" in {r["code"] for r in report["results"]}  # the other probes still ran


def test_without_credentials_reachability_is_not_claimed(make_deployment, no_credentials):
    endpoint = refusing_endpoint()  # nothing listens there: boto3 must not be said to reach it
    deployment = make_deployment(count=5, extra_config=s3_section(endpoint, "anywhere", PREFIX))
    deployment.close()
    code, results, _ = doctor(deployment)
    assert code == 3
    assert statuses(results) == {
        "uploads-pending": "ok",
        "s3-reachable": "warning",
        "s3-access": "error",
    }
    assert "not tried" in results["s3-reachable"]["message"]
    assert "no credentials" in results["s3-access"]["message"]


def test_a_bucket_without_the_lifecycle_rule_gets_the_command(make_deployment, s3_endpoint, bucket):
    deployment = make_deployment(count=5, extra_config=s3_section(s3_endpoint, bucket, PREFIX))
    deployment.close()
    _code, results, _report = doctor(deployment)
    lifecycle = results["s3-lifecycle"]
    assert lifecycle["status"] == "warning"
    assert f"put-bucket-lifecycle-configuration --bucket {bucket}" in lifecycle["fix"]
    document = json.loads(lifecycle["fix"].split("'")[1])  # the JSON the command passes
    s3 = client(s3_endpoint)
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration=document)
    assert results["s3-versioning"]["status"] == "warning"  # off, and no object lock
    assert "put-bucket-versioning" in results["s3-versioning"]["fix"]
    _code, after, _report = doctor(deployment)
    assert after["s3-lifecycle"]["status"] == "ok"  # the recommended rule is the one it reads


def test_stale_incomplete_uploads_are_counted_with_their_snapshot_age(
    make_deployment, s3_endpoint, bucket
):
    s3 = client(s3_endpoint)
    s3.create_multipart_upload(Bucket=bucket, Key=f"{PREFIX}/20200101T000000Z/history.db")
    fresh = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    s3.create_multipart_upload(Bucket=bucket, Key=f"{PREFIX}/{fresh}/history.db")
    deployment = make_deployment(count=5, extra_config=s3_section(s3_endpoint, bucket, PREFIX))
    deployment.close()
    _code, results, _report = doctor(deployment)
    stale = results["s3-incomplete-uploads"]
    assert stale["status"] == "warning"
    assert stale["message"].startswith("1 incomplete multipart upload(s) older than a day")
    assert "20200101T000000Z/history.db" in stale["message"] and fresh not in stale["message"]
    assert "--pending-only" in stale["fix"]


def test_after_a_lost_disk_doctor_points_at_the_bucket_and_its_fix_restores(
    make_deployment, s3_endpoint, bucket
):
    import shutil

    deployment = make_deployment(count=10, extra_config=s3_section(s3_endpoint, bucket, PREFIX))
    deployment.close()
    made = run_memsync("snapshot", "create", "--upload", "--config", str(deployment.config))
    assert made.returncode == 0, made.stderr
    # the disk is lost: the stores and the local snapshots are gone, the bucket is not
    shutil.rmtree(deployment.paths.qdrant)
    deployment.paths.history_db.unlink()
    shutil.rmtree(deployment.paths.root / "snapshots")
    _code, _results, report = doctor(deployment)
    (last,) = [r for r in report["results"] if r["code"] == "last-snapshot"]
    assert last["status"] == "error", last
    assert "the bucket holds 1" in last["message"] and "hours old" in last["message"], last
    snapshot_id = made.stdout.split()[1].rstrip(":")
    assert last["fix"].startswith(f"memsync restore s3://{snapshot_id}"), last  # none verified
    restored = run_memsync("restore", f"s3://{snapshot_id}", "--config", str(deployment.config))
    assert restored.returncode == 0, restored.stderr
    assert "the snapshot was taken " in restored.stdout and " ago: " in restored.stdout
    assert run_memsync("check", "--config", str(deployment.config)).returncode == 0
