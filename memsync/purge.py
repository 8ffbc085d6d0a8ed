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

from memsync import check, erase, repository, snapshot
from memsync.config import Config
from memsync.errors import UnavailableError
from memsync.model import CaptureWindow, Severity
from memsync.repository import LocalRepository, S3Repository
from memsync.stores import deployment, snapshots
from memsync.stores.vector_store import VectorStore, vector_store_for

PURGING_SUFFIX = ".purging"


@dataclass(frozen=True, slots=True, kw_only=True)
class Purged:
    """Which snapshots were rewritten, re-uploaded, and which remote versions still hold text."""

    rewritten: tuple[str, ...] = ()
    uploaded: tuple[str, ...] = ()
    old_versions: tuple[str, ...] = field(default_factory=tuple)


def _scopes_left_empty(
    store: VectorStore, root: Path, window: CaptureWindow, memory_ids: Sequence[str]
) -> list[str]:
    """The session scopes whose every point is among ``memory_ids`` in the snapshot at ``root``."""
    vectors = store.open_capture(
        root / store.capture_dir, window.vectors_at, window.vectors_finished_at
    )
    points = store.read_points(vectors)
    gone = set(memory_ids)
    scopes = {check.session_scope(p.payload) for p in points.values() if p.id in gone}
    left = {check.session_scope(p.payload) for p in points.values() if p.id not in gone}
    return sorted(scopes - left)


def purge_snapshot(
    config: Config, info: snapshots.SnapshotInfo, memory_ids: Sequence[str], now: datetime
) -> None:
    """Rewrite one local snapshot without ``memory_ids``.

    The old one is removed only after the new one verifies.

    Raises:
        ConfigError: the snapshot is encrypted and no key is configured.
        UnavailableError: the rewritten snapshot fails verification (the old one is kept).
    """
    assert info.manifest is not None, "only complete snapshots are purged"
    old = info.manifest
    work = info.path.with_name(info.id + PURGING_SUFFIX)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    try:
        repository.plaintext(config, info.path, old, work, copy=True)
        store = vector_store_for(config)
        scopes = _scopes_left_empty(store, work, old.capture, memory_ids)
        store.erase_points(work / store.capture_dir, memory_ids)
        if (work / "history.db").is_file():
            erase.blank_history(work / "history.db", memory_ids, scopes, now, record=True)
        captured = deployment.from_directory(work, old.capture)
        snapshot.finish_directory(
            config,
            work,
            captured,
            info.id,
            old.created_at,
            old.created_at.date(),
            snapshot.signing_key(config),
            repository.encryption_key(config),
            journal_modes={
                entry.path: entry.journal_mode for entry in old.files if entry.journal_mode
            },
            quiesced=old.quiesced,
        )
        report = snapshot.verify_directory(config, work, now)
        broken = [
            f
            for f in report.findings
            if f.code in snapshot.VERIFY_CODES and f.severity is Severity.ERROR
        ]
        if broken:
            raise UnavailableError(
                f"the rewritten snapshot {info.id} fails verification: {broken[0].message}",
                "the old snapshot was kept",
            )
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
    bucket = repository.remote(config) if remote else None
    local = repository.local(config)
    remote_ids = {e.id for e in bucket.list() if e.complete} if bucket else set()
    for remote_id in sorted(remote_ids - {i.id for i in local.infos()}):
        assert bucket is not None
        bucket.fetch(remote_id, local.directory)
        if remote_id in set(erase.snapshots_holding(config, memory_ids)):
            holding.add(remote_id)
        else:
            local.delete(remote_id)
    for info in local.infos():
        if info.complete and info.id in holding:
            purge_snapshot(config, info, memory_ids, now)
            rewritten.append(info.id)
            if bucket is not None and info.id in remote_ids:
                _upload(local, bucket, info.id)
                uploaded.append(info.id)
        elif (
            info.complete
            and bucket is not None
            and info.id in remote_ids
            and _differs(local, bucket, info.id)
        ):
            # purged here earlier (without --remote): the bucket may still hold the old copy
            _upload(local, bucket, info.id)
            uploaded.append(info.id)
    versions = (
        [v for snapshot_id in uploaded for v in bucket.noncurrent_versions(snapshot_id)]
        if bucket
        else []
    )
    return Purged(
        rewritten=tuple(rewritten), uploaded=tuple(uploaded), old_versions=tuple(versions)
    )


def _upload(local: LocalRepository, bucket: S3Repository, snapshot_id: str) -> None:
    bucket.put(snapshot_id, local.path(snapshot_id), local.read_manifest(snapshot_id))


def _differs(local: LocalRepository, bucket: S3Repository, snapshot_id: str) -> bool:
    """Whether the bucket's copy of a complete local snapshot has another manifest."""
    try:
        return bucket.read_manifest(snapshot_id) != local.read_manifest(snapshot_id)
    except UnavailableError:
        return False
