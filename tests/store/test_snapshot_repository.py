"""One conformance suite for every snapshot repository: a local directory and a real S3 server.

Each test runs against ``LocalRepository`` (a temporary directory) and ``S3Repository`` (a
bucket on moto's S3 server on 127.0.0.1): list, read, write then commit, verify, fetch,
delete, resume. Damage is done the way it happens: behind memsync's back, on the stored bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest

from memsync.config import S3Config
from memsync.errors import UnavailableError, UsageError
from memsync.model import CaptureWindow
from memsync.repository import LocalRepository, S3Repository, SnapshotRepository
from memsync.s3 import ObjectStore
from memsync.stores.manifest import FileEntry, Manifest, ManifestTooNew

SNAPSHOT_ID = "20261201T101500Z"
FILES = ("history.db", "qdrant/collection/mem0/storage.sqlite", "qdrant/meta.json")


class Damage:
    """Changes a repository's stored bytes without going through memsync."""

    def __init__(
        self, repository: SnapshotRepository, root: Path | None, endpoint: str | None
    ) -> None:
        self.repository = repository
        self.root = root
        self.client = (
            boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1") if endpoint else None
        )

    def read(self, snapshot_id: str, path: str) -> bytes:
        if self.root is not None:
            return (self.root / snapshot_id / path).read_bytes()
        assert isinstance(self.repository, S3Repository) and self.client is not None
        store = self.repository.store
        return bytes(
            self.client.get_object(Bucket=store.bucket, Key=store.key(snapshot_id, path))[
                "Body"
            ].read()
        )

    def write(self, snapshot_id: str, path: str, data: bytes) -> None:
        if self.root is not None:
            target = self.root / snapshot_id / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            return
        assert isinstance(self.repository, S3Repository) and self.client is not None
        store = self.repository.store
        self.client.put_object(Bucket=store.bucket, Key=store.key(snapshot_id, path), Body=data)

    def remove(self, snapshot_id: str, path: str) -> None:
        if self.root is not None:
            (self.root / snapshot_id / path).unlink()
            return
        assert isinstance(self.repository, S3Repository) and self.client is not None
        store = self.repository.store
        self.client.delete_object(Bucket=store.bucket, Key=store.key(snapshot_id, path))


@pytest.fixture(params=["local", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[SnapshotRepository, Damage]:
    if request.param == "local":
        local = LocalRepository(tmp_path / "repository")
        return local, Damage(local, local.directory, None)
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("bucket")
    store = ObjectStore(
        S3Config(
            bucket=bucket, prefix="memsync/conformance", region="us-east-1", endpoint_url=endpoint
        )
    )
    remote = S3Repository(store)
    return remote, Damage(remote, None, endpoint)


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, Manifest]:
    """A complete snapshot directory (bytes stand in for the SQLite files) and its manifest."""
    root = tmp_path / "source" / SNAPSHOT_ID
    entries = []
    for index, path in enumerate(FILES):
        data = os.urandom(2048 + 977 * index)
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        entries.append(
            FileEntry(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        )
    at = datetime(2026, 12, 1, 10, 15, tzinfo=UTC)
    manifest = Manifest(
        id=SNAPSHOT_ID,
        created_at=at,
        collection="mem0",
        capture=CaptureWindow(
            vectors_at=at,
            vectors_finished_at=at,
            history_at=at,
            history_finished_at=at,
            longest_read_s=0.0123,
        ),
        files=tuple(entries),
        versions={"memsync": "test"},
        collections={"mem0": {"points": 3}},
        history={"rows": 3, "memories": 3},
        integrity={"history.db": "ok"},
        check={"errors": 0},
    )
    (root / "manifest.json").write_bytes(manifest.to_bytes())
    return root, manifest


def test_list_shows_a_committed_snapshot_and_nothing_before(place, source):
    repository, _ = place
    root, manifest = source
    assert repository.list() == []
    transfer = repository.put(SNAPSHOT_ID, root, manifest)
    assert (transfer.sent, transfer.skipped) == (3, 0)
    [entry] = repository.list()
    assert entry.id == SNAPSHOT_ID and entry.complete and entry.manifest == manifest
    assert entry.size_bytes >= manifest.size_bytes and not entry.is_verified


def test_read_manifest_and_small_json(place, source):
    repository, _ = place
    root, manifest = source
    repository.put(SNAPSHOT_ID, root, manifest)
    assert repository.read_manifest(SNAPSHOT_ID) == manifest
    assert repository.read_json(SNAPSHOT_ID, "verified.json") is None
    repository.write_json(SNAPSHOT_ID, "verified.json", {"ok": True, "errors": 0})
    repository.write_json(SNAPSHOT_ID, "verified.json", {"ok": True, "errors": 0})  # idempotent
    assert repository.read_json(SNAPSHOT_ID, "verified.json") == {"ok": True, "errors": 0}
    assert repository.list()[0].is_verified


def test_files_without_a_committed_manifest_are_not_a_snapshot(place, source, tmp_path):
    repository, _ = place
    root, manifest = source
    (root / "qdrant/meta.json").write_bytes(b"changed after the snapshot")
    with pytest.raises(UnavailableError, match="differs from its manifest"):
        repository.put(SNAPSHOT_ID, root, manifest)
    listed = repository.list()
    assert [(e.id, e.complete, e.manifest) for e in listed] == [(SNAPSHOT_ID, False, None)]
    with pytest.raises(UnavailableError, match="no manifest"):
        repository.read_manifest(SNAPSHOT_ID)
    with pytest.raises(UnavailableError, match="no manifest"):
        repository.fetch(SNAPSHOT_ID, tmp_path / "fetched")
    assert not (tmp_path / "fetched" / SNAPSHOT_ID).exists()


def test_resume_after_an_interrupted_write_sends_only_what_is_missing(place, source):
    repository, _ = place
    root, manifest = source
    good = (root / "qdrant/meta.json").read_bytes()
    (root / "qdrant/meta.json").write_bytes(b"{}")  # the write stops at the last file
    with pytest.raises(UnavailableError):
        repository.put(SNAPSHOT_ID, root, manifest)
    (root / "qdrant/meta.json").write_bytes(good)
    resumed = repository.put(SNAPSHOT_ID, root, manifest)
    assert (resumed.sent, resumed.skipped) == (1, 2)
    assert resumed.bytes == manifest.entry("qdrant/meta.json").size  # type: ignore[union-attr]
    again = repository.put(SNAPSHOT_ID, root, manifest)
    assert (again.sent, again.skipped, again.bytes) == (0, 3, 0)
    assert [(e.id, e.complete) for e in repository.list()] == [(SNAPSHOT_ID, True)]


def test_verify_passes_then_finds_a_flipped_byte_and_a_missing_file(place, source, tmp_path):
    repository, damage = place
    root, manifest = source
    repository.put(SNAPSHOT_ID, root, manifest)
    clean = repository.verify(SNAPSHOT_ID, tmp_path / "keep-1")
    assert clean.problems == () and {e.path for e in clean.passed} == set(FILES)
    for path in FILES:
        assert (clean.root / path).read_bytes() == (root / path).read_bytes()
    body = bytearray(damage.read(SNAPSHOT_ID, "history.db"))
    body[100] ^= 0xFF
    damage.write(SNAPSHOT_ID, "history.db", bytes(body))
    damage.remove(SNAPSHOT_ID, "qdrant/meta.json")
    checked = repository.verify(SNAPSHOT_ID, tmp_path / "keep-2")
    assert [(p.code, p.path) for p in checked.problems] == [
        ("checksum-mismatch", "history.db"),
        ("file-missing", "qdrant/meta.json"),
    ]
    assert [e.path for e in checked.passed] == ["qdrant/collection/mem0/storage.sqlite"]
    assert "history.db" in checked.problems[0].where


def test_verify_reports_a_file_the_manifest_does_not_list(place, source, tmp_path):
    repository, damage = place
    root, manifest = source
    repository.put(SNAPSHOT_ID, root, manifest)
    damage.write(SNAPSHOT_ID, "qdrant/extra.bin", b"added later")
    checked = repository.verify(SNAPSHOT_ID, tmp_path / "keep")
    assert [(p.code, p.path) for p in checked.problems] == [
        ("checksum-mismatch", "qdrant/extra.bin")
    ]


def test_verify_files_reads_back_only_the_named_files(place, source, tmp_path):
    repository, damage = place
    root, manifest = source
    repository.put(SNAPSHOT_ID, root, manifest)
    damage.write(SNAPSHOT_ID, "qdrant/extra.bin", b"added later")  # only a full verify looks
    body = bytearray(damage.read(SNAPSHOT_ID, "history.db"))
    body[100] ^= 0xFF
    damage.write(SNAPSHOT_ID, "history.db", bytes(body))
    damage.remove(SNAPSHOT_ID, "qdrant/meta.json")
    clean = repository.verify_files(
        SNAPSHOT_ID, ["qdrant/collection/mem0/storage.sqlite"], tmp_path / "keep-1"
    )
    assert clean.problems == ()
    assert [e.path for e in clean.passed] == ["qdrant/collection/mem0/storage.sqlite"]
    stored = clean.root / "qdrant/collection/mem0/storage.sqlite"
    assert stored.read_bytes() == (root / "qdrant/collection/mem0/storage.sqlite").read_bytes()
    checked = repository.verify_files(
        SNAPSHOT_ID, ["qdrant/meta.json", "history.db"], tmp_path / "keep-2"
    )
    assert [(p.code, p.path) for p in checked.problems] == [
        ("checksum-mismatch", "history.db"),
        ("file-missing", "qdrant/meta.json"),
    ]
    assert checked.passed == () and checked.manifest == manifest


def test_verify_files_refuses_a_path_the_manifest_does_not_list(place, source, tmp_path):
    repository, _ = place
    root, manifest = source
    repository.put(SNAPSHOT_ID, root, manifest)
    with pytest.raises(UsageError, match="not listed in the manifest"):
        repository.verify_files(SNAPSHOT_ID, ["history.db", "../outside"], tmp_path / "keep")
    with pytest.raises(UnavailableError, match="no manifest"):
        repository.verify_files("20261201T101501Z", ["history.db"], tmp_path / "keep")


def test_fetch_checks_every_byte_and_leaves_nothing_partial(place, source, tmp_path):
    repository, damage = place
    root, manifest = source
    repository.put(SNAPSHOT_ID, root, manifest)
    fetched = repository.fetch(SNAPSHOT_ID, tmp_path / "fetched")
    assert fetched == tmp_path / "fetched" / SNAPSHOT_ID
    for path in (*FILES, "manifest.json"):
        assert (fetched / path).read_bytes() == (root / path).read_bytes()
    body = bytearray(damage.read(SNAPSHOT_ID, "qdrant/collection/mem0/storage.sqlite"))
    body[0] ^= 0x01
    damage.write(SNAPSHOT_ID, "qdrant/collection/mem0/storage.sqlite", bytes(body))
    with pytest.raises(UnavailableError, match="differs from its manifest"):
        repository.fetch(SNAPSHOT_ID, tmp_path / "again")
    assert list((tmp_path / "again").iterdir()) == []


def test_delete_removes_the_manifest_and_is_idempotent(place, source):
    repository, _ = place
    root, manifest = source
    repository.put(SNAPSHOT_ID, root, manifest)
    repository.delete(SNAPSHOT_ID)
    assert repository.list() == []
    with pytest.raises(UnavailableError):
        repository.read_manifest(SNAPSHOT_ID)
    repository.delete(SNAPSHOT_ID)
    repository.delete("20200101T000000Z")


def test_a_newer_manifest_format_is_refused_with_upgrade_hint(place, source):
    repository, damage = place
    root, manifest = source
    repository.put(SNAPSHOT_ID, root, manifest)
    document = {**manifest.to_json(), "format": 2}
    damage.write(SNAPSHOT_ID, "manifest.json", json.dumps(document).encode())
    with pytest.raises(ManifestTooNew, match="format 2") as refused:
        repository.read_manifest(SNAPSHOT_ID)
    assert refused.value.exit_code == 11 and "upgrade memsync" in (refused.value.hint or "")
    assert [(e.id, e.complete) for e in repository.list()] == [(SNAPSHOT_ID, False)]


def test_a_pin_is_stored_beside_the_snapshot_and_never_counts_as_its_content(
    place, source, tmp_path
):
    from memsync.errors import UsageError
    from memsync.snapshot import pins

    repository, _ = place
    root, manifest = source
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    with pytest.raises(UsageError, match="not stored"):
        pins.pin(repository, SNAPSHOT_ID, reason="before the drop", by="tripwire", now=now)
    assert repository.list() == []  # refusing wrote nothing, not even a stray pinned.json
    repository.put(SNAPSHOT_ID, root, manifest)
    written = pins.pin(repository, SNAPSHOT_ID, reason="before the drop", by="tripwire", now=now)
    [entry] = repository.list()
    assert (
        pins.pin_of(entry)
        == written
        == {
            "pinned": True,
            "reason": "before the drop",
            "by": "tripwire",
            "at": "2026-12-01T12:00:00Z",
        }
    )
    check = repository.verify(SNAPSHOT_ID, tmp_path / "keep")
    assert check.problems == () and len(check.passed) == len(FILES)  # a sidecar, not unlisted
    assert pins.unpin(repository, SNAPSHOT_ID, now=now) is True
    [entry] = repository.list()
    assert pins.pin_of(entry) is None and entry.pin is not None
    assert entry.pin["unpinned_at"] == "2026-12-01T12:00:00Z"  # the record stays
    assert pins.unpin(repository, SNAPSHOT_ID, now=now) is False  # idempotent
    repository.delete(SNAPSHOT_ID)
    assert repository.list() == [] and not repository.exists(SNAPSHOT_ID)
