"""Erasure reaches the backups: snapshots, remote copies and every S3 object version.

A real mem0 deployment (offline hash embedder), real snapshots, moto's S3 server with a
versioned bucket, and the memsync CLI run as a subprocess (each run its own process: what one
run learns, the next finds again from the bucket and the state directory).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.conftest import s3_section

ROOT = Path(__file__).resolve().parents[2]
SECRETS = (
    "my therapist is Dr. Quillfeather on Tuesdays",
    "my locker code is 7741-ZETA",
    "I hide the spare key under the blue heron statue",
)
KEPT_TEXT = "Amy likes sourdough baked with rye flour"


def memsync(config: Path, *argv: str) -> tuple[int, Any, str]:
    """Run ``python -m memsync ARGV --json --config CONFIG``: (exit code, JSON stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "memsync", *argv, "--json", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def every_version(client: Any, bucket: str) -> dict[str, bytes]:
    """``{key?versionId=…: bytes}`` of every version of every object in the bucket."""
    found = {}
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for version in page.get("Versions", []):
            body = client.get_object(
                Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"]
            )["Body"].read()
            found[f"{version['Key']}?versionId={version['VersionId']}"] = body
    return found


def holding_text(versions: dict[str, bytes], texts: tuple[str, ...]) -> set[str]:
    return {label for label, data in versions.items() if any(t.encode() in data for t in texts)}


def seed(deployment: Any) -> list[str]:
    """Three memories of user zed holding SECRETS and one of amy; the Memory is closed."""
    ids = [
        deployment.memory.add(text, user_id="zed", infer=False)["results"][0]["id"]
        for text in SECRETS
    ]
    deployment.memory.add(KEPT_TEXT, user_id="amy", infer=False)
    deployment.close()
    return ids


def snapshot_upload(config: Path) -> str:
    code, made, err = memsync(config, "snapshot", "create", "--upload")
    assert code == 0, err
    return str(made["id"])


@pytest.mark.slow(
    reason="an erasure rewritten into every S3 object version, each then searched byte by byte"
)
def test_user_erasure_reaches_every_object_version(make_deployment, s3_endpoint, bucket):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    deployment = make_deployment(count=6, extra_config=s3_section(s3_endpoint, bucket))
    config = deployment.config
    zed = seed(deployment)
    made = [snapshot_upload(config), snapshot_upload(config)]

    code, forgot, err = memsync(config, "forget", "--user", "zed", "--erase", "--yes")
    assert code == 0, err
    assert sorted(forgot["deleted"]) == sorted(zed)
    copies = {(c["kind"], c["snapshot_id"]): c for c in forgot["erased"]["copies"]}
    for snapshot_id in made:  # the report names both sides' copies, with the command
        for kind in ("local-snapshot", "remote-snapshot"):
            assert copies[(kind, snapshot_id)]["holds"] == "yes", copies
            assert "purge-memory --user zed" in copies[(kind, snapshot_id)]["remove"]
    assert forgot["erased"]["snapshots_holding"] == made

    # the scope's ids are found although mem0 no longer has them (snapshots' payloads, ledger)
    code, purged, err = memsync(
        config, "snapshot", "purge-memory", "--user", "zed", "--remote", "--yes"
    )
    assert code == 0, err
    assert sorted(purged["memory_ids"]) == sorted(zed)
    assert purged["rewritten"] == made and purged["uploaded"] == made
    listed = {h["version"] for h in purged["versions"]["holding"]}
    in_bucket = holding_text(every_version(client, bucket), SECRETS)
    # old manifests name the user in their scopes (counts, no text): they hold zed too
    naming = holding_text(every_version(client, bucket), ('"zed"',))
    assert naming and all("/manifest.json?" in label for label in naming)
    assert {h["version"] for h in purged["versions"]["holding"] if h["scopes"]} == naming
    assert listed == in_bucket | naming and in_bucket  # exactly the versions holding either
    assert {h["snapshot_id"] for h in purged["versions"]["holding"]} == set(made)

    # erasing them again by id: the report names the noncurrent versions, with the command
    code, again, err = memsync(config, "forget", *zed, "--erase", "--yes")
    assert code == 0, err
    named = {c["where"]: c for c in again["erased"]["copies"] if c["kind"] == "s3-version"}
    # the versions holding these memories' text (an old manifest names the user, no memory)
    assert set(named) == in_bucket and all(c["holds"] == "yes" for c in named.values())
    assert all("--delete-versions" in c["remove"] for c in named.values())
    assert not [c for c in again["erased"]["copies"] if c["kind"] != "s3-version"]

    # a later run, a new process: the same versions, from the bucket and the verdict cache
    code, again, err = memsync(config, "snapshot", "purge-memory", "--user", "zed", "--dry-run")
    assert code == 0, err
    assert {h["version"] for h in again["versions"]["holding"]} == listed
    assert again["versions"]["downloaded"] == 0 and again["versions"]["cached"] >= len(listed)
    code, dry, err = memsync(
        config, "snapshot", "purge-memory", "--user", "zed", "--delete-versions", "--dry-run"
    )
    assert code == 0 and dry["versions"]["deleted"] == [], err
    assert holding_text(every_version(client, bucket), SECRETS) == in_bucket

    code, deleted, err = memsync(
        config, "snapshot", "purge-memory", "--user", "zed", "--delete-versions", "--yes"
    )
    assert code == 0, err
    assert set(deleted["versions"]["deleted"]) == listed
    everything = every_version(client, bucket)
    assert holding_text(everything, SECRETS) == set()  # no version of any object holds it
    assert holding_text(everything, ('"zed"',)) == set()  # nor names the user
    assert holding_text(everything, (KEPT_TEXT,))  # amy's memory is still backed up
    for snapshot_id in made:
        remote = f"s3://{bucket}/memsync/test/{snapshot_id}"
        assert memsync(config, "snapshot", "verify", remote)[0] == 0
    code, last, err = memsync(config, "snapshot", "purge-memory", "--user", "zed", "--dry-run")
    assert code == 0 and last["versions"]["holding"] == [], err
    for path in deployment.paths.root.rglob("*"):  # stores, snapshots, state: ledger and cache
        if path.is_file():
            data = path.read_bytes()
            assert not any(t.encode() in data for t in SECRETS), path
            assert b"zed" not in data or path.suffix != ".json", path  # the ledger: a digest


def test_object_lock_refuses_clearly_and_loses_nothing_else(make_deployment, s3_endpoint, bucket):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    locked = f"{bucket[:40]}-lock"
    client.create_bucket(Bucket=locked, ObjectLockEnabledForBucket=True)
    deployment = make_deployment(count=4, extra_config=s3_section(s3_endpoint, locked))
    config = deployment.config
    zed = seed(deployment)
    made = snapshot_upload(config)
    until = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=3)
    for label in every_version(client, locked):  # retention on what the upload wrote
        key, _, version_id = label.partition("?versionId=")
        client.put_object_retention(
            Bucket=locked, Key=key, VersionId=version_id,
            Retention={"Mode": "COMPLIANCE", "RetainUntilDate": until},
        )  # fmt: skip
    assert memsync(config, "forget", *zed, "--erase", "--yes")[0] == 0
    code, purged, err = memsync(
        config, "snapshot", "purge-memory", *zed, "--remote", "--delete-versions", "--yes"
    )
    before = every_version(client, locked)
    holding = holding_text(before, SECRETS)
    assert code == 11, err
    assert "object lock kept" in err and "retained until" in err
    kept = {k["version"]: k for k in purged["versions"]["kept"]}
    assert set(kept) == holding and holding  # every version still holding text is named
    assert all(k["retain_until"] == until.isoformat() for k in kept.values())
    assert purged["rewritten"] == [made] and purged["uploaded"] == [made]  # nothing else lost
    assert memsync(config, "snapshot", "verify", f"s3://{locked}/memsync/test/{made}")[0] == 0
    assert holding_text(before, (KEPT_TEXT,))
    before = every_version(client, locked)  # verify wrote verified.json: a new version
    text = subprocess.run(  # the text report: one KEPT line per version, with its retention
        [sys.executable, "-m", "memsync", "snapshot", "purge-memory", *zed, "--delete-versions",
         "--yes", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert text.returncode == 11 and text.stderr.startswith("memsync: error: object lock kept")
    kept_lines = [line for line in text.stdout.splitlines() if line.startswith("KEPT")]
    assert {line.split()[1].rstrip(":") for line in kept_lines} == holding
    assert all(f"retained until {until.isoformat()}" in line for line in kept_lines)
    assert every_version(client, locked) == before


def test_forget_report_names_each_copy_and_an_unreachable_bucket(make_deployment, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "memsync-test")  # credentials: only the port fails
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "memsync-test-secret")
    unreachable = s3_section("http://127.0.0.1:9", "nowhere") + "timeout_s = 2\n"
    deployment = make_deployment(count=4, extra_config=unreachable)
    seed(deployment)
    code, made, err = memsync(deployment.config, "snapshot", "create")
    assert code == 0, err
    directory = Path(made["path"]).parent
    leftover = directory / f"{made['id']}.purged-old"  # what a killed purge-memory leaves
    subprocess.run(["cp", "-a", made["path"], str(leftover)], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "memsync", "forget", "--user", "zed", "--erase", "--yes",
         "--config", str(deployment.config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr  # erased here; the bucket's copies are unknown
    lines = done.stdout.splitlines()
    local = [line for line in lines if "local-snapshot" in line]
    assert len(local) == 1 and made["path"] in local[0]
    assert "memsync snapshot purge-memory --user zed --yes" in local[0]
    assert any("purge-leftover" in line and str(leftover) in line for line in lines)
    s3 = [line for line in lines if line.strip().startswith("unknown")]
    assert len(s3) == 1 and "unknown: S3 unreachable" in s3[0], lines
    assert "endpoint unreachable" in s3[0]


def plaintext_versions(client: Any, bucket: str, key: bytes, work: Path) -> dict[str, bytes]:
    """Every version of every object, sealed ones opened with ``key`` (memsync.seal)."""
    from memsync import seal

    opened = {}
    for label, data in every_version(client, bucket).items():
        if not data.startswith(seal.MAGIC):
            opened[label] = data
            continue
        path = label.partition("?versionId=")[0].split("/", 3)[3]  # memsync/test/<id>/<path>
        sealed, plain = work / "sealed", work / "plain"
        sealed.write_bytes(data)
        plain.unlink(missing_ok=True)
        seal.open_file(sealed, plain, key, path)
        opened[label] = plain.read_bytes()
    return opened


def test_sealed_versions_are_opened_with_the_key_before_they_are_searched(
    make_deployment, s3_endpoint, bucket, tmp_path
):
    import os

    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    key = os.urandom(32)
    key_file = tmp_path / "snapshot.key"
    key_file.write_text(key.hex())
    deployment = make_deployment(count=4, extra_config=s3_section(s3_endpoint, bucket))
    config = deployment.config
    config.write_text(
        config.read_text().replace(
            "keep_last = 3", f'keep_last = 3\nencrypt_key_file = "{key_file}"'
        )
    )
    seed(deployment)
    made = snapshot_upload(config)
    assert not holding_text(every_version(client, bucket), SECRETS)  # sealed: bytes hide it
    assert memsync(config, "forget", "--user", "zed", "--erase", "--yes")[0] == 0
    code, purged, err = memsync(
        config, "snapshot", "purge-memory", "--user", "zed", "--remote", "--yes"
    )
    assert code == 0 and purged["rewritten"] == [made], err
    listed = {h["version"] for h in purged["versions"]["holding"]}
    opened = plaintext_versions(client, bucket, key, tmp_path)
    # the sealed files' text, and the old (plaintext) manifest naming the user in its scopes
    assert listed and listed == holding_text(opened, SECRETS) | holding_text(opened, ('"zed"',))
    code, deleted, err = memsync(
        config, "snapshot", "purge-memory", "--user", "zed", "--delete-versions", "--yes"
    )
    assert code == 0 and set(deleted["versions"]["deleted"]) == listed, err
    opened = plaintext_versions(client, bucket, key, tmp_path)
    assert not holding_text(opened, SECRETS) and holding_text(opened, (KEPT_TEXT,))
    assert not holding_text(opened, ('"zed"',))
