"""``snapshot purge-memory``: rewrite the snapshots that still hold erased memories.

Each holding snapshot is copied to ``<id>.purging/`` (decrypted when sealed), the memories'
points deleted and their history texts blanked (both files VACUUMed), the raw messages of scopes
left empty deleted, a new manifest written (new checksums, signature, sealing), and the copy
verified; only then does it replace the old snapshot, which is removed. Remote copies are
re-uploaded; with S3 versioning on, the older object versions that still hold the text are listed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from memsync import check, erase, seal, snapshot
from memsync.config import Config
from memsync.errors import UnavailableError
from memsync.model import Severity
from memsync.s3 import ObjectStore
from memsync.stores import deployment, local_qdrant, snapshots

PURGING_SUFFIX = ".purging"


@dataclass(frozen=True, slots=True, kw_only=True)
class Purged:
    """Which snapshots were rewritten, re-uploaded, and which remote versions still hold text."""

    rewritten: tuple[str, ...] = ()
    uploaded: tuple[str, ...] = ()
    old_versions: tuple[str, ...] = field(default_factory=tuple)


def _copy_plain(config: Config, info: snapshots.SnapshotInfo, target: Path) -> None:
    manifest = info.manifest or {}
    key = seal.load_key(config.snapshot.encrypt_key_file) if manifest.get("encryption") and \
        config.snapshot.encrypt_key_file else None
    if manifest.get("encryption") and key is None:
        raise UnavailableError(f"snapshot {info.id} is encrypted and no snapshot.encrypt_key_file is set")
    seal.open_files(info.path, [str(e["path"]) for e in manifest.get("files", [])], key, target)


def _scopes_left_empty(root: Path, collection: str, memory_ids: Sequence[str]) -> list[str]:
    storage = local_qdrant.storage_path(root / "qdrant", collection)
    if not storage.is_file():
        return []
    points = local_qdrant.read_points(storage)
    gone = set(memory_ids)
    scopes = {check.session_scope(p.payload) for p in points.values() if p.id in gone}
    left = {check.session_scope(p.payload) for p in points.values() if p.id not in gone}
    return sorted(scopes - left)


def purge_snapshot(config: Config, info: snapshots.SnapshotInfo, memory_ids: Sequence[str], now: datetime) -> None:
    """Rewrite one local snapshot without ``memory_ids``.

    The old one is removed only after the new one verifies.

    Raises:
        UnavailableError: the rewritten snapshot fails verification (the old one is kept).
    """
    work = info.path.with_name(info.id + PURGING_SUFFIX)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    try:
        _copy_plain(config, info, work)
        scopes = _scopes_left_empty(work, config.collection, memory_ids)
        for storage in sorted(work.glob("qdrant/collection/*/storage.sqlite")):
            erase.delete_points(storage, memory_ids)
        if (work / "history.db").is_file():
            erase.blank_history(work / "history.db", memory_ids, scopes, now, record=True)
        old = info.manifest or {}
        window = snapshot.window_from_manifest(old)
        captured = deployment.from_directory(work, window)
        created = datetime.fromisoformat(str(old.get("created_at", now.isoformat())).replace("Z", "+00:00"))
        snapshot.finish_directory(
            config, work, captured, info.id, created, created.date(),
            snapshot._signing_key(config.snapshot), snapshot._encryption_key(config.snapshot),
        )
        report = snapshot.verify_directory(config, work, now)
        broken = [f for f in report.findings if f.code in snapshot.VERIFY_CODES and f.severity is Severity.ERROR]
        if broken:
            raise UnavailableError(f"the rewritten snapshot {info.id} fails verification: {broken[0].message}",
                                   "the old snapshot was kept")
        retired = info.path.with_name(info.id + ".purged-old")
        os.rename(info.path, retired)
        os.rename(work, info.path)
        shutil.rmtree(retired)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def run_purge(config: Config, memory_ids: Sequence[str], now: datetime, remote: bool) -> Purged:
    """Rewrite every local snapshot holding ``memory_ids``.

    With ``remote``: re-upload the rewritten ones the bucket has, download and rewrite the
    remote-only ones, and list the older object versions that still hold the text.
    """
    holding = set(erase.snapshots_holding(config, memory_ids))
    rewritten: list[str] = []
    uploaded: list[str] = []
    versions: list[str] = []
    store = snapshot.object_store(config) if remote else None
    remote_ids = {item["id"] for item in snapshot.remote_candidates(store) if item["complete"]} if store else set()
    directory = snapshot.snapshot_dir(config)
    for remote_id in sorted(remote_ids - {i.id for i in snapshots.iter_local(directory)}):
        assert store is not None
        snapshot.download_snapshot(config, store, remote_id, directory)
        if remote_id in set(erase.snapshots_holding(config, memory_ids)):
            holding.add(remote_id)
        else:
            shutil.rmtree(directory / remote_id)
    for info in snapshots.iter_local(directory):
        if info.complete and info.id in holding:
            purge_snapshot(config, info, memory_ids, now)
            rewritten.append(info.id)
            if store is not None and info.id in remote_ids:
                snapshot.upload_snapshot(config, info.path, store=store)
                uploaded.append(info.id)
        elif info.complete and store is not None and info.id in remote_ids:
            # purged here earlier (without --remote): the bucket may still hold the old copy
            in_bucket = store.get_bytes(store.key(info.id, snapshots.MANIFEST))
            if in_bucket is not None and in_bucket != (info.path / snapshots.MANIFEST).read_bytes():
                snapshot.upload_snapshot(config, info.path, store=store)
                uploaded.append(info.id)
    if store is not None:
        versions = _old_versions(store, uploaded)
    return Purged(rewritten=tuple(rewritten), uploaded=tuple(uploaded), old_versions=tuple(versions))


def _old_versions(store: ObjectStore, snapshot_ids: Sequence[str]) -> list[str]:
    """Non-current object versions under the rewritten snapshots (versioned buckets only)."""
    found: list[str] = []
    for snapshot_id in snapshot_ids:
        found += store.noncurrent_versions(store.key(snapshot_id) + "/")
    return found
