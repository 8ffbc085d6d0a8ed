"""``snapshot prune``: retention applied to the local directory and the bucket together.

``survey`` lists both sides (and the bucket's incomplete multipart uploads) into candidates for
the pure ``retention.plan_retention``; ``apply_retention`` deletes what it removes, on every side named
(a bucket loses the manifest object first, then the objects, then the snapshot's incomplete
multipart uploads are aborted); ``versions_left`` and ``purge_versions`` deal with the
noncurrent versions a versioned bucket keeps of removed snapshots (object lock wins: a locked
version stays until its retention ends).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from memsync import repository
from memsync.config import Config
from memsync.repository import (
    Entry,
    LocalRepository,
    S3Repository,
    SnapshotRepository,
    upload_marks,
)
from memsync.s3 import MultipartUpload, ObjectLockedError, ObjectVersion
from memsync.snapshot.retention import Candidate, PruneDecision, merge
from memsync.stores.manifest_schema import ID_PATTERN, valid_id

logger = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sides:
    """The repositories one prune covers (None: not covered).

    ``uploading``: ids of local snapshots marked upload-pending (``upload-pending.json``),
    read from the snapshot directory even when only the bucket is covered.
    """

    local: LocalRepository | None
    remote: S3Repository | None
    uploading: frozenset[str] = frozenset()

    def named(self) -> dict[str, SnapshotRepository]:
        """``{"local": ..., "remote": ...}`` of the covered sides."""
        found: dict[str, SnapshotRepository] = {}
        if self.local is not None:
            found["local"] = self.local
        if self.remote is not None:
            found["remote"] = self.remote
        return found


def open_sides(config: Config, *, local_only: bool = False, remote_only: bool = False) -> Sides:
    """The snapshot directory and, with ``[s3]``, the bucket (or only one of them).

    Reads the snapshot directory's upload-pending markers.

    Raises:
        ConfigError: the side asked for is not configured, or neither is.
    """
    uploading = frozenset(i.id for i in upload_marks.pending(config.snapshot.directory))
    if remote_only:
        return Sides(local=None, remote=repository.remote(config), uploading=uploading)
    if local_only:
        return Sides(local=repository.local(config), remote=None, uploading=uploading)
    sides = Sides(
        local=repository.local_or_none(config),
        remote=repository.remote(config) if config.s3 is not None else None,
        uploading=uploading,
    )
    if sides.local is None and sides.remote is None:
        repository.local(config)  # raises the usual ConfigError
    return sides


@dataclass(frozen=True, slots=True, kw_only=True)
class Survey:
    """What prune found: one candidate per id, and the bucket's incomplete uploads by id."""

    candidates: list[Candidate]
    uploads: dict[str, list[MultipartUpload]] = field(default_factory=dict)


def survey(sides: Sides) -> Survey:
    """List every side and the bucket's incomplete multipart uploads. Reads only.

    An id with only incomplete multipart uploads (an upload killed in its first file) is an
    incomplete remote snapshot too. A candidate whose local copy is marked upload-pending
    says so (``Candidate.upload_pending``): its remote part may be an upload running now.

    Raises:
        UnavailableError: a side is unreachable.
    """
    listed: dict[str, list[Entry]] = {name: repo.list() for name, repo in sides.named().items()}
    uploads: dict[str, list[MultipartUpload]] = {}
    if sides.remote is not None:
        uploads = _uploads_by_id(sides.remote)
        known = {entry.id for entry in listed["remote"]}
        listed["remote"] += [
            Entry(id=i, complete=False, manifest=None, verified=None, size_bytes=0)
            for i in sorted(set(uploads) - known)
        ]
    return Survey(candidates=merge(listed, sides.uploading), uploads=uploads)


def _uploads_by_id(remote: S3Repository) -> dict[str, list[MultipartUpload]]:
    store = remote.store
    base = store.key("") + "/" if store.prefix else ""
    found: dict[str, list[MultipartUpload]] = {}
    for upload in store.list_multipart_uploads(base):
        snapshot_id, _, name = upload.key[len(base) :].partition("/")
        if name and ID_PATTERN.match(snapshot_id) and valid_id(snapshot_id):
            found.setdefault(snapshot_id, []).append(upload)
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class Removed:
    """What ``apply_retention`` deleted: snapshot ids, and the multipart uploads it aborted."""

    ids: list[str]
    aborted: list[MultipartUpload]


def apply_retention(
    sides: Sides,
    decisions: Sequence[PruneDecision],
    uploads: dict[str, list[MultipartUpload]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Removed:
    """Delete each snapshot a decision removes, from every side in its ``remove_from``.

    Each goes through ``SnapshotRepository.delete`` (the manifest first, so a snapshot is
    incomplete by construction from then on, then everything else); in the bucket the
    snapshot's incomplete multipart uploads are aborted after it. Idempotent.

    Raises:
        UnavailableError: a side fails; the snapshots removed before stay removed.
    """
    named = sides.named()
    removals = [d for d in decisions if not d.keep]
    ids: list[str] = []
    aborted: list[MultipartUpload] = []
    for done, decision in enumerate(removals, start=1):
        for side in decision.remove_from:
            named[side].delete(decision.id)
            if side == "remote" and sides.remote is not None:
                pending = (uploads or {}).get(decision.id, [])
                sides.remote.store.abort_multipart_uploads(pending)
                aborted += pending
            logger.info("snapshot_removed", snapshot_id=decision.id, where=named[side].where)
        ids.append(decision.id)
        if progress is not None:
            progress(done, len(removals))
    return Removed(ids=ids, aborted=aborted)


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionsLeft:
    """Object versions a versioned bucket keeps of removed snapshots.

    Attributes:
        versioning: the bucket's versioning status (``"Enabled"`` or ``"Suspended"``).
        snapshot_ids: the removed snapshots that still have versions, sorted.
        versions: every version and delete marker under their prefixes.
    """

    versioning: str
    snapshot_ids: tuple[str, ...]
    versions: tuple[ObjectVersion, ...]

    @property
    def count(self) -> int:
        """Versions holding bytes (delete markers are not counted)."""
        return sum(1 for v in self.versions if not v.delete_marker)

    @property
    def size_bytes(self) -> int:
        """Bytes those versions hold (billed until deleted)."""
        return sum(v.size for v in self.versions)


def versions_left(remote: S3Repository, removing: Sequence[str] = ()) -> VersionsLeft | None:
    """The versions kept of removed snapshots; None in a bucket that never had versioning.

    A removed snapshot is an id under the prefix with no current object left (only noncurrent
    versions and delete markers: removed by this prune or an earlier one), or one of
    ``removing`` (a dry run: removal would make its current objects noncurrent). Reads only.

    Raises:
        UnavailableError: the bucket is unreachable.
    """
    store = remote.store
    settings = store.bucket_settings()
    if settings.versioning == "Off":
        return None
    base = store.key("") + "/" if store.prefix else ""
    grouped: dict[str, list[ObjectVersion]] = {}
    for version in store.list_versions(base):
        snapshot_id, _, name = version.key[len(base) :].partition("/")
        if name and ID_PATTERN.match(snapshot_id) and valid_id(snapshot_id):
            grouped.setdefault(snapshot_id, []).append(version)
    gone = sorted(
        snapshot_id
        for snapshot_id, versions in grouped.items()
        if snapshot_id in removing or not any(v.latest and not v.delete_marker for v in versions)
    )
    return VersionsLeft(
        versioning=settings.versioning,
        snapshot_ids=tuple(gone),
        versions=tuple(v for snapshot_id in gone for v in grouped[snapshot_id]),
    )


def purge_versions(remote: S3Repository, left: VersionsLeft, removed: int) -> int:
    """Delete every version and delete marker in ``left`` for good; return the versions deleted.

    Raises:
        ObjectLockedError: object lock refused some (the others are gone; the removed
            snapshots stay removed). The message says so.
        UnavailableError: the bucket is unreachable.
    """
    try:
        remote.store.delete_versions(list(left.versions))
    except ObjectLockedError as error:
        raise ObjectLockedError(
            f"snapshot prune removed {removed} snapshot(s) but could not delete their old "
            f"versions: {error.message}",
            error.hint,
        ) from error
    logger.info("snapshot_versions_deleted", versions=left.count, bytes=left.size_bytes)
    return left.count


@dataclass(frozen=True, slots=True, kw_only=True)
class Pruned:
    """What ``snapshot prune`` decided and did.

    ``left``: the versions a versioned bucket keeps of removed snapshots (a ``VersionsLeft``),
    why they could not be listed (a string), or None (no ``[s3]``, or never versioned);
    ``purged``: versions ``--purge-versions`` deleted.
    """

    dry_run: bool
    sides: Sides
    found: Survey
    decisions: tuple[PruneDecision, ...]
    removed: Removed
    left: VersionsLeft | str | None
    purged: int

    def to_json(self) -> dict[str, Any]:
        """``snapshot prune --json`` (docs/reference/json-output.md)."""
        removing = {d.id for d in self.decisions if not d.keep}
        return {
            "command": "snapshot prune",
            "dry_run": self.dry_run,
            "sides": list(self.sides.named()),
            "decisions": [
                {
                    "id": d.id,
                    "sides": list(d.sides),
                    "keep": d.keep,
                    "action": "keep" if d.keep else "remove",
                    "reasons": list(d.reasons),
                    "remove_from": list(d.remove_from),
                }
                for d in self.decisions
            ],
            "skipped_incomplete": [
                c.id for c in self.found.candidates if not c.complete and c.id not in removing
            ],
            "removed": self.removed.ids,
            "aborted_uploads": [
                {"key": u.key, "upload_id": u.upload_id} for u in self.removed.aborted
            ],
            "versions": self._versions_json(),
        }

    def _versions_json(self) -> dict[str, Any] | None:
        left = self.left
        if left is None:
            return None
        if isinstance(left, str):
            return {"error": left}
        return {
            "versioning": left.versioning,
            "snapshots": list(left.snapshot_ids),
            "left": 0 if self.purged else left.count,
            "left_bytes": 0 if self.purged else left.size_bytes,
            "purged": self.purged,
        }
