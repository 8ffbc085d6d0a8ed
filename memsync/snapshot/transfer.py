"""``snapshot upload`` and ``download``: a complete local snapshot to S3 and back, via the port.

Upload is ``S3Repository.put`` (every file with its sha256, the manifest last, resuming): the
local snapshot is marked pending (``repository.upload_marks``) until the manifest object is
committed, and the incomplete multipart uploads an interrupted attempt left under the snapshot's
prefix are aborted before it resumes. ``repair`` reads the stored objects back
(``SnapshotRepository.verify``) and sends again those that fail. Download is ``fetch`` (into
``<id>.partial/``, every byte checked, renamed only then).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from memsync.config import Config
from memsync.errors import MemsyncError, UnavailableError
from memsync.repository import S3Repository, SnapshotRepository, remote, upload_marks
from memsync.repository.port import BytesProgress
from memsync.s3 import TransportError
from memsync.stores import manifest as manifests
from memsync.stores import snapshots
from memsync.stores.manifest import FileEntry, Manifest
from memsync.stores.snapshots import PINNED, sha256_file

if TYPE_CHECKING:  # boto3 loads only where a bucket is opened
    from memsync.s3 import ObjectStore

logger = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Downloaded:
    """``snapshot download``: the snapshot and the directory it was verified into."""

    id: str
    path: Path

    def to_json(self) -> dict[str, Any]:
        """``snapshot download --json``."""
        return {"command": "snapshot download", "id": self.id, "path": str(self.path)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Uploaded:
    """``snapshot upload``: what ``upload_snapshot`` reported, or (a dry run) what it would send.

    ``result``: ``upload_snapshot``'s report (None on a dry run); ``files``: a dry run's files.
    """

    id: str
    to: str
    result: dict[str, Any] | None = None
    files: tuple[FileEntry, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``snapshot upload --json`` (docs/reference/json-output.md)."""
        if self.result is None:
            return {
                "command": "snapshot upload",
                "dry_run": True,
                "id": self.id,
                "files": [f.path for f in self.files],
                "to": self.to,
            }
        return {"command": "snapshot upload", "id": self.id, **self.result, "to": self.to}


def upload_snapshot(
    config: Config,
    directory: Path,
    progress: BytesProgress | None = None,
    store: ObjectStore | None = None,
    *,
    repair: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Upload a complete local snapshot directory; ``store`` defaults to the configured bucket.

    Marks the snapshot pending first (``upload-pending.json``; ``now`` defaults to the clock),
    aborts the incomplete multipart uploads under its prefix, sends what is missing (with
    ``repair``: also every object whose stored bytes fail the manifest), commits the manifest,
    pins the uploaded copy when the local one is pinned, and clears the mark. Idempotent. Returns ``{"sent": n, "skipped": n, "bytes": n,
    "aborted_uploads": n}`` and with ``repair`` ``"repaired": [paths]``.

    Raises:
        ConfigError: no ``[s3]`` section.
        UnavailableError: the snapshot is incomplete or changed since it was made, or S3 fails
            (the snapshot stays local and pending; nothing local is removed).
    """
    manifest = manifests.read(directory)
    target = S3Repository(store) if store is not None else remote(config)
    upload_marks.begin(directory, now or datetime.now(UTC), target.where)
    try:
        aborted = abort_incomplete(target, directory.name)
        if repair:
            result = _repair(target, directory, manifest, progress)
        else:
            result = target.put(directory.name, directory, manifest, progress).to_json()
        _carry_pin(target, directory)
    except MemsyncError as error:
        upload_marks.failed(directory, error.message)
        raise
    upload_marks.done(directory)
    return {**result, "aborted_uploads": aborted}


def _carry_pin(target: S3Repository, directory: Path) -> None:
    """Pin the uploaded copy when the local one is pinned (idempotent).

    A tripwire pin can be made while the upload is pending; retention over the bucket alone
    (``--remote-only``) must keep the uploaded copy too.
    """
    pin = snapshots.read_json(directory / PINNED)
    if pin is not None and pin.get("pinned") is True:
        target.write_json(directory.name, PINNED, pin)


def abort_incomplete(target: S3Repository, snapshot_id: str) -> int:
    """Abort the incomplete multipart uploads under a snapshot's prefix; return how many.

    Raises:
        UnavailableError: S3 fails.
    """
    uploads = target.store.list_multipart_uploads(
        target.store.key(snapshot_id) + "/",
        f"upload {snapshot_id} (looking for its incomplete multipart uploads first)",
    )
    if uploads:
        target.store.abort_multipart_uploads(uploads)
        logger.info("multipart_uploads_aborted", snapshot_id=snapshot_id, count=len(uploads))
    return len(uploads)


def _repair(
    target: S3Repository, directory: Path, manifest: Manifest, progress: BytesProgress | None
) -> dict[str, Any]:
    """Read every stored object back; send again each one missing or differing, then the rest.

    A remote snapshot without a readable manifest has every file sent again.
    """
    snapshot_id = directory.name
    listed = {entry.path for entry in manifest.files}
    with tempfile.TemporaryDirectory(prefix="memsync-repair-") as keep:
        try:
            check = target.verify(snapshot_id, Path(keep))
            bad = sorted({p.path for p in check.problems if p.path in listed})
        except TransportError:
            raise
        except UnavailableError as error:  # no manifest, or not a valid one: trust nothing
            logger.info("repair_all", snapshot_id=snapshot_id, reason=error.message)
            bad = sorted(listed)
    entries = {entry.path: entry for entry in manifest.files}
    for path in bad:
        local = directory / path
        if not local.is_file() or sha256_file(local) != entries[path].stored:
            raise UnavailableError(
                f"{local} differs from its manifest: it cannot repair {target.location(snapshot_id, path)}",
                f"memsync snapshot verify {snapshot_id}; repair from another snapshot",
            )
        target.store.put_file(
            target.store.key(snapshot_id, path),
            local,
            entries[path].stored[1],
            progress,
            force=True,
        )
    result = target.put(snapshot_id, directory, manifest, progress).to_json()
    logger.info("snapshot_repaired", snapshot_id=snapshot_id, repaired=len(bad))
    return {**result, "sent": result["sent"] + len(bad), "repaired": bad}


def download_snapshot(
    repository: SnapshotRepository,
    snapshot_id: str,
    dest_parent: Path,
    progress: BytesProgress | None = None,
) -> Path:
    """Download a snapshot into ``dest_parent/<id>/``, verifying every byte first.

    Raises:
        UnavailableError: incomplete, an object missing or differing, or S3 unreachable;
            nothing partial is left.
        UsageError: ``dest_parent/<id>`` already exists.
    """
    return repository.fetch(snapshot_id, dest_parent, progress)
