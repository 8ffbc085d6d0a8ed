"""Uploads that recover: an S3 outage, a killed multipart upload, a remote object damaged.

Real mem0 deployments, ``memsync`` as a subprocess, a moto S3 server this module starts and
stops itself (an outage is a closed port), real SIGKILLs.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.conftest import s3_section
from tests.process.test_cli import run_memsync
from tests.store.test_s3_stalls import StallingRelay

PREFIX = "memsync/uploads"


class Moto:
    """A moto S3 server of this test's own, stopped and started again on the same port."""

    def __init__(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
        self.server.start()
        host, self.port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{self.port}"

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port)
        self.server.start()

    def client(self) -> Any:
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")


@pytest.fixture
def moto(s3_endpoint: str) -> Any:  # s3_endpoint: the test credentials in the environment
    server = Moto()
    yield server
    server.stop()


def memsync(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_memsync(*args, "--config", str(config))


def local_ids(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "snapshots").iterdir() if p.is_dir())


def remote_complete(client: Any, bucket: str) -> set[str]:
    keys = [i["Key"] for i in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    return {k.split("/")[-2] for k in keys if k.endswith("/manifest.json")}


def gauge(text: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert found, f"{series} not in the textfile:\n{text}"
    return float(found.group(1))


@pytest.mark.slow(
    reason="eight memsync runs against a stopped S3 server, each through botocore's real retries"
)
def test_an_outage_keeps_at_most_max_pending_snapshots_and_the_return_uploads_them(
    make_deployment, moto, tmp_path
):
    moto.client().create_bucket(Bucket="outage")
    textfile = tmp_path / "memsync.prom"
    deployment = make_deployment(
        count=10,
        extra_config=s3_section(moto.endpoint, "outage", PREFIX)
        + f'\n[daemon]\nsnapshot_every = "1h"\ntextfile_path = "{textfile}"\n',
    )
    deployment.close()
    root, config = deployment.paths.root, deployment.config
    moto.stop()

    first = memsync(config, "job", "snapshot")  # the daemon's job: captures (none yet), fails
    assert first.returncode == 11, first.stderr
    assert len(local_ids(root)) == 1 and "marked pending (1 pending)" in first.stderr
    assert gauge(textfile.read_text(), "memsync_snapshots_pending_upload") == 1
    retry = memsync(config, "job", "snapshot")  # a retry: not due, so no second capture
    assert retry.returncode == 11 and "not due" in retry.stderr, retry.stderr
    assert len(local_ids(root)) == 1

    codes = [memsync(config, "snapshot", "create", "--upload") for _ in range(4)]  # by hand
    assert [c.returncode for c in codes] == [11, 11, 11, 11]
    assert len(local_ids(root)) == 3  # two more captures, then the bound
    bounded = codes[-1].stderr
    assert "3 snapshots already wait for upload" in bounded and moto.endpoint in bounded
    assert "max_pending_uploads = 3" in bounded and bounded.count("\n") == 1
    listed = json.loads(memsync(config, "snapshot", "list", "--json").stdout)
    assert listed["pending_upload"] == 3
    assert all(row["upload_pending"] for row in listed["snapshots"])
    status = json.loads(memsync(config, "status", "--json").stdout)
    assert status["snapshots"] == {"pending_upload": 3}
    plan = memsync(config, "snapshot", "prune", "--local-only", "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr  # S3 is down: the local side decides alone
    kept = {d["id"]: d for d in json.loads(plan.stdout)["decisions"]}
    assert set(kept) == set(local_ids(root))  # retention never drops a snapshot not yet uploaded
    assert all(d["keep"] and "upload pending" in d["reasons"] for d in kept.values())

    moto.start()
    back = memsync(config, "snapshot", "create", "--upload", "--pending-only", "--json")
    assert back.returncode == 0, back.stderr
    report = json.loads(back.stdout)
    assert report["captured"] is False and report["id"] is None
    assert report["pending_uploads"]["uploaded"] == local_ids(root)  # oldest first
    assert report["pending_uploads"]["count"] == 0
    assert remote_complete(moto.client(), "outage") == set(local_ids(root))
    assert json.loads(memsync(config, "status", "--json").stdout)["snapshots"] == {
        "pending_upload": 0
    }
    again = memsync(config, "job", "snapshot")  # the job after the outage: not due, nothing to do
    assert again.returncode == 0, again.stderr
    assert gauge(textfile.read_text(), "memsync_snapshots_pending_upload") == 0
    for snapshot_id in local_ids(root):
        verified = memsync(config, "snapshot", "verify", f"s3://{snapshot_id}")
        assert verified.returncode == 0, verified.stdout + verified.stderr


def big_deployment(make_deployment: Any, endpoint: str, bucket: str) -> Any:
    """A real deployment whose history.db is over 8 MiB: its upload is multipart."""
    deployment = make_deployment(count=4, extra_config=s3_section(endpoint, bucket, PREFIX))
    for number in range(10):
        text = f"note {number}: " + " ".join(f"word{number}-{i}" for i in range(110_000))
        deployment.memory.add(text, user_id="bulky", infer=False)
    deployment.close()
    assert deployment.paths.history_db.stat().st_size > 9 * 1024 * 1024
    return deployment


def test_a_kill_mid_multipart_upload_is_aborted_and_completed_by_the_next_run(
    make_deployment, s3_endpoint, bucket
):
    relay = StallingRelay(s3_endpoint, rb"^PUT /[^ ]*history\.db\?[^ ]*partNumber=2[& ]")
    try:
        deployment = big_deployment(make_deployment, relay.endpoint, bucket)
        made = memsync(deployment.config, "snapshot", "create", "--json")
        snapshot_id = json.loads(made.stdout)["id"]
        upload = subprocess.Popen(
            [sys.executable, "-m", "memsync", "snapshot", "upload", snapshot_id]
            + ["--config", str(deployment.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while relay.stalled == 0 and upload.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert upload.poll() is None, upload.communicate()[1]
        assert relay.stalled >= 1  # part 2 of history.db is in flight
        upload.send_signal(signal.SIGKILL)
        upload.wait(timeout=10)
    finally:
        relay.close()
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    left = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["Key"] for u in left] == [f"{PREFIX}/{snapshot_id}/history.db"]
    assert remote_complete(client, bucket) == set()
    pending = deployment.paths.root / "snapshots" / snapshot_id / "upload-pending.json"
    assert json.loads(pending.read_text())["attempts"] == 1  # marked before anything was sent

    text = deployment.config.read_text().replace(relay.endpoint, s3_endpoint)
    deployment.config.write_text(text)
    resumed = memsync(
        deployment.config, "snapshot", "create", "--upload", "--pending-only", "--json"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["pending_uploads"]["uploaded"] == [snapshot_id]
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert remote_complete(client, bucket) == {snapshot_id} and not pending.exists()
    verified = memsync(deployment.config, "snapshot", "verify", f"s3://{snapshot_id}")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_upload_verify_repairs_an_object_overwritten_with_its_metadata_kept(
    make_deployment, s3_endpoint, bucket
):
    deployment = make_deployment(count=10, extra_config=s3_section(s3_endpoint, bucket, PREFIX))
    deployment.close()
    made = memsync(deployment.config, "snapshot", "create", "--upload", "--json")
    assert made.returncode == 0, made.stderr
    snapshot_id = json.loads(made.stdout)["id"]
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    key = f"{PREFIX}/{snapshot_id}/history.db"
    original = client.get_object(Bucket=bucket, Key=key)
    body = bytearray(original["Body"].read())
    for index in range(len(body) // 2, len(body) // 2 + 16):
        body[index] ^= 0xFF  # same size, other bytes
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body), Metadata=original["Metadata"])

    trusting = json.loads(
        memsync(deployment.config, "snapshot", "upload", snapshot_id, "--json").stdout
    )
    assert (trusting["sent"], trusting["skipped"]) == (0, 3)  # metadata alone: nothing resent
    damaged = memsync(deployment.config, "snapshot", "verify", f"s3://{snapshot_id}")
    assert damaged.returncode == 3 and "history.db" in damaged.stdout

    repaired = memsync(deployment.config, "snapshot", "upload", snapshot_id, "--verify", "--json")
    assert repaired.returncode == 0, repaired.stderr
    assert json.loads(repaired.stdout)["repaired"] == ["history.db"]
    local = deployment.paths.root / "snapshots" / snapshot_id / "history.db"
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == local.read_bytes()
    verified = memsync(deployment.config, "snapshot", "verify", f"s3://{snapshot_id}")
    assert verified.returncode == 0, verified.stdout + verified.stderr
