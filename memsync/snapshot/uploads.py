"""``snapshot create --upload``: pending uploads first, a capture only when due, pending bounded.

A snapshot whose upload failed (or was killed) stays local, marked pending
(``repository.upload_marks``). Each ``snapshot create --upload`` first uploads the pending ones,
oldest first, stopping at the first failure; then ``plan_capture`` decides whether to capture:
not with ``--pending-only``; not when ``--if-due EVERY`` is given (the daemon's snapshot job) and
the newest complete local snapshot is younger than 90 % of EVERY; not when S3 failed and
``[snapshot] max_pending_uploads`` snapshots already wait (exit 11: retries of a failing job
make no more full local copies). A new snapshot is uploaded at once, or, when S3 just failed,
only marked pending (no second wait on a dead endpoint).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memsync import utc
from memsync.config import Config
from memsync.errors import MemsyncError, UnavailableError
from memsync.repository import S3Repository, upload_marks
from memsync.repository.port import BytesProgress
from memsync.snapshot.transfer import upload_snapshot
from memsync.stores import snapshots
from memsync.stores.backends import backend_class
from memsync.stores.embedder import restorable_here

# A run is due when the newest snapshot is at least this fraction of ``--if-due`` old: a run
# that starts a little early (the schedule counts from the end of the last run) still captures.
DUE_FRACTION = 0.9
CAPTURE, SKIP, BOUNDED = "capture", "skip", "bounded"

ProgressFor = Callable[[int], AbstractContextManager[BytesProgress]]


@dataclass(slots=True, kw_only=True)
class PendingRun:
    """What uploading the pending snapshots did.

    Attributes:
        uploaded: ids uploaded now, oldest first, with their transfer figures.
        failure: the error that stopped the run (S3 down, ...), or None.
        still_pending: ids still pending after the run, oldest first.
    """

    uploaded: dict[str, dict[str, Any]] = field(default_factory=dict)
    failure: MemsyncError | None = None
    still_pending: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"uploaded": [ids], "pending": [ids]}`` (a failure is exit 11: never in a report)."""
        return {"uploaded": list(self.uploaded), "pending": list(self.still_pending)}


def upload_pending(
    config: Config, target: S3Repository, now: datetime, progress_for: ProgressFor
) -> PendingRun:
    """Upload every pending local snapshot to ``target``, oldest first; stop at the first failure.

    Each resumes (incomplete multipart uploads under its prefix are aborted first). A failure
    is recorded in its marker and returned, never raised (the caller decides).
    """
    run = PendingRun()
    queue = upload_marks.pending(config.snapshot.directory)
    for index, info in enumerate(queue):
        stored = info.manifest.stored_bytes if info.manifest else None
        try:
            with progress_for(stored or 0) as sent:
                run.uploaded[info.id] = upload_snapshot(
                    config, info.path, sent, target.store, now=now
                )
        except MemsyncError as error:
            run.failure = error
            run.still_pending = [each.id for each in queue[index:]]
            break
    return run


def newest_complete(config: Config) -> datetime | None:
    """The time (UTC, from its id) of the newest complete local snapshot, or None. Reads only.

    Only snapshots this deployment can restore count (``restorable_here``): after a migration
    changed the embedder or the backend, the older ones are no backup of it, so one is due.
    """
    directory = config.snapshot.directory
    if directory is None:
        return None
    mode = backend_class(config.vector_store.provider).mode
    times = [
        info.created_at
        for info in snapshots.iter_local(directory)
        if info.complete and restorable_here(info.manifest, config, mode)
    ]
    return max(times, default=None)


def plan_capture(
    *,
    pending_only: bool,
    if_due: timedelta | None,
    newest: datetime | None,
    now: datetime,
    pending: int,
    limit: int,
    s3_failed: bool,
) -> tuple[str, str]:
    """Whether this run captures: ``(CAPTURE | SKIP | BOUNDED, reason)``. Pure.

    BOUNDED: S3 failed and ``limit`` (``max_pending_uploads``) snapshots already wait.
    """
    if pending_only:
        return SKIP, "--pending-only: no new snapshot"
    if if_due is not None and newest is not None and now - newest < if_due * DUE_FRACTION:
        age = int((now - newest).total_seconds())
        return SKIP, (
            f"not due: the newest snapshot is {age} s old, the schedule takes one every "
            f"{int(if_due.total_seconds())} s (--if-due)"
        )
    if s3_failed and pending >= limit:
        return (
            BOUNDED,
            f"{pending} snapshots already wait for upload (max_pending_uploads = {limit})",
        )
    return CAPTURE, "due" if if_due is not None else "by hand"


def bounded_error(run: PendingRun, limit: int, where: str) -> UnavailableError:
    """Exit 11 for a run that captured nothing because ``limit`` snapshots already wait."""
    reason = run.failure.message if run.failure else "S3 failed"
    return UnavailableError(
        f"no new snapshot: {len(run.still_pending)} snapshots already wait for upload to {where} "
        f"(max_pending_uploads = {limit}), oldest {run.still_pending[0]}; {reason}",
        "bring S3 back (memsync doctor checks it); the next snapshot create --upload uploads "
        "them first, oldest first",
    )


def upload_failed_error(snapshot_id: str, pending: int, error: MemsyncError) -> UnavailableError:
    """Exit 11 for a snapshot kept local and pending because its upload failed (or S3 did)."""
    return UnavailableError(
        f"snapshot {snapshot_id} is kept locally and marked pending ({pending} pending): "
        f"{error.message}",
        error.hint or "the next snapshot create --upload uploads it first",
    )


def mark_unattempted(directory: Path, now: datetime, where: str, error: MemsyncError) -> None:
    """Mark a new snapshot pending without an attempt (S3 failed moments ago in this run)."""
    upload_marks.begin(directory, now, where)
    upload_marks.failed(directory, f"not attempted at {utc.iso(now)}: {error.message}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Queue:
    """The pending uploads done before a capture, and whether to capture."""

    run: PendingRun
    target: S3Repository
    capture: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        """``pending_uploads`` of the create document (docs/reference/json-output.md)."""
        return {**self.run.to_json(), "count": len(self.run.still_pending), "capture": self.reason}

    def skipped_json(self) -> dict[str, Any]:
        """``snapshot create --json`` of a run that captured nothing (only pending uploads)."""
        return {
            "command": "snapshot create",
            "id": None,
            "captured": False,
            "upload": None,
            "pending_uploads": self.to_json(),
        }

    def text(self) -> str:
        """One sentence on the pending snapshots uploaded first (empty when there were none)."""
        if not self.run.uploaded:
            return ""
        return f"; uploaded {len(self.run.uploaded)} pending snapshot(s) first: " + ", ".join(
            self.run.uploaded
        )
