"""restore's fast path: a snapshot its create verified is checked by its sha256 while it is copied.

A snapshot whose manifest records a clean verification (integrity ok, every point decoded) is
staged in one pass that hashes every file; when every hash matches, the decode and judge of a
full verification is not done again, and the check after the swap is the manifest's judgement
of those same bytes, once the files in place are shown to be the staged ones. Anything else
(a byte that differs, a failed later verification, a manifest that records no clean
verification, a create that judged errors) takes the full path, with today's findings and exit
codes. Real deployments, real snapshot files damaged on disk.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from tests.process.test_cli import fingerprint

HASHED = {"snapshot": "hashed", "check_after": "recorded"}


def _snapshot(cli, deployment) -> str:
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code in (0, 3), made.err
    return made.json()["id"]


def _manifest(deployment, snapshot_id: str) -> dict:
    path = deployment.paths.root / "snapshots" / snapshot_id / "manifest.json"
    return json.loads(path.read_text())


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _leftovers(deployment) -> list[Path]:
    return [
        path
        for target in (deployment.paths.qdrant, deployment.paths.history_db)
        for path in target.parent.glob(f"{target.name}.restore-*")
    ]


def test_a_snapshot_its_create_verified_is_restored_by_its_hashes_and_recorded_check(
    deployment, cli
):
    snapshot_id = _snapshot(cli, deployment)
    manifest = _manifest(deployment, snapshot_id)
    restored = cli("restore", snapshot_id, "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.err
    report = restored.json()
    assert report["verification"] == HASHED
    # the full verification records a verdict beside the snapshot; the fast path records none
    assert not (deployment.paths.root / "snapshots" / snapshot_id / "verified.json").exists()
    checked = cli("check", "--json", config=deployment.config).json()["counts"]
    assert {key: checked[key] for key in report["check_after"]} == report["check_after"]
    assert report["check_after"]["points"] == len(deployment.seeded.live)
    for entry in manifest["files"]:
        relative = entry["path"]
        live = (
            deployment.paths.history_db
            if relative == "history.db"
            else deployment.paths.qdrant / relative.removeprefix("qdrant/")
        )
        if entry.get("journal_mode") != "wal":  # WAL is put back in the header after the hash
            assert hashlib.sha256(live.read_bytes()).hexdigest() == entry["sha256"], relative
    text = cli("restore", snapshot_id, "--force", config=deployment.config)
    assert text.code == 0 and "the verification its create recorded stands" in text.out
    assert deployment.reopen().get(deployment.seeded.live[0]) is not None


@pytest.mark.parametrize("damaged", ["history.db", "qdrant/collection/mem0/storage.sqlite"])
def test_a_flipped_byte_gets_the_full_verification_and_refuses_as_before(deployment, cli, damaged):
    snapshot_id = _snapshot(cli, deployment)
    snapshot = deployment.paths.root / "snapshots" / snapshot_id
    _flip_a_byte(snapshot / damaged)
    before = fingerprint(deployment.paths.root)
    refused = cli("restore", snapshot_id, "--force", "--json", config=deployment.config)
    assert refused.code == 11
    error = json.loads(refused.err.strip().splitlines()[-1])
    assert error["message"] == (
        f"snapshot {snapshot_id} fails verification: checksum-mismatch {snapshot / damaged}"
    )
    assert fingerprint(deployment.paths.root) == before
    assert _leftovers(deployment) == []
    verdict = json.loads((snapshot / "verified.json").read_text())  # the full path ran
    assert verdict["ok"] is False and verdict["codes"] == ["checksum-mismatch"]


def test_an_encrypted_snapshot_is_decrypted_while_it_is_copied(deployment, cli, tmp_path):
    key = tmp_path / "snapshot.key"
    key.write_bytes(bytes(range(32)))
    deployment.config.write_text(
        deployment.config.read_text().replace(
            "[snapshot]\n", f'[snapshot]\nencrypt_key_file = "{key}"\n'
        )
    )
    snapshot_id = _snapshot(cli, deployment)
    assert _manifest(deployment, snapshot_id)["encryption"]
    restored = cli("restore", snapshot_id, "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.err
    assert restored.json()["verification"] == HASHED
    assert restored.json()["check_after"]["points"] == len(deployment.seeded.live)
    deployment.close()
    snapshot_dir = deployment.paths.root / "snapshots" / snapshot_id
    _flip_a_byte(snapshot_dir / "history.db")
    refused = cli("restore", snapshot_id, "--force", config=deployment.config)
    assert refused.code == 11 and f"checksum-mismatch {snapshot_dir}/history.db" in refused.err
    assert _leftovers(deployment) == []


def test_a_snapshot_without_a_clean_recorded_verification_is_verified_in_full(deployment, cli):
    snapshot_id = _snapshot(cli, deployment)
    snapshot = deployment.paths.root / "snapshots" / snapshot_id
    # a later verification that failed (here written as snapshot verify writes one)
    (snapshot / "verified.json").write_text(json.dumps({"ok": False, "codes": ["x"]}))
    restored = cli("restore", snapshot_id, "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.err
    assert restored.json()["verification"] == {"snapshot": "full", "check_after": "full"}
    assert json.loads((snapshot / "verified.json").read_text())["ok"] is True  # verified again
    # a manifest that records no decode of its points (as no create of this memsync writes)
    second = _snapshot(cli, deployment)
    path = deployment.paths.root / "snapshots" / second / "manifest.json"
    document = json.loads(path.read_text())
    del document["integrity"]["points_decoded"]
    path.write_text(json.dumps(document))
    again = cli("restore", second, "--force", "--json", config=deployment.config)
    assert again.code == 0, again.err
    assert again.json()["verification"]["snapshot"] == "full"


def test_the_check_after_runs_in_full_when_the_create_judged_errors(deployment, cli):
    deployment.close()
    with sqlite3.connect(deployment.paths.history_db) as db:  # a point loses its history
        db.execute("DELETE FROM history WHERE memory_id = ?", (deployment.seeded.live[0],))
    db.close()
    snapshot_id = _snapshot(cli, deployment)
    assert _manifest(deployment, snapshot_id)["check"]["errors"] >= 1
    restored = cli("restore", snapshot_id, "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.err
    report = restored.json()
    assert report["verification"] == {"snapshot": "hashed", "check_after": "full"}
    checked = cli("check", "--json", config=deployment.config).json()["counts"]
    assert {key: checked[key] for key in report["check_after"]} == report["check_after"]
    assert report["check_after"]["errors"] >= 1


def test_a_plain_file_is_hashed_behind_the_kernels_copy_as_written(tmp_path, monkeypatch):
    import importlib

    from memsync.stores.snapshots import sha256_file

    plaintext = importlib.import_module("memsync.repository.plaintext")  # the package's
    # ``plaintext`` is a function of that module
    monkeypatch.setattr(plaintext, "_SENDFILE_BYTES", 64 * 1024)  # many looks of the hasher
    source = tmp_path / "storage.sqlite"
    source.write_bytes(bytes(range(256)) * 1200 + b"tail")  # 300 KiB: five sendfile steps
    source.chmod(0o640)
    target = tmp_path / "copy.sqlite"
    assert plaintext._copy_hashed(source, target) == sha256_file(source)
    assert target.read_bytes() == source.read_bytes()
    assert (target.stat().st_mode, target.stat().st_mtime_ns) == (
        source.stat().st_mode,
        source.stat().st_mtime_ns,
    )
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert plaintext._copy_hashed(empty, target) == (0, hashlib.sha256().hexdigest())
    assert target.read_bytes() == b""
