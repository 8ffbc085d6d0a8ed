"""Snapshots and a real S3 protocol server (moto's, on 127.0.0.1): upload, resume, verify, fail."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from tests.conftest import s3_section

PREFIX = "memsync/test"


@pytest.fixture
def remote_deployment(make_deployment, s3_endpoint, bucket):
    deployment = make_deployment(count=30, extra_config=s3_section(s3_endpoint, bucket, PREFIX))
    deployment.close()
    deployment.bucket = bucket
    deployment.endpoint = s3_endpoint
    return deployment


def objects(deployment) -> dict[str, int]:
    client = boto3.client("s3", endpoint_url=deployment.endpoint, region_name="us-east-1")
    listed = client.list_objects_v2(Bucket=deployment.bucket).get("Contents", [])
    return {item["Key"]: item["Size"] for item in listed}


def test_create_upload_list_download_and_verify_round_trip(remote_deployment, cli, tmp_path):
    d = remote_deployment
    made = cli("snapshot", "create", "--upload", "--json", config=d.config).json()
    snapshot_id = made["id"]
    assert made["upload"]["sent"] == made["files"] == 3
    keys = objects(d)
    assert set(keys) == {
        f"{PREFIX}/{snapshot_id}/{name}"
        for name in (
            "manifest.json",
            "history.db",
            "qdrant/meta.json",
            "qdrant/collection/mem0/storage.sqlite",
        )
    }
    listed = cli("snapshot", "list", "--remote", "--json", config=d.config).json()["snapshots"]
    assert listed[0]["id"] == snapshot_id and listed[0]["remote"]["complete"] is True
    result = cli(
        "snapshot", "verify", "--json", f"s3://{d.bucket}/{PREFIX}/{snapshot_id}", config=d.config
    )
    assert result.code == 0, result.out
    assert f"{PREFIX}/{snapshot_id}/verified.json" in objects(d)
    download = cli(
        "snapshot", "download", "--json", snapshot_id, str(tmp_path / "dl"), config=d.config
    )
    assert download.code == 0, download.err
    local = Path(made["path"])
    fetched = Path(download.json()["path"])
    for name in ("history.db", "qdrant/collection/mem0/storage.sqlite", "manifest.json"):
        assert (fetched / name).read_bytes() == (local / name).read_bytes()


def test_an_object_changed_behind_memsyncs_back_fails_remote_verify(remote_deployment, cli):
    d = remote_deployment
    snapshot_id = cli("snapshot", "create", "--upload", "--json", config=d.config).json()["id"]
    client = boto3.client("s3", endpoint_url=d.endpoint, region_name="us-east-1")
    key = f"{PREFIX}/{snapshot_id}/history.db"
    body = bytearray(client.get_object(Bucket=d.bucket, Key=key)["Body"].read())
    body[100] ^= 0xFF
    client.put_object(Bucket=d.bucket, Key=key, Body=bytes(body))
    result = cli(
        "snapshot", "verify", "--json", f"s3://{d.bucket}/{PREFIX}/{snapshot_id}", config=d.config
    )
    assert result.code == 3
    assert [f["code"] for f in result.json()["findings"]] == ["checksum-mismatch"]
    assert "history.db" in result.json()["findings"][0]["message"]


def test_an_interrupted_upload_resumes_without_resending_what_arrived(remote_deployment, cli):
    d = remote_deployment
    made = cli("snapshot", "create", "--json", config=d.config).json()
    client = boto3.client("s3", endpoint_url=d.endpoint, region_name="us-east-1")
    local = Path(made["path"])
    # what an upload killed after its first file leaves behind: one object, no manifest
    files = {f["path"]: f for f in json.loads((local / "manifest.json").read_text())["files"]}
    client.upload_file(
        str(local / "qdrant/meta.json"),
        d.bucket,
        f"{PREFIX}/{made['id']}/qdrant/meta.json",
        ExtraArgs={"Metadata": {"sha256": files["qdrant/meta.json"]["sha256"]}},
    )
    listed = cli("snapshot", "list", "--remote", "--json", config=d.config).json()["snapshots"]
    assert listed[0]["remote"]["complete"] is False
    result = cli("snapshot", "upload", "--json", made["id"], config=d.config).json()
    assert (result["sent"], result["skipped"]) == (2, 1)
    again = cli("snapshot", "upload", "--json", made["id"], config=d.config).json()
    assert (again["sent"], again["skipped"]) == (0, 3)


def test_unreachable_endpoint_exits_11_naming_bucket_and_endpoint(make_deployment, cli):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    deployment = make_deployment(count=5, extra_config=s3_section(endpoint, "nowhere-bucket"))
    result = cli("snapshot", "create", "--upload", config=deployment.config)
    assert result.code == 11
    assert "nowhere-bucket" in result.err and endpoint in result.err and result.err.count("\n") == 1
    kept = list((deployment.paths.root / "snapshots").iterdir())
    assert len(kept) == 1 and (kept[0] / "manifest.json").is_file()  # nothing local removed


def test_missing_bucket_exits_11(make_deployment, cli, s3_endpoint):
    deployment = make_deployment(
        count=5, extra_config=s3_section(s3_endpoint, "no-such-bucket-here")
    )
    result = cli("snapshot", "create", "--upload", "--json", config=deployment.config)
    assert result.code == 11
    assert "bucket does not exist" in json.loads(result.err)["message"]


def test_denied_credentials_exit_11(make_deployment, cli, tmp_path):
    """A second moto server that authenticates every request: our fake keys are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        deployment = make_deployment(
            count=5, extra_config=s3_section(f"http://127.0.0.1:{port}", "locked-bucket")
        )
        result = cli("snapshot", "create", "--upload", config=deployment.config)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert result.code == 11
    assert "access denied" in result.err and "locked-bucket" in result.err


def test_remote_prune_removes_manifest_first_and_keeps_the_newest(remote_deployment, cli):
    d = remote_deployment
    ids = []
    for _ in range(3):
        ids.append(cli("snapshot", "create", "--upload", "--json", config=d.config).json()["id"])
        time.sleep(1.05)  # distinct second-resolution ids
    text = d.config.read_text().replace("keep_last = 3", "keep_last = 1")
    d.config.write_text(text)
    plan = cli("snapshot", "prune", "--remote", "--dry-run", "--json", config=d.config).json()
    assert [x["action"] for x in plan["decisions"]] == ["keep", "remove", "remove"]
    result = cli("snapshot", "prune", "--remote", "--yes", "--json", config=d.config)
    assert result.code == 0 and sorted(result.json()["removed"]) == sorted(ids[:2])
    assert {key.split("/")[2] for key in objects(d)} == {ids[2]}


def test_a_pin_made_while_the_upload_was_pending_goes_with_the_upload(remote_deployment, cli):
    d = remote_deployment
    snapshot_id = cli("snapshot", "create", "--json", config=d.config).json()["id"]
    pinned = cli("snapshot", "pin", snapshot_id, "--reason", "before a drop", config=d.config)
    assert pinned.code == 0, pinned.err
    assert f"{PREFIX}/{snapshot_id}/pinned.json" not in objects(d)  # only local so far
    uploaded = cli("snapshot", "upload", snapshot_id, "--json", config=d.config)
    assert uploaded.code == 0, uploaded.err
    listed = cli("snapshot", "list", "--remote", "--json", config=d.config).json()["snapshots"]
    [row] = [r for r in listed if r["id"] == snapshot_id]
    assert row["pin"]["reason"] == "before a drop"
    plan = cli("snapshot", "prune", "--remote-only", "--dry-run", "--json", config=d.config)
    [decision] = [x for x in plan.json()["decisions"] if x["id"] == snapshot_id]
    assert decision["keep"] and "pinned (operator: before a drop)" in decision["reasons"]
