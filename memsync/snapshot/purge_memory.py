"""``snapshot purge-memory``: rewrite the snapshots that still hold erased memories.

Each holding snapshot is copied to ``<id>.purging/`` (decrypted when sealed), the memories'
points deleted and their history texts blanked (both files VACUUMed), the raw messages of scopes
left empty deleted, a new manifest written (new checksums, signature, sealing), and the copy
verified; only then does it replace the old snapshot, which is removed. Remote copies are
re-uploaded. With ``[s3]`` set, every run lists the noncurrent object versions of a versioned
bucket that still hold any erased memory (``erase.versions``) and ``--delete-versions``
deletes them. ``--user``/``--agent``/``--run`` find the scope's ids in the snapshots' own
payloads and in the erasure ledger.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from memsync import check, repository, snapshot
from memsync.deployment import Deployment
from memsync.erase import apply as erase
from memsync.erase import holding, ledger, versions
from memsync.errors import UnavailableError
from memsync.model import CaptureWindow, Severity
from memsync.repository import LocalRepository, S3Repository
from memsync.stores import capture, snapshots
from memsync.stores.vector_store import VectorStore

PURGING_SUFFIX = ".purging"
RETIRED_SUFFIX = ".purged-old"  # the old snapshot between the two renames of a rewrite
# Sidecars a rewrite keeps (verified.json is of the old bytes: the rewrite is verified anew).
KEPT_SIDECARS = (snapshots.PINNED, snapshots.UPLOAD_PENDING)


@dataclass(frozen=True, slots=True, kw_only=True)
class Purged:
    """What a run found and did.

    Attributes:
        memory_ids: the memories purged (given, or found for the scope).
        holding: the local snapshots that held them before the run.
        rewritten, uploaded: snapshots rewritten locally, and uploaded again.
        other_backend: holding snapshots of the other backend (taken before a ``migrate
            --switch``), not rewritten: this config's vector store cannot rewrite their files.
        scan: the noncurrent S3 versions holding any erased memory (None without ``[s3]``).
        scan_error: why the bucket's versions could not be listed ("unknown", never "none").
        scan_hint: what to do about it.
        deleted: labels of the versions deleted (``--delete-versions``).
        kept: the holding versions object lock kept, with their retention.
        failed: ``{label: why}`` of the holding versions S3 did not delete for another reason.
    """

    memory_ids: tuple[str, ...] = ()
    holding: tuple[str, ...] = ()
    rewritten: tuple[str, ...] = ()
    other_backend: tuple[str, ...] = ()
    uploaded: tuple[str, ...] = ()
    scan: versions.VersionScan | None = None
    scan_error: str | None = None
    deleted: tuple[str, ...] = ()
    kept: tuple[versions.Kept, ...] = field(default_factory=tuple)
    scan_hint: str | None = None
    failed: dict[str, str] = field(default_factory=dict)

    def to_json(self, *, dry_run: bool, scope: dict[str, str]) -> dict[str, Any]:
        """``snapshot purge-memory --json`` (docs/reference/json-output.md)."""
        scan = self.scan
        hits = [h.to_json() for h in scan.hits] if scan else []
        return {
            "command": "snapshot purge-memory",
            "dry_run": dry_run,
            "scope": scope or None,
            "memory_ids": list(self.memory_ids),
            "holding": list(self.holding),
            "rewritten": list(self.rewritten),
            "other_backend": list(self.other_backend),
            "uploaded": list(self.uploaded),
            "old_versions": [h["version"] for h in hits if h["version"] not in self.deleted],
            "versions": {
                "status": "unknown" if self.scan_error else ("checked" if scan else "no-s3"),
                "why": self.scan_error,
                "hint": self.scan_hint if self.scan_error else None,
                "holding": hits,
                "unreadable": [
                    {"version": label, "why": why} for label, why in sorted(scan.unreadable.items())
                ]
                if scan
                else [],
                "downloaded": scan.downloaded if scan else 0,
                "cached": scan.cached if scan else 0,
                "deleted": list(self.deleted),
                "kept": [k.to_json() for k in self.kept],
                "failed": [{"version": label, "why": why} for label, why in self.failed.items()],
            },
        }


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
    deployment: Deployment, info: snapshots.SnapshotInfo, memory_ids: Sequence[str], now: datetime
) -> None:
    """Rewrite one local snapshot without ``memory_ids``; removes the old one once it verifies.

    Carried over: ``pinned.json``, ``upload-pending.json``, the manifest's ``embedder``.

    Raises:
        ConfigError: the snapshot is encrypted and no key is configured.
        UnavailableError: the rewritten snapshot fails verification (the old one is kept).
    """
    config = deployment.config
    assert info.manifest is not None, "only complete snapshots are purged"
    old = info.manifest
    work = info.path.with_name(info.id + PURGING_SUFFIX)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    try:
        repository.plaintext(config, info.path, old, work, copy=True)
        store = deployment.vector_store
        scopes = _scopes_left_empty(store, work, old.capture, memory_ids)
        store.erase_points(work / store.capture_dir, memory_ids)
        if (work / "history.db").is_file():
            erase.blank_history(work / "history.db", memory_ids, scopes, now, record=True)
        captured = capture.from_directory(work, old.capture, config)
        snapshot.finish_directory(
            deployment,
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
            not_quiesced=old.not_quiesced,
            embedder=old.embedder,
            label=old.label,
        )
        report = snapshot.verify_directory(deployment, work, now)
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
        for sidecar in KEPT_SIDECARS:  # its pin and upload-pending mark stay with it
            if (info.path / sidecar).is_file():
                shutil.copy2(info.path / sidecar, work / sidecar)
        retired = info.path.with_name(info.id + RETIRED_SUFFIX)
        os.rename(info.path, retired)
        os.rename(work, info.path)
        shutil.rmtree(retired)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def purge_from(
    deployment: Deployment, snapshot_id: str, memory_ids: Sequence[str], now: datetime
) -> bool:
    """Rewrite the local snapshot ``snapshot_id`` without ``memory_ids``; False when it is gone.

    For a snapshot memsync itself just took that holds erased memories (reconcile's safety
    snapshot, captured while an older store had brought them back). Raises as ``purge_snapshot``.
    """
    for info in deployment.repository.infos():
        if info.id == snapshot_id and info.complete:
            purge_snapshot(deployment, info, memory_ids, now)
            return True
    return False


def finish_interrupted(directory: Path) -> list[str]:
    """Finish the rewrites a killed run left between its two renames; their snapshot ids.

    ``<id>.purged-old`` with no ``<id>``: the verified rewrite (``<id>.purging``) takes its
    place and the old copy is removed; without a rewrite the old copy goes back to ``<id>``
    (purged again by this run). With ``<id>`` in place, ``<id>.purged-old`` is removed.
    """
    finished = []
    for retired in sorted(directory.glob(f"*{RETIRED_SUFFIX}")):
        snapshot_id = retired.name[: -len(RETIRED_SUFFIX)]
        final, work = directory / snapshot_id, directory / f"{snapshot_id}{PURGING_SUFFIX}"
        if not final.exists():
            os.rename(work if work.is_dir() else retired, final)
        if final.is_dir():
            shutil.rmtree(retired, ignore_errors=True)
            finished.append(snapshot_id)
    return finished


def resolve_ids(
    deployment: Deployment, memory_ids: Sequence[str], scope: Mapping[str, str] | None
) -> list[str]:
    """The ids given, or the scope's: points of it in any local snapshot and erased ones.

    Memories already erased from the live store and from every local snapshot are found in
    the erasure ledger (``memsync.erase.ledger``). Reads only.
    """
    config = deployment.config
    if memory_ids or not scope:
        return sorted(set(memory_ids))
    return sorted(ledger.erased_ids(config.state_dir, scope) | holding.scope_ids(deployment, scope))


def run_purge(
    deployment: Deployment,
    memory_ids: Sequence[str],
    now: datetime,
    remote: bool,
    *,
    scope: Mapping[str, str] | None = None,
    delete_versions: bool = False,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Purged:
    """Rewrite every local snapshot holding the memories; look for them in the bucket's versions.

    With ``remote``: remote-only snapshots are downloaded first, the rewritten ones the bucket
    has are uploaded again. With ``[s3]`` set, the noncurrent versions holding any memory of
    this run or of the erasure ledger are listed (``erase.versions.scan``) on every run, and
    ``delete_versions`` deletes them. ``dry_run`` downloads and changes nothing (only the scan's
    verdict cache is written). ``progress(done, total)`` follows the versions read.

    Raises:
        ConfigError: an encrypted snapshot and no key; ``delete_versions`` without ``[s3]``.
        UnavailableError: a rewritten snapshot fails verification; S3 fails with ``remote``
            (a bucket whose versions cannot be listed is ``scan_error``, never an empty scan).
    """
    config = deployment.config
    bucket = deployment.remote if remote else None
    local = deployment.repository
    if not dry_run:
        finish_interrupted(local.directory)
    remote_ids = {e.id for e in bucket.list() if e.complete} if bucket else set()
    fetched = [] if dry_run else _fetch_remote_only(local, bucket, remote_ids)
    ids = resolve_ids(deployment, memory_ids, scope)
    held = erase.snapshots_holding(deployment, ids)
    for snapshot_id in fetched:
        if snapshot_id not in held:
            local.delete(snapshot_id)
    others = tuple(  # taken before a migrate --switch: this config cannot rewrite them
        info.id
        for info in local.infos()
        if info.id in held and info.complete and erase.other_backend(deployment, info) is not None
    )
    rewritten: list[str] = []
    uploaded: list[str] = []
    if not dry_run:
        ledger.record(config.state_dir, ids, scope, now)
        for info in local.infos():
            if not info.complete:
                continue
            if info.id in held and info.id not in others:
                purge_snapshot(deployment, info, ids, now)
                rewritten.append(info.id)
            if bucket is not None and info.id in remote_ids and _differs(local, bucket, info.id):
                # rewritten now, or purged here earlier without --remote
                _upload(local, bucket, info.id)
                uploaded.append(info.id)
    done = Purged(
        memory_ids=tuple(ids), holding=tuple(held), rewritten=tuple(rewritten),
        uploaded=tuple(uploaded), other_backend=others,
    )  # fmt: skip
    return _versions(
        deployment, done, ids, delete_versions=delete_versions and not dry_run, progress=progress
    )


def _fetch_remote_only(
    local: LocalRepository, bucket: S3Repository | None, remote_ids: set[str]
) -> list[str]:
    """Download the complete remote snapshots with no local copy; their ids."""
    if bucket is None:
        return []
    fetched = sorted(remote_ids - {i.id for i in local.infos()})
    for snapshot_id in fetched:
        bucket.fetch(snapshot_id, local.directory)
    return fetched


def _versions(
    deployment: Deployment,
    done: Purged,
    ids: Sequence[str],
    *,
    delete_versions: bool,
    progress: Callable[[int, int], None] | None,
) -> Purged:
    """Scan the bucket's noncurrent versions (and delete the holding ones when asked)."""
    config = deployment.config
    if config.s3 is None:
        if delete_versions:
            repository.object_store(config)  # raises ConfigError: --delete-versions needs [s3]
        return done
    store = repository.object_store(config)
    wanted = sorted(
        set(ids)
        | ledger.erased_ids(config.state_dir)
        | set(versions.scope_marks(sorted(ledger.erased_scopes(config.state_dir))))
    )
    try:
        scan = versions.scan(deployment, store, wanted, progress)
    except UnavailableError as error:  # the local work is done: the report says what is not known
        return replace(done, scan_error=versions.unknown_why(error), scan_hint=error.hint)
    if not delete_versions or not scan.hits:
        return replace(done, scan=scan)
    deleted, kept, failed = versions.delete(store, scan.hits)
    return replace(done, scan=scan, deleted=tuple(deleted), kept=tuple(kept), failed=failed)


def _upload(local: LocalRepository, bucket: S3Repository, snapshot_id: str) -> None:
    bucket.put(snapshot_id, local.path(snapshot_id), local.read_manifest(snapshot_id))


def _differs(local: LocalRepository, bucket: S3Repository, snapshot_id: str) -> bool:
    """Whether the bucket's copy of a complete local snapshot has another manifest."""
    try:
        return bucket.read_manifest(snapshot_id) != local.read_manifest(snapshot_id)
    except UnavailableError:
        return False
