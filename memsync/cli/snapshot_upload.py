"""``snapshot upload``, and ``snapshot create --upload``'s queue: pending uploads first.

The queue uploads the pending snapshots, then maybe captures, then uploads the new one. The
decisions are ``memsync.snapshot.uploads``; this module renders progress and reports.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from memsync import repository, snapshot
from memsync.cli import render
from memsync.cli.common import load_config
from memsync.config import Config
from memsync.errors import UnavailableError, UsageError
from memsync.snapshot import uploads
from memsync.snapshot.transfer import Uploaded
from memsync.snapshot.uploads import Queue
from memsync.stores import snapshots


def _progress(total: int) -> Any:
    return render.byte_progress("uploading", total or None)


def pending_first(args: argparse.Namespace, config: Config, now: datetime) -> Queue:
    """Upload the pending snapshots, then decide whether this run captures.

    Raises:
        UnavailableError: S3 failed and no snapshot is to be captured (exit 11), or
            ``max_pending_uploads`` snapshots already wait (exit 11, naming the count).
    """
    target = repository.remote(config)
    run = uploads.upload_pending(config, target, now, _progress)
    limit = config.snapshot.max_pending_uploads
    decision, reason = uploads.plan_capture(
        pending_only=args.pending_only,
        if_due=args.if_due,
        newest=uploads.newest_complete(config),
        now=now,
        pending=len(run.still_pending),
        limit=limit,
        s3_failed=run.failure is not None,
    )
    if decision == uploads.BOUNDED:
        raise uploads.bounded_error(run, limit, target.where)
    if decision == uploads.SKIP and run.failure is not None:
        raise UnavailableError(
            f"{len(run.still_pending)} snapshot(s) still wait for upload, oldest "
            f"{run.still_pending[0]} ({reason}): {run.failure.message}",
            run.failure.hint,
        )
    return Queue(run=run, target=target, capture=decision == uploads.CAPTURE, reason=reason)


def skipped(args: argparse.Namespace, queue: Queue) -> int:
    """Report a run that uploaded the pending snapshots and captured nothing (exit 0)."""
    text = f"no new snapshot ({queue.reason})" + (queue.text() or "; nothing was pending")
    return render.emit(bool(args.json), queue.skipped_json(), text)


def upload_created(
    config: Config, created: snapshot.Created, queue: Queue, now: datetime
) -> dict[str, Any]:
    """Upload the new snapshot, or mark it pending at once when S3 failed earlier in this run.

    Raises:
        UnavailableError: the upload failed or was not attempted (the snapshot stays local and
            pending; the message names it and the pending count).
    """
    pending = len(queue.run.still_pending) + 1
    if queue.run.failure is not None:
        uploads.mark_unattempted(created.path, now, queue.target.where, queue.run.failure)
        raise uploads.upload_failed_error(created.id, pending, queue.run.failure)
    try:
        with _progress(created.manifest.stored_bytes) as sent:
            return snapshot.upload_snapshot(config, created.path, sent, queue.target.store, now=now)
    except UnavailableError as error:
        raise uploads.upload_failed_error(created.id, pending, error) from error


def check_flags(args: argparse.Namespace) -> None:
    """``--pending-only`` and ``--if-due`` need ``--upload``. Raises UsageError."""
    if (args.pending_only or args.if_due is not None) and not args.upload:
        raise UsageError("--pending-only and --if-due go with --upload", "add --upload")


def run_upload(args: argparse.Namespace) -> int:
    """Upload a local snapshot to S3 (manifest last; ``--verify``: read back and repair)."""
    config = load_config(args)
    directory = snapshots.resolve_local(args.id, config.snapshot.directory)
    manifest = snapshots.read_manifest(directory)
    remote = repository.remote(config)
    if args.dry_run:
        return render.emit(
            bool(args.json),
            Uploaded(id=directory.name, to=remote.where, files=manifest.files).to_json(),
            f"would upload {len(manifest.files)} files and the manifest of {directory.name} to {remote.where}",
        )
    with render.byte_progress("uploading", manifest.stored_bytes) as sent:
        result = snapshot.upload_snapshot(
            config, directory, sent, remote.store, repair=args.verify, now=datetime.now(UTC)
        )
    text = (
        f"uploaded {directory.name} to {remote.where}: {result['sent']} files sent, "
        f"{result['skipped']} already there"
    )
    if result["aborted_uploads"]:
        text += f"; aborted {result['aborted_uploads']} incomplete multipart upload(s) first"
    if args.verify:
        text += f"; read back every object, repaired {len(result['repaired'])}: " + (
            ", ".join(result["repaired"]) or "none differed"
        )
    return render.emit(
        bool(args.json),
        Uploaded(id=directory.name, to=remote.where, result=result).to_json(),
        text,
    )
