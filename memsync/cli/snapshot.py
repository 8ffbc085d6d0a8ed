"""``memsync snapshot create|verify|list|upload|download|purge-memory|prune|pin|unpin``.

prune, pin and unpin live in ``memsync.cli.snapshot_retention``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsync import capture_budget, repository, snapshot
from memsync.cli import render, snapshot_retention, snapshot_upload, snapshot_verify
from memsync.cli.common import (
    add_command,
    add_scope_arguments,
    confirm,
    load_config,
    open_deployment,
)
from memsync.config import Config
from memsync.config.fields import parse_duration
from memsync.deployment import Deployment
from memsync.errors import ExitCode, UsageError
from memsync.repository import upload_marks
from memsync.snapshot.create import SHOWN_ERRORS, CapturePlan, error_findings
from memsync.snapshot.listing import list_snapshots
from memsync.snapshot.transfer import Downloaded
from memsync.state import operation_lock
from memsync.stores import embedder, snapshots

HELP = "capture both stores into one dated, verified snapshot; upload, list, verify, prune"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add ``snapshot`` and its subcommands."""
    parser = add_command(subparsers, "snapshot", HELP, common, epilog)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def add(name: str, text: str) -> argparse.ArgumentParser:
        return add_command(actions, name, text, common, epilog)

    _register_create(add)
    _register_reading(add)
    _register_transfer(add)
    _register_purge(add)
    snapshot_retention.register(add)  # prune, pin, unpin


def _register_create(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``snapshot create``."""
    create = add(
        "create", "capture vectors then history into <snapshot.directory>/<id>/ with a manifest"
    )
    create.add_argument(
        "--upload",
        action="store_true",
        help="upload it to [s3] when complete, after the snapshots still pending upload",
    )
    create.add_argument(
        "--pending-only",
        action="store_true",
        help="with --upload: upload the pending snapshots; capture none",
    )
    create.add_argument(
        "--if-due",
        metavar="EVERY",
        type=parse_duration,
        help="with --upload: capture only when the newest snapshot is older than ~EVERY "
        "('1h'; the daemon passes its schedule)",
    )
    create.add_argument(
        "--dry-run", action="store_true", help="say what would be captured; write nothing"
    )
    create.set_defaults(run=run_create)


def _register_reading(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``snapshot verify`` and ``snapshot list``."""
    verify = add("verify", "recompute checksums, signature and integrity; re-run check on the pair")
    verify.add_argument("target", metavar="ID|PATH|s3://BUCKET/PREFIX/ID", nargs="?")
    verify.add_argument(
        "--scheduled",
        action="store_true",
        help="every manifest, the newest snapshot and a slice of the others, on each side "
        "(the daemon's verify job)",
    )
    verify.add_argument(
        "--dry-run", action="store_true", help="with --scheduled: print the plan; read nothing"
    )
    verify.set_defaults(run=run_verify)
    listing = add("list", "list local (and with --remote, S3) snapshots")
    listing.add_argument("--remote", action="store_true", help="also list the snapshots in [s3]")
    listing.set_defaults(run=run_list)


def _register_transfer(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``snapshot upload`` and ``snapshot download``."""
    upload = add("upload", "upload a local snapshot (resumes: files already there are skipped)")
    upload.add_argument("id", metavar="ID|PATH")
    upload.add_argument(
        "--verify",
        action="store_true",
        help="read every stored object back and send again those that differ (repair)",
    )
    upload.add_argument(
        "--dry-run", action="store_true", help="say what would be sent; send nothing"
    )
    upload.set_defaults(run=snapshot_upload.run_upload)
    download = add("download", "download a remote snapshot into DIR/<id>/, verifying every byte")
    download.add_argument("id", metavar="ID|s3://BUCKET/PREFIX/ID")
    download.add_argument("dest", metavar="DIR", type=Path)
    download.set_defaults(run=run_download)


def _register_purge(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``snapshot purge-memory``."""
    purge = add(
        "purge-memory", "rewrite the snapshots that still hold erased memories (new checksums)"
    )
    purge.add_argument("memory_ids", nargs="*", metavar="MEMORY_ID")
    add_scope_arguments(purge)
    purge.add_argument(
        "--remote", action="store_true", help="also the bucket's copies (re-uploaded)"
    )
    purge.add_argument(
        "--delete-versions",
        action="store_true",
        help="delete the noncurrent S3 object versions that still hold erased memories",
    )
    purge.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    purge.add_argument(
        "--dry-run", action="store_true", help="list what holds them; change nothing"
    )
    purge.set_defaults(run=run_purge)


def _now() -> datetime:
    return datetime.now(UTC)


def run_create(args: argparse.Namespace) -> int:
    """Create one snapshot (and upload it with --upload); exit 3 when its pair has errors.

    The snapshot is kept either way (``snapshot list`` shows it; retention never protects it
    as the newest verified one).
    """
    deployment = open_deployment(args)
    config = deployment.config
    snapshot_upload.check_flags(args)
    # logs each file near the busy timeout
    budget = capture_budget.warn_before_capture(deployment.vector_store, config)
    if args.dry_run:
        return _create_plan(args, deployment, budget)
    queue = snapshot_upload.pending_first(args, config, _now()) if args.upload else None
    if queue is not None and not queue.capture:
        return snapshot_upload.skipped(args, queue)
    with render.progress("reading points") as progress:
        created = snapshot.create_snapshot(deployment, _now(), progress)
    capture_budget.record_manifest(config.state_dir, created.manifest)  # the next estimate's rate
    upload = snapshot_upload.upload_created(config, created, queue, _now()) if queue else None
    manifest = created.manifest
    document = created.to_json(
        budget=budget, upload=upload, pending_uploads=queue.to_json() if queue else None
    )
    text = _created_text(config, created, upload, budget) + (queue.text() if queue else "")
    code = _emit(args, document, text + (created.tripwire.text() if created.tripwire else ""))
    vanished = created.tripwire is not None and created.tripwire.errors
    return int(ExitCode.PROBLEMS_FOUND) if manifest.check.get("errors") or vanished else code


def _create_plan(
    args: argparse.Namespace, deployment: Deployment, budget: capture_budget.CaptureBudget
) -> int:
    """``snapshot create --dry-run``: what would be captured, where, and the capture budget."""
    config = deployment.config
    directory = snapshot.snapshot_dir(config)
    vectors = deployment.vector_store.where
    plan = CapturePlan(
        directory=directory,
        sources=(str(vectors), str(config.history_db_path)),
        upload=args.upload,
        budget=budget,
        pending_uploads=tuple(i.id for i in upload_marks.pending(config.snapshot.directory)),
    )
    if args.upload:
        repository.object_store(config)
    return _emit(
        args,
        plan.to_json(),
        f"would capture {vectors} and {config.history_db_path} "
        f"into {directory}/<id>/"
        + (" and upload it" if args.upload else "")
        + "".join(_near_timeout_lines(budget)),
    )


def _created_text(
    config: Config,
    created: snapshot.Created,
    upload: dict[str, Any] | None,
    budget: capture_budget.CaptureBudget,
) -> str:
    """The one-paragraph text report of a created snapshot."""
    manifest, counts = created.manifest, created.manifest.check
    text = (
        f"snapshot {created.id}: {manifest.size_bytes} bytes in {created.path}; "
        f"{manifest.collections.get(config.collection, {}).get('points', 0)} points, "
        f"{manifest.history['memories']} memories; check: {counts['errors']} errors, "
        f"{counts['warnings']} warnings"
    )
    if upload is not None:
        text += f"; uploaded {upload['sent']} files ({upload['skipped']} already there)"
    if manifest.quiesced:
        text += "; app writes paused by its agent for the capture (quiesced"
        held = created.writes_held
        text += f", {held.text()})" if held is not None else ")"
    elif manifest.not_quiesced:
        text += f"; not quiesced: {manifest.not_quiesced}"
    if counts.get("unsettled"):
        text += f"; {len(counts['unsettled'])} writes caught in the capture could not be settled"
    errors = error_findings(counts)
    for finding in errors[:SHOWN_ERRORS]:
        where = finding.get("memory_id") or finding.get("path") or ""
        text += f"\n  ERROR {finding.get('code')} {where}: {finding.get('message')}"
    if len(errors) > SHOWN_ERRORS:
        text += f"\n  ... and {len(errors) - SHOWN_ERRORS} more errors: memsync check lists them"
    if errors:
        text += "\n  the snapshot is kept, never as the newest verified one: memsync reconcile"
    return text + "".join(_near_timeout_lines(budget))


def run_verify(args: argparse.Namespace) -> int:
    """Verify a local or remote snapshot (or, --scheduled, this run's share of all); exit 0 or 3."""
    if args.scheduled or args.dry_run:
        if args.target is not None or not args.scheduled:
            raise UsageError(
                "give a snapshot (ID, PATH or s3://...) or --scheduled [--dry-run], not both",
                "memsync snapshot verify --help",
            )
        return snapshot_verify.run_scheduled(args)
    if args.target is None:
        raise UsageError("name the snapshot to verify, or pass --scheduled")
    deployment = open_deployment(args)
    config = deployment.config
    if args.target.startswith("s3://"):
        report = snapshot.verify_remote(deployment, args.target, _now(), restorable=True)
    else:
        report = snapshot.verify_directory(
            deployment,
            snapshots.resolve_local(args.target, config.snapshot.directory),
            _now(),
            restorable=True,
        )
    errors = sum(1 for f in report.findings if f.severity.value == "error")
    lines = [
        f"{f.severity.value.upper():<8} {f.code:<20} {f.path or f.memory_id or ''}\n         {f.message}"
        for f in report.findings
    ]
    if report.expected:
        lines.append(snapshot_verify.expected_line(report))
    lines.append(
        f"verify {report.snapshot_id}: {'ok' if report.ok else 'FAILED'} ({errors} errors)"
    )
    if report.other_embedder:
        lines.append(
            f"judged by its own vector size: {report.other_embedder}; restore refuses it here "
            f"({embedder.hint(config)})"
        )
    _emit(args, report.to_json(), "\n".join(lines))
    return int(ExitCode.OK if report.ok else ExitCode.PROBLEMS_FOUND)


def run_list(args: argparse.Namespace) -> int:
    """List snapshots, local and (with --remote) in S3."""
    config = load_config(args)
    listing = list_snapshots(config, remote=bool(args.remote))
    ordered = list(listing.snapshots)
    lines = [
        f"{'id':<20} {'complete':<8} {'verified':<12} {'verified at':<20} {'size':>12} "
        f"{'points':>8} {'memories':>8} where"
    ]
    for row in ordered:
        places = [name for name in ("local", "remote") if row[name]]
        where = "+".join(places) + (" (upload pending)" if row.get("upload_pending") else "")
        verified = "+".join(name for name in places if row[name]["verified"]) or (
            "FAILED" if any(row[name].get("failed") for name in places) else "no"
        )
        complete = all(row[name]["complete"] for name in places)
        when = max((row[name]["verified_at"] or "" for name in places), default="")
        when = f"{when[:19]}Z" if when else "-"  # to the second
        lines.append(
            f"{row['id']:<20} {str(complete).lower():<8} {verified:<12} {when:<20} "
            f"{row['size_bytes']:>12} {row['points'] if row['points'] is not None else '-':>8} "
            f"{row['memories'] if row['memories'] is not None else '-':>8} {where}"
            + (" pinned" if row["pin"] else "")
            + (f" safety ({row['label'].get('by') or '?'})" if row["label"] else "")
        )
    pending = listing.pending_upload
    if pending:
        lines.append(f"{pending} snapshot(s) wait for upload (snapshot create --upload sends them)")
    return _emit(args, listing.to_json(), "\n".join(lines))


def run_download(args: argparse.Namespace) -> int:
    """Download a remote snapshot, verifying every byte against its manifest."""
    config = load_config(args)
    target = args.id if args.id.startswith("s3://") else f"s3://{args.id}"
    remote, snapshot_id = repository.parse_s3_target(config, target)
    args.dest.mkdir(parents=True, exist_ok=True)
    with render.byte_progress("downloading", None) as received:
        path = snapshot.download_snapshot(remote, snapshot_id, args.dest, received)
    return _emit(
        args,
        Downloaded(id=snapshot_id, path=path).to_json(),
        f"downloaded {snapshot_id} into {path}; every file matches its manifest",
    )


def run_purge(args: argparse.Namespace) -> int:
    """Rewrite the snapshots holding the memories, list (and delete) the S3 versions; exit 0, 11.

    Exit 11 also after the report when a version is left (object lock, a failed delete) or the
    bucket's versions could not be listed ("unknown").
    """
    from memsync.cli import purge_report
    from memsync.snapshot import purge_memory as purge

    scope = {k: v for k in ("user_id", "agent_id", "run_id") if (v := getattr(args, k))}
    if bool(args.memory_ids) == bool(scope):
        raise UsageError("purge-memory needs MEMORY_ID... or one of --user/--agent/--run")
    deployment = open_deployment(args)
    config = deployment.config
    if not args.dry_run:
        confirm(args, "rewrite the snapshots holding these memories"
                 + (" and delete the S3 versions holding erased ones" if args.delete_versions else ""))  # fmt: skip
    with (
        operation_lock(config.state_dir, "snapshot purge-memory"),
        render.progress("reading S3 versions") as progress,
    ):
        done = purge.run_purge(
            deployment, args.memory_ids, _now(), args.remote, scope=scope or None,
            delete_versions=args.delete_versions, dry_run=args.dry_run, progress=progress,
        )  # fmt: skip
    document = done.to_json(dry_run=args.dry_run, scope=scope)
    _emit(args, document, purge_report.text(done, dry_run=args.dry_run))
    if done.kept:  # object lock refused: the report above names each version kept
        message, hint = purge_report.refusal(done)
        render.exit_error(int(ExitCode.UNAVAILABLE), message, hint, as_json=bool(args.json))
        return int(ExitCode.UNAVAILABLE)
    if done.failed:  # S3 did not delete them: the report above names each one left
        message, hint = purge_report.failed_refusal(done)
        render.exit_error(int(ExitCode.UNAVAILABLE), message, hint, as_json=bool(args.json))
        return int(ExitCode.UNAVAILABLE)
    if done.other_backend and not args.dry_run:
        message, hint = purge_report.other_backend_refusal(done)
        render.exit_error(int(ExitCode.UNAVAILABLE), message, hint, as_json=bool(args.json))
        return int(ExitCode.UNAVAILABLE)
    if done.scan_error:  # never "0 versions hold them" when the versions could not be listed
        message, hint = purge_report.unknown_refusal(done)
        render.exit_error(int(ExitCode.UNAVAILABLE), message, hint, as_json=bool(args.json))
        return int(ExitCode.UNAVAILABLE)
    return 0


def _near_timeout_lines(budget: capture_budget.CaptureBudget) -> list[str]:
    return [
        f"\nwarning: the capture's read on {near.path} ({near.journal_mode or 'unknown'} mode, "
        f"{near.size_bytes} bytes) was estimated at {near.estimated_hold_s:.1f} s, close to the "
        f"app's {capture_budget.BUSY_TIMEOUT_S:.0f} s busy timeout: {capture_budget.FIX}"
        for near in budget.near_timeout
    ]


def _emit(args: argparse.Namespace, document: dict[str, Any], text: str) -> int:
    return render.emit(bool(args.json), document, text)
