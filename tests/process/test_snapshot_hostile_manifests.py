"""A damaged manifest spoils its own snapshot only: every command goes on with the others.

Snapshots are made on a real deployment, then damaged behind memsync's back the way an attacker
or a broken disk would: one wrongly typed field, an out-of-range time, a deep JSON nest, a
symbolic link named like a snapshot, a verify of a snapshot that is not there. The damaged one
is listed incomplete; verify and restore of it exit 11 with one line naming it and the field;
nothing exits 1 (a bug in memsync), and nothing is written where it does not belong.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import boto3
import pytest

from tests.conftest import s3_section

PREFIX = "memsync/test"
GOOD = "20250101T000000Z"
DAMAGED = "20250102T000000Z"


def _set(document, path, value):
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


DAMAGES = {
    "longest_read_s-none": (("capture", "longest_read_s"), None, "capture.longest_read_s"),
    "longest_read_s-text": (("capture", "longest_read_s"), "abc", "capture.longest_read_s"),
    "format-list": (("format",), [1], "format"),
    "format-bool": (("format",), True, "format"),
    "collections-int": (("collections",), {"mem0": 5}, "collections.mem0"),
    "created_at-late": (("created_at",), "9999-12-31T23:59:59-01:00", "created_at"),
    "created_at-early": (("created_at",), "0001-01-01T00:00:00+01:00", "created_at"),
    "capture-early": (("capture", "history_at"), "0001-01-01T00:00:00+01:00", "capture.history_at"),
    "vector_size-text": (
        ("collections", "mem0", "vector_size"),
        "384",
        "collections.mem0.vector_size",
    ),
    "collection-path": (("collection",), "../../x", "collection"),
    "path-newline": (("files", 0, "path"), "history.db\n", "files.0.path"),
    "history-bool": (("history", "memories"), True, "history.memories"),
}


def _damaged_copy(good: Path, snapshot_id: str, raw: bytes | None, change=None) -> Path:
    """A copy of ``good`` renamed ``snapshot_id`` whose manifest is ``raw`` or changed by ``change``."""
    copy = good.parent / snapshot_id
    shutil.copytree(good, copy)
    (copy / "verified.json").unlink(missing_ok=True)
    if raw is None:
        document = json.loads((good / "manifest.json").read_text())
        document["id"] = snapshot_id
        change(document)
        raw = json.dumps(document).encode()
    (copy / "manifest.json").write_bytes(raw)
    return copy


@pytest.fixture
def made(make_deployment, cli):
    """A deployment (closed) and one good, verified snapshot renamed ``GOOD``."""
    deployment = make_deployment(count=10)
    deployment.close()
    result = cli("snapshot", "create", "--json", config=deployment.config)
    assert result.code == 0, result.err
    path = Path(result.json()["path"])
    good = path.parent / GOOD
    path.rename(good)
    document = json.loads((good / "manifest.json").read_text())
    document["id"] = GOOD
    (good / "manifest.json").write_text(json.dumps(document))
    assert cli("snapshot", "verify", GOOD, config=deployment.config).code == 0
    return deployment, good


def _commands_go_on(cli, config, damaged_id: str) -> None:
    listed = cli("snapshot", "list", "--json", config=config)
    assert listed.code == 0, listed.err
    rows = {row["id"]: row for row in listed.json()["snapshots"]}
    assert rows[GOOD]["complete"] is True and rows[GOOD]["verified"] is True
    assert rows[damaged_id]["complete"] is False
    pruned = cli("snapshot", "prune", "--dry-run", "--json", config=config)
    assert pruned.code == 0, pruned.err
    assert damaged_id in pruned.json()["skipped_incomplete"]
    assert cli("reconcile", "--dry-run", "--json", config=config).code in (0, 3)
    assert cli("job", "retention", config=config).code == 0


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_one_wrongly_typed_field_spoils_only_its_snapshot(made, cli, name):
    deployment, good = made
    path, value, field = DAMAGES[name]
    _damaged_copy(good, DAMAGED, None, lambda document: _set(document, path, value))
    _commands_go_on(cli, deployment.config, DAMAGED)
    verified = cli("snapshot", "verify", "--json", DAMAGED, config=deployment.config)
    assert verified.code == 3, verified.err  # verify reports it (tests/store/test_snapshot.py)
    (finding,) = verified.json()["findings"]
    assert finding["code"] == "manifest-missing" and DAMAGED in finding["path"]
    assert field in finding["message"] and "\n" not in finding["message"]
    restored = cli("restore", DAMAGED, "--dry-run", config=deployment.config)
    assert restored.code == 11, (restored.out, restored.err)
    first = restored.err.strip().splitlines()[0]
    assert DAMAGED in first and field in first, first
    assert cli("restore", GOOD, "--dry-run", "--force", config=deployment.config).code == 0


def test_a_deeply_nested_manifest_spoils_only_its_snapshot(made, cli):
    deployment, good = made
    _damaged_copy(good, DAMAGED, b"[" * 100_000)
    _commands_go_on(cli, deployment.config, DAMAGED)
    result = cli("snapshot", "verify", DAMAGED, "--json", config=deployment.config)
    assert result.code == 3 and result.json()["findings"][0]["code"] == "manifest-missing"
    assert "nested too deeply" in result.json()["findings"][0]["message"]
    restored = cli("restore", DAMAGED, "--dry-run", config=deployment.config)
    assert restored.code == 11 and DAMAGED in restored.err


def test_a_verified_json_that_says_ok_as_text_is_not_verified(made, cli):
    deployment, good = made
    copy = _damaged_copy(
        good,
        DAMAGED,
        (good / "manifest.json").read_bytes().replace(GOOD.encode(), DAMAGED.encode()),
    )
    (copy / "verified.json").write_text(json.dumps({"ok": "false"}))
    rows = {
        row["id"]: row
        for row in cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    }
    assert rows[DAMAGED]["complete"] is True and rows[DAMAGED]["verified"] is False


def test_a_symlink_named_like_a_snapshot_is_never_written_through(made, cli):
    deployment, good = made
    link = good.parent / DAMAGED
    link.symlink_to(good)
    before = (good / "verified.json").read_bytes()
    for target in (DAMAGED, str(link)):
        result = cli("snapshot", "verify", target, config=deployment.config)
        assert result.code == 11 and "symbolic link" in result.err, result.err
        assert cli("restore", target, "--dry-run", config=deployment.config).code == 11
    assert (good / "verified.json").read_bytes() == before
    listed = cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    assert [row["id"] for row in listed] == [GOOD]
    assert cli("snapshot", "prune", "--dry-run", config=deployment.config).code == 0


def test_verify_of_a_path_that_is_no_snapshot_writes_nothing_there(made, cli, tmp_path):
    deployment, good = made
    live = deployment.paths.history_db.parent  # a mistyped path: the live mem0 directory
    for directory in (live, good.parent):  # ... or the snapshot directory itself
        before = sorted(p.name for p in directory.iterdir())
        result = cli("snapshot", "verify", str(directory), config=deployment.config)
        assert result.code == 11 and "is not a memsync snapshot" in result.err, result.err
        assert result.err.count("\n") == 1
        assert sorted(p.name for p in directory.iterdir()) == before
    lost = cli("snapshot", "verify", str(tmp_path / "nowhere"), config=deployment.config)
    assert lost.code == 11 and f"snapshot directory {tmp_path / 'nowhere'} does not exist" in (
        lost.err
    )
    shutil.copytree(good, good.parent / DAMAGED)  # a snapshot that lost its manifest: judged
    (good.parent / DAMAGED / "manifest.json").unlink()
    judged = cli("snapshot", "verify", DAMAGED, "--json", config=deployment.config)
    assert judged.code == 3 and "manifest-missing" in judged.out


def test_a_partial_copy_is_not_listed_verified(made, cli):
    deployment, good = made
    shutil.copytree(good, good.parent / f"{DAMAGED}.partial")
    rows = {
        row["id"]: row
        for row in cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    }
    assert rows[DAMAGED]["complete"] is False and rows[DAMAGED]["verified"] is False


def test_a_snapshot_whose_verification_failed_is_listed_failed_not_unverified(made, cli):
    deployment, good = made
    shutil.copytree(good, good.parent / DAMAGED)
    (good.parent / DAMAGED / "history.db").write_bytes(b"not the bytes the manifest hashed")
    (good.parent / DAMAGED / "verified.json").unlink(missing_ok=True)
    never = {
        r["id"]: r
        for r in cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    }
    assert never[DAMAGED]["local"]["failed"] is False and never[DAMAGED]["verified"] is False
    assert cli("snapshot", "verify", DAMAGED, config=deployment.config).code == 3
    listed = cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    rows = {row["id"]: row for row in listed}
    assert rows[DAMAGED]["local"]["failed"] is True and rows[DAMAGED]["verified"] is False
    assert rows[GOOD]["local"]["failed"] is False
    text = cli("snapshot", "list", config=deployment.config).out
    (line,) = [x for x in text.splitlines() if x.startswith(DAMAGED)]
    assert line.split()[2] == "FAILED", text


@pytest.fixture
def remote(make_deployment, cli, s3_endpoint, bucket):
    """A deployment with ``[s3]`` and one snapshot uploaded; returns (deployment, id, client)."""
    deployment = make_deployment(count=10, extra_config=s3_section(s3_endpoint, bucket, PREFIX))
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config)
    assert made.code == 0, made.err
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    return deployment, made.json()["id"], client, bucket


def _keys(client, bucket) -> set[str]:
    return {item["Key"] for item in client.list_objects_v2(Bucket=bucket).get("Contents", [])}


def test_a_damaged_remote_manifest_spoils_only_its_snapshot(remote, cli):
    deployment, good_id, client, bucket = remote
    for key in _keys(client, bucket):
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if key.endswith("manifest.json"):
            document = json.loads(body)
            document["id"] = DAMAGED
            document["capture"]["longest_read_s"] = None
            body = json.dumps(document).encode()
        client.put_object(Bucket=bucket, Key=key.replace(good_id, DAMAGED), Body=body)
    listed = cli("snapshot", "list", "--remote", "--json", config=deployment.config)
    assert listed.code == 0, listed.err
    rows = {row["id"]: row for row in listed.json()["snapshots"]}
    assert rows[good_id]["remote"]["complete"] is True
    assert rows[DAMAGED]["remote"]["complete"] is False
    pruned = cli("snapshot", "prune", "--remote", "--dry-run", config=deployment.config)
    assert pruned.code == 0, pruned.err
    result = cli(
        "snapshot", "verify", f"s3://{bucket}/{PREFIX}/{DAMAGED}", config=deployment.config
    )
    assert result.code == 3, result.err  # the manifest-missing finding, as for a local one
    restored = cli(
        "restore", f"s3://{bucket}/{PREFIX}/{DAMAGED}", "--dry-run", config=deployment.config
    )
    assert restored.code == 11 and "capture.longest_read_s" in restored.err, restored.err


def test_verify_of_a_remote_snapshot_that_is_not_there_writes_nothing(remote, cli):
    deployment, good_id, client, bucket = remote
    before = _keys(client, bucket)
    missing = cli(
        "snapshot", "verify", f"s3://{bucket}/{PREFIX}/{DAMAGED}", config=deployment.config
    )
    assert missing.code == 11 and "not found" in missing.err, missing.err
    for trick in (
        f"s3://{bucket}/{PREFIX}/../{good_id}",
        f"s3://{bucket}/{PREFIX}/./{good_id}",
        f"s3://{bucket}/{PREFIX}//{good_id}",
        f"s3://{bucket}/{PREFIX}/{good_id}\n",
    ):
        result = cli("snapshot", "verify", trick, config=deployment.config)
        assert result.code in (2, 11), (trick, result.err)
    assert _keys(client, bucket) == before
    listed = cli("snapshot", "list", "--remote", "--json", config=deployment.config).json()
    assert [row["id"] for row in listed["snapshots"]] == [good_id]


def test_a_bare_object_named_like_an_id_is_not_a_snapshot(remote, cli):
    deployment, good_id, client, bucket = remote
    client.put_object(Bucket=bucket, Key=f"{PREFIX}/{DAMAGED}", Body=b"not a snapshot")
    listed = cli("snapshot", "list", "--remote", "--json", config=deployment.config)
    assert listed.code == 0
    assert [row["id"] for row in listed.json()["snapshots"]] == [good_id]


@pytest.mark.parametrize("kind", ["dev-zero-link", "fifo"])
def test_a_manifest_that_is_no_regular_file_is_never_read(made, cli, kind):
    deployment, good = made
    copy = _damaged_copy(good, DAMAGED, b"{}")
    (copy / "manifest.json").unlink()
    if kind == "fifo":
        os.mkfifo(copy / "manifest.json")
    else:
        (copy / "manifest.json").symlink_to("/dev/zero")
    _commands_go_on(cli, deployment.config, DAMAGED)
    verified = cli("snapshot", "verify", "--json", DAMAGED, config=deployment.config)
    assert verified.code == 3 and verified.json()["findings"][0]["code"] == "manifest-missing"
    restored = cli("restore", DAMAGED, "--dry-run", config=deployment.config)
    assert restored.code == 11 and DAMAGED in restored.err, restored.err
