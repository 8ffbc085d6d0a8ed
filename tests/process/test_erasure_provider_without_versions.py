"""An erasure on a provider that cannot list or delete object versions is never reported done.

Some S3-compatible services answer ``ListObjectVersions`` (or a delete of a version) with
``NotImplemented``. A real deployment, moto's S3 server with a versioned bucket behind a
provider that lacks those calls (``tests/helpers/s3_proxy.py``: everything else is forwarded
byte for byte), and the memsync CLI as a subprocess. The bucket is read directly from moto to
know what the versions really hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import boto3

from tests.conftest import s3_section
from tests.helpers.s3_proxy import provider_lacking
from tests.process.test_erasure_backups import ROOT, every_version, holding_text, memsync

SECRETS = ("alice's passport number is X4471-QRB", "alice keeps her savings at Brightmoor Bank")
KEPT_TEXT = "bob takes the 7:40 train on weekdays"


def seed(deployment: Any) -> list[str]:
    """Two memories of user alice holding SECRETS and one of bob; the Memory is closed."""
    ids = [
        deployment.memory.add(text, user_id="alice", infer=False)["results"][0]["id"]
        for text in SECRETS
    ]
    deployment.memory.add(KEPT_TEXT, user_id="bob", infer=False)
    deployment.close()
    return ids


def versioned_deployment(make_deployment: Any, s3_endpoint: str, bucket: str, endpoint: str):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    deployment = make_deployment(count=4, extra_config=s3_section(endpoint, bucket))
    return client, deployment


def exit_error(err: str) -> dict[str, Any]:
    return json.loads(err.strip().splitlines()[-1])


def test_the_erasure_report_says_unknown_when_the_provider_cannot_list_versions(
    make_deployment, s3_endpoint, bucket
):
    with provider_lacking(s3_endpoint, "list-versions") as provider:
        _client, deployment = versioned_deployment(
            make_deployment, s3_endpoint, bucket, provider.endpoint
        )
        config = deployment.config
        alice = seed(deployment)
        code, _made, err = memsync(config, "snapshot", "create", "--upload")
        assert code == 0, err
        code, forgot, err = memsync(config, "forget", "--user", "alice", "--erase", "--yes")
        assert code == 4, err  # the erasure of the bucket's copies was not observed
        assert sorted(forgot["deleted"]) == sorted(alice)  # the live erasure itself is done
        unknown = [c for c in forgot["erased"]["copies"] if c["holds"] == "unknown"]
        assert [c["kind"] for c in unknown] == ["s3"], forgot["erased"]["copies"]
        assert "does not list object versions" in unknown[0]["why"]
        assert "NotImplemented" in unknown[0]["why"]
        assert "lifecycle rule that expires noncurrent versions" in unknown[0]["remove"]
        assert provider.answered["list-versions"] >= 1


def test_versions_a_provider_cannot_list_are_unknown_never_none(
    make_deployment, s3_endpoint, bucket
):
    with provider_lacking(s3_endpoint, "list-versions") as provider:
        client, deployment = versioned_deployment(
            make_deployment, s3_endpoint, bucket, provider.endpoint
        )
        config = deployment.config
        seed(deployment)
        code, made, err = memsync(config, "snapshot", "create", "--upload")
        assert code == 0, err
        # the purge rewrites and re-uploads (the snapshot's payloads name alice's memories);
        # the old objects stay as noncurrent versions
        code, purged, err = memsync(
            config, "snapshot", "purge-memory", "--user", "alice", "--remote",
            "--delete-versions", "--yes",
        )  # fmt: skip
        holding = holding_text(every_version(client, bucket), SECRETS)
        assert len(holding) >= 2  # what "unknown" stands for: these still hold alice's text
        assert code == 11, err
        assert purged["rewritten"] == [made["id"]] and purged["uploaded"] == [made["id"]]
        versions = purged["versions"]
        assert versions["status"] == "unknown" and versions["deleted"] == []
        assert versions["why"].startswith("unknown: the provider does not list object versions")
        assert "lifecycle rule that expires noncurrent versions" in versions["hint"]
        refusal = exit_error(err)
        assert refusal["code"] == 11 and "unknown" in refusal["message"]
        assert "delete them in the provider's console" in refusal["hint"]
        assert provider.answered["list-versions"] >= 1

        text = subprocess.run(  # the text report says "unknown", never "0"
            [sys.executable, "-m", "memsync", "snapshot", "purge-memory", "--user", "alice",
             "--delete-versions", "--yes", "--config", str(config)],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert text.returncode == 11, text.stderr
        assert (
            "noncurrent S3 versions holding erased memories: unknown: the provider does not "
            "list object versions" in text.stdout
        )
        assert "deleted 0, left 0" not in text.stdout
        assert text.stderr.startswith("memsync: error: whether noncurrent S3 versions hold")
        assert "lifecycle rule" in text.stderr
        assert holding_text(every_version(client, bucket), SECRETS) == holding


def test_a_version_delete_the_provider_refuses_is_left_never_deleted(
    make_deployment, s3_endpoint, bucket
):
    with provider_lacking(s3_endpoint, "delete-version") as provider:
        client, deployment = versioned_deployment(
            make_deployment, s3_endpoint, bucket, provider.endpoint
        )
        config = deployment.config
        seed(deployment)
        code, _made, err = memsync(config, "snapshot", "create", "--upload")
        assert code == 0, err
        code, purged, err = memsync(  # the snapshot's payloads name alice's memories
            config, "snapshot", "purge-memory", "--user", "alice", "--remote",
            "--delete-versions", "--yes",
        )  # fmt: skip
        holding = holding_text(every_version(client, bucket), SECRETS)
        assert holding and provider.answered["delete-version"] >= 1
        assert code == 11, err
        versions = purged["versions"]
        listed = {h["version"] for h in versions["holding"]}
        assert holding <= listed  # the scan saw them (manifests naming alice too)
        assert versions["deleted"] == [] and versions["kept"] == []
        assert {f["version"] for f in versions["failed"]} == listed
        assert all("NotImplemented" in f["why"] for f in versions["failed"])
        assert set(purged["old_versions"]) == listed  # still there, and said so
        refusal = exit_error(err)
        assert refusal["code"] == 11 and "were not deleted" in refusal["message"]
        assert "s3-delete-version" in refusal["hint"]
        text = subprocess.run(  # the text report: one FAILED line per version, all left
            [sys.executable, "-m", "memsync", "snapshot", "purge-memory", "--user", "alice",
             "--delete-versions", "--yes", "--config", str(config)],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert text.returncode == 11, text.stderr
        failed = [line for line in text.stdout.splitlines() if line.startswith("FAILED")]
        assert {line.split()[1].rstrip(":") for line in failed} == listed
        assert all("not deleted: S3 delete object versions" in line for line in failed)
        assert f"deleted 0, left {len(listed)}" in text.stdout
        assert holding_text(every_version(client, bucket), SECRETS) == holding
