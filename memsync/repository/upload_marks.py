"""Upload-pending markers: ``upload-pending.json`` beside a local snapshot whose upload has not finished.

An upload writes the marker before it sends anything and removes it once the manifest object is
committed, so a snapshot whose upload failed, or whose uploader was killed, stays pending until
an upload of it succeeds (``snapshot create --upload`` uploads pending snapshots first). The
marker is a sidecar (``stores.snapshots.SIDECARS``): never uploaded, never listed in a manifest,
removed with its snapshot. Document::

    {"since": ISO-UTC, "attempts": n, "last_attempt_at": ISO-UTC, "to": "s3://bucket/prefix",
     "last_error": str | null}
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from memsync import utc
from memsync.config import Config
from memsync.state import fsync_dir, write_json_atomic
from memsync.stores import snapshots
from memsync.stores.snapshots import UPLOAD_PENDING, SnapshotInfo


def read(directory: Path) -> dict[str, Any] | None:
    """The marker of a local snapshot directory, or None when it is not pending. Reads only.

    A marker that is not a readable JSON object still marks the snapshot pending (its
    document then only says so in ``last_error``); the next upload rewrites it.
    """
    marker = directory / UPLOAD_PENDING
    if not marker.is_file():
        return None
    return snapshots.read_json(marker) or {"last_error": f"{marker} is unreadable"}


def begin(directory: Path, now: datetime, to: str) -> dict[str, Any]:
    """Mark the snapshot pending before an upload attempt (one attempt more). Atomic.

    Keeps ``since`` and ``last_error`` of an earlier attempt (a damaged ``since`` or
    ``attempts`` starts again from this attempt). Returns the document written.

    Raises:
        OSError: the snapshot directory cannot be written.
    """
    before = read(directory) or {}
    since, attempts = before.get("since"), before.get("attempts")
    document = {
        "since": since if isinstance(since, str) and since else utc.iso(now),
        "attempts": (attempts if type(attempts) is int and attempts >= 0 else 0) + 1,
        "last_attempt_at": utc.iso(now),
        "to": to,
        "last_error": before.get("last_error"),
    }
    write_json_atomic(directory / UPLOAD_PENDING, document)
    return document


def failed(directory: Path, message: str) -> None:
    """Record why the last attempt failed (the snapshot stays pending). Atomic."""
    document = read(directory) or {}
    write_json_atomic(directory / UPLOAD_PENDING, {**document, "last_error": message})


def done(directory: Path) -> None:
    """Remove the marker: the snapshot is uploaded. Idempotent."""
    marker = directory / UPLOAD_PENDING
    if marker.exists():
        marker.unlink()
        fsync_dir(directory)


def pending(directory: Path | None) -> list[SnapshotInfo]:
    """The complete local snapshots marked pending, oldest first. Reads only.

    ``directory`` is the snapshot directory (None: no snapshots, nothing pending).
    """
    if directory is None:
        return []
    return [
        info
        for info in snapshots.iter_local(directory)
        if info.complete and (info.path / UPLOAD_PENDING).is_file()
    ]


def count(config: Config) -> int:
    """How many local snapshots wait for their upload (``pending``). Reads only."""
    return len(pending(config.snapshot.directory))
