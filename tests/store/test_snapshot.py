"""snapshot create / verify / list: real deployments, real files, damaged the way disks damage."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sqlite3
import stat
from pathlib import Path

from memsync.demo import deployment as build
from memsync.stores.sqlite_files import integrity, vacuum_into
from tests.conftest import HASH


def snapshot_dir(deployment) -> Path:
    return deployment.paths.root / "snapshots"


def create(cli, deployment, *extra):
    result = cli("snapshot", "create", "--json", *extra, config=deployment.config)
    assert result.code == 0, result.err
    return result.json()


def verify(cli, deployment, target):
    result = cli("snapshot", "verify", "--json", str(target), config=deployment.config)
    return result.code, result.json()


def codes_and_paths(report):
    return {(f["code"], Path(f["path"]).name if f["path"] else None) for f in report["findings"]}


def test_create_writes_the_contract_layout_with_a_complete_manifest(deployment, cli):
    deployment.close()
    made = create(cli, deployment)
    root = Path(made["path"])
    assert root.parent == snapshot_dir(deployment) and root.name == made["id"]
    for relative in (
        "qdrant/meta.json",
        "qdrant/collection/mem0/storage.sqlite",
        "history.db",
        "manifest.json",
    ):
        assert (root / relative).is_file(), relative
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["format"] == 1 and manifest["id"] == made["id"]
    assert {"memsync", "mem0ai", "qdrant-client", "sqlite"} <= set(manifest["versions"])
    assert {"vectors_at", "history_at"} <= set(manifest["capture"])
    assert manifest["collections"]["mem0"] == {
        "vector_size": 384,
        "distance": "Cosine",
        "points": len(deployment.seeded.live),
    }
    assert manifest["history"]["memories"] == len(deployment.seeded.live) + len(
        deployment.seeded.deleted
    )
    assert (
        manifest["integrity"]["history.db"] == "ok"
        and manifest["integrity"]["points_decoded"] is True
    )
    assert manifest["check"]["errors"] == 0
    for entry in manifest["files"]:
        data = (root / entry["path"]).read_bytes()
        assert entry["size"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    assert not list(snapshot_dir(deployment).glob("*.partial"))


def test_verify_passes_and_records_verified_json_without_touching_the_manifest(deployment, cli):
    made = create(cli, deployment)
    root = Path(made["path"])
    before = (root / "manifest.json").read_bytes()
    code, report = verify(cli, deployment, made["id"])
    assert code == 0 and report["ok"] is True
    assert not [f for f in report["findings"] if f["severity"] == "error"]
    assert json.loads((root / "verified.json").read_text())["ok"] is True
    assert (root / "manifest.json").read_bytes() == before
    listed = cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    assert [(s["id"], s["complete"], s["verified"]) for s in listed] == [(made["id"], True, True)]


def test_verify_catches_a_flipped_byte_naming_the_file(deployment, cli):
    root = Path(create(cli, deployment)["path"])
    storage = root / "qdrant/collection/mem0/storage.sqlite"
    data = bytearray(storage.read_bytes())
    data[len(data) // 2] ^= 0x01
    storage.write_bytes(bytes(data))
    code, report = verify(cli, deployment, root)
    assert code == 3
    assert codes_and_paths(report) == {("checksum-mismatch", "storage.sqlite")}


def test_verify_catches_a_truncated_history_copy(deployment, cli):
    root = Path(create(cli, deployment)["path"])
    history = root / "history.db"
    history.write_bytes(history.read_bytes()[:4096])
    code, report = verify(cli, deployment, root)
    assert code == 3 and ("checksum-mismatch", "history.db") in codes_and_paths(report)


def test_verify_catches_a_missing_manifest_and_a_missing_file(deployment, cli):
    first = Path(create(cli, deployment)["path"])
    (first / "manifest.json").unlink()
    code, report = verify(cli, deployment, first)
    assert code == 3 and codes_and_paths(report) == {("manifest-missing", "manifest.json")}
    second = Path(create(cli, deployment)["path"])
    (second / "qdrant/meta.json").unlink()
    code, report = verify(cli, deployment, second)
    assert code == 3 and codes_and_paths(report) == {("file-missing", "meta.json")}


def _rewrite_manifest_checksum(root: Path, relative: str) -> None:
    """Make the manifest agree with a changed file (as a bug or a careless edit would)."""
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for entry in manifest["files"]:
        if entry["path"] == relative:
            data = (root / relative).read_bytes()
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


def test_verify_reports_integrity_failed_when_checksums_match_a_damaged_database(deployment, cli):
    root = Path(create(cli, deployment)["path"])
    history = root / "history.db"
    data = bytearray(history.read_bytes())
    page = 4096
    data[2 * page : 3 * page] = b"\xff" * page  # a b-tree page overwritten
    history.write_bytes(bytes(data))
    _rewrite_manifest_checksum(root, "history.db")
    code, report = verify(cli, deployment, root)
    assert code == 3 and ("integrity-failed", "history.db") in codes_and_paths(report)


class Exploit:
    def __reduce__(self):
        return (os.system, ("touch /tmp/memsync-pwned",))


def test_verify_refuses_to_unpickle_a_foreign_class(deployment, cli):
    root = Path(create(cli, deployment)["path"])
    storage = root / "qdrant/collection/mem0/storage.sqlite"
    with sqlite3.connect(storage) as connection:
        connection.execute(
            "UPDATE points SET point = ? WHERE rowid = (SELECT min(rowid) FROM points)",
            (pickle.dumps(Exploit()),),
        )
    _rewrite_manifest_checksum(root, "qdrant/collection/mem0/storage.sqlite")
    code, report = verify(cli, deployment, root)
    assert code == 3 and ("point-undecodable", "storage.sqlite") in codes_and_paths(report)
    assert not Path("/tmp/memsync-pwned").exists()


def test_signed_manifest_verifies_and_tampering_is_caught_before_decoding(
    make_deployment, cli, tmp_path
):
    key = tmp_path / "signing.key"
    key.write_text("0123456789abcdef0123456789abcdef\n")
    deployment = make_deployment(count=10, extra_config="")
    text = deployment.config.read_text().replace(
        "keep_last = 3", f'keep_last = 3\nsigning_key_file = "{key}"'
    )
    deployment.config.write_text(text)
    made = create(cli, deployment)
    root = Path(made["path"])
    assert made["signed"] is True
    assert verify(cli, deployment, root)[0] == 0
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["history"]["memories"] += 1
    (root / "manifest.json").write_text(json.dumps(manifest))
    code, report = verify(cli, deployment, root)
    assert code == 3 and codes_and_paths(report) == {("signature-invalid", "manifest.json")}


def test_encrypted_snapshot_holds_no_plaintext_and_round_trips(make_deployment, cli, tmp_path):
    key = tmp_path / "snapshot.key"
    key.write_text(os.urandom(32).hex())
    deployment = make_deployment(count=0)
    secret_text = "the vault combination is 31-24-17"
    deployment.memory.add(secret_text, user_id="ana", infer=False)
    text = deployment.config.read_text().replace(
        "keep_last = 3", f'keep_last = 3\nencrypt_key_file = "{key}"'
    )
    deployment.config.write_text(text)
    made = create(cli, deployment)
    root = Path(made["path"])
    assert made["encrypted"] is True
    for path in root.rglob("*"):
        if path.is_file() and path.name not in ("manifest.json",):
            assert secret_text.encode() not in path.read_bytes(), path
    assert verify(cli, deployment, root)[0] == 0
    history = root / "history.db"
    data = bytearray(history.read_bytes())
    data[-5] ^= 0x10
    history.write_bytes(bytes(data))
    _rewrite_manifest_checksum_stored(root, "history.db")
    code, report = verify(cli, deployment, root)
    assert code == 3 and ("checksum-mismatch", "history.db") in codes_and_paths(report)


def _rewrite_manifest_checksum_stored(root: Path, relative: str) -> None:
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for entry in manifest["files"]:
        if entry["path"] == relative:
            data = (root / relative).read_bytes()
            entry["stored_size"], entry["stored_sha256"] = (
                len(data),
                hashlib.sha256(data).hexdigest(),
            )
    manifest_path.write_text(json.dumps(manifest))


def test_no_secret_from_the_config_reaches_manifest_or_output(
    make_deployment, cli, tmp_path, monkeypatch
):
    signing = tmp_path / "signing.key"
    signing.write_text("signing-secret-value-0123456789")
    monkeypatch.setenv("MEMSYNC_TEST_API_KEY", "sk-live-supersecret")
    deployment = make_deployment(count=5)
    text = deployment.config.read_text().replace(
        "keep_last = 3", f'keep_last = 3\nsigning_key_file = "{signing}"'
    )
    text += '\n[mem0.embedder.config]\napi_key = {env = "MEMSYNC_TEST_API_KEY"}\n'
    deployment.config.write_text(text)
    result = cli("snapshot", "create", "--json", "--log-level", "debug", config=deployment.config)
    assert result.code == 0, result.err
    root = Path(result.json()["path"])
    everything = result.out + result.err + (root / "manifest.json").read_text()
    assert "sk-live-supersecret" not in everything and "signing-secret-value" not in everything


def test_next_create_removes_a_stale_partial_but_not_a_running_one(deployment, cli):
    import fcntl

    base = snapshot_dir(deployment)
    base.mkdir(parents=True, exist_ok=True)
    stale = base / "20200101T000000Z.partial"
    (stale / "qdrant").mkdir(parents=True)
    (stale / ".creating").write_text("")
    running = base / "20200102T000000Z.partial"
    running.mkdir()
    holder = (running / ".creating").open("w")
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        made = create(cli, deployment)
    finally:
        holder.close()
    assert not stale.exists() and running.exists()
    assert made["removed_partials"] == [str(stale)]
    listed = cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    assert {s["id"]: s["complete"] for s in listed} == {"20200102T000000Z": False, made["id"]: True}


def test_create_without_a_snapshot_directory_is_a_config_error(deployment, cli):
    text = deployment.config.read_text()
    deployment.config.write_text(text.replace("[snapshot]\ndirectory", "[snapshot]\n# directory"))
    result = cli("snapshot", "create", config=deployment.config)
    assert result.code == 10 and "snapshot.directory" in result.err


def test_create_dry_run_writes_nothing(deployment, cli):
    result = cli("snapshot", "create", "--dry-run", "--json", config=deployment.config)
    assert result.code == 0 and result.json()["dry_run"] is True
    assert not snapshot_dir(deployment).exists()


def test_snapshot_of_a_damaged_live_store_fails_with_11_and_leaves_nothing(deployment, cli):
    deployment.close()
    history = deployment.paths.history_db
    history.write_bytes(history.read_bytes()[: history.stat().st_size // 2])
    result = cli("snapshot", "create", config=deployment.config)
    assert result.code == 11
    assert (
        not [p for p in snapshot_dir(deployment).iterdir()]
        if snapshot_dir(deployment).exists()
        else True
    )


def lose_index_write(storage: Path) -> int:
    """Delete one point's row, then put the key index's page back as it was: a lost write.

    A disk that acknowledged a write it never made leaves the table without the row and its
    index still naming it. Every page is well formed (``quick_check`` passes); only a check of
    the index against the table (``integrity_check``) sees it, and ``VACUUM INTO`` copies the
    index as it is. Returns the rowid deleted.
    """
    db = sqlite3.connect(storage)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    (root,) = db.execute(
        "SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'points'"
    ).fetchone()
    offset = (root - 1) * page_size
    with storage.open("rb") as handle:
        handle.seek(offset)
        before = handle.read(page_size)
    (rowid,) = db.execute("SELECT max(rowid) FROM points").fetchone()
    with db:
        db.execute("DELETE FROM points WHERE rowid = ?", (rowid,))
    db.close()
    with storage.open("r+b") as handle:
        handle.seek(offset)
        handle.write(before)
    return int(rowid)


def test_snapshot_of_a_store_whose_index_lost_a_write_fails_with_11(deployment, cli, tmp_path):
    """The copy's check of its index against its table, mapped or not, refuses the store."""
    deployment.close()
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    lose_index_write(storage)
    assert integrity(storage, quick=True) == "ok"  # every page is sound
    copy = tmp_path / "copy.sqlite"
    vacuum_into(storage, copy)
    verdict = integrity(copy, quick=False)
    assert "missing from index" in verdict or "wrong # of entries in index" in verdict
    assert integrity(copy, quick=False, fresh=True) == verdict
    result = cli("snapshot", "create", "--json", config=deployment.config)
    assert result.code == 11, result.out
    assert "fails PRAGMA integrity_check" in result.err and "storage.sqlite" in result.err
    assert not any(snapshot_dir(deployment).iterdir())


def test_snapshot_restorable_byte_for_byte_opens_in_mem0(deployment, cli, tmp_path):
    """The captured files are a working deployment: mem0 opens them and finds every memory."""
    deployment.close()
    root = Path(create(cli, deployment)["path"])
    restored = build.Paths(tmp_path / "restored")
    restored.root.mkdir()
    import shutil

    shutil.copytree(root / "qdrant", restored.qdrant)
    restored.mem0_dir.mkdir()
    shutil.copy(root / "history.db", restored.history_db)
    memory = build.open_memory(restored, embedder=HASH)
    try:
        for memory_id in deployment.seeded.live[:10]:
            assert memory.get(memory_id) is not None
        assert memory.get(deployment.seeded.deleted[0]) is None
    finally:
        build.close_memory(memory)


def test_a_manifest_naming_paths_outside_the_snapshot_is_refused(deployment, cli, tmp_path):
    root = Path(create(cli, deployment)["path"])
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["files"].append(
        {"path": "../../victim.txt", "size": 8, "sha256": hashlib.sha256(b"precious").hexdigest()}
    )
    (root / "manifest.json").write_text(json.dumps(manifest))
    code, report = verify(cli, deployment, root)
    assert code == 3 and report["findings"][0]["code"] == "manifest-missing"
    assert "not part of the snapshot layout" in report["findings"][0]["message"]
    assert victim.read_text() == "precious"


def test_a_file_added_to_a_snapshot_is_reported(deployment, cli):
    root = Path(create(cli, deployment)["path"])
    (root / "qdrant" / "collection" / "mem0" / "extra.sqlite").write_bytes(b"sneaky")
    code, report = verify(cli, deployment, root)
    assert code == 3 and ("checksum-mismatch", "extra.sqlite") in codes_and_paths(report)


def test_point_with_a_wrong_vector_size_fails_check_and_verify(deployment, cli):
    from qdrant_client.http import models

    deployment.close()
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    target = deployment.seeded.live[0]
    with sqlite3.connect(storage) as connection:
        rows = connection.execute("SELECT rowid, point FROM points").fetchall()
        for rowid, blob in rows:
            point = pickle.loads(blob)
            if str(point.id) == target:
                short = models.PointStruct(
                    id=point.id, vector={"": [0.1] * 5}, payload=point.payload
                )
                connection.execute(
                    "UPDATE points SET point = ? WHERE rowid = ?", (pickle.dumps(short), rowid)
                )
    report = cli("check", "--json", config=deployment.config).json()
    assert {
        (f["code"], f["memory_id"]) for f in report["findings"] if f["severity"] == "error"
    } == {("dimension-mismatch", target)}


def test_a_manifest_of_a_newer_format_is_refused_with_one_line_by_verify_list_and_restore(
    deployment, cli
):
    made = create(cli, deployment)
    root = Path(made["path"])
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["format"] = 2
    (root / "manifest.json").write_text(json.dumps(manifest))
    result = cli("snapshot", "verify", str(root), config=deployment.config)
    assert result.code == 11, result.out
    assert "format 2" in result.err and "upgrade memsync" in result.err
    listed = cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"]
    assert [(s["id"], s["complete"]) for s in listed] == [(made["id"], False)]
    restored = cli("restore", "--force", made["id"], config=deployment.config)
    assert restored.code == 11 and "upgrade memsync" in restored.err
