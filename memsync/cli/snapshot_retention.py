"""``memsync snapshot prune|pin|unpin``: retention over the local directory and the bucket."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from memsync import snapshot
from memsync.cli import render
from memsync.cli.common import confirm, load_config
from memsync.config import Config
from memsync.errors import UnavailableError, UsageError
from memsync.repository import SnapshotRepository
from memsync.snapshot import pins
from memsync.snapshot.retention import PruneDecision
from memsync.snapshot.retention_apply import Pruned, Removed, Sides, Survey, VersionsLeft
from memsync.state import operation_lock
from memsync.stores.manifest_schema import ID_PATTERN, valid_id
from memsync.stores.snapshots import PINNED

Add = Callable[[str, str], argparse.ArgumentParser]
Left = VersionsLeft | str | None  # str: why the versions could not be read


def register(add: Add) -> None:
    """Add ``snapshot prune``, ``pin`` and ``unpin`` through ``add(name, help)``."""
    prune = add(
        "prune", "remove the snapshots retention (keep_*) does not keep, locally and in [s3]"
    )
    prune.add_argument("--dry-run", action="store_true", help="print the decisions; remove nothing")
    only = prune.add_mutually_exclusive_group()
    only.add_argument(
        "--local-only", action="store_true", help="decide over the snapshot directory alone"
    )
    only.add_argument(
        "--remote-only",
        "--remote",
        dest="remote_only",
        action="store_true",
        help="decide over the snapshots in [s3] alone",
    )
    prune.add_argument(
        "--purge-versions",
        action="store_true",
        help="versioned bucket: also delete the old versions of removed snapshots for good",
    )
    prune.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    prune.set_defaults(run=run_snapshot_prune)
    pin = add("pin", "keep a snapshot whatever retention says, on every side storing it")
    pin.add_argument("id", metavar="ID")
    pin.add_argument("--reason", default="", help="why (shown by prune and list)")
    pin.add_argument("--dry-run", action="store_true", help="say where it would pin; write nothing")
    pin.set_defaults(run=run_pin)
    unpin = add("unpin", "let retention decide about a pinned snapshot again")
    unpin.add_argument("id", metavar="ID")
    unpin.add_argument(
        "--dry-run", action="store_true", help="say where it would unpin; write nothing"
    )
    unpin.set_defaults(run=run_unpin)


def run_snapshot_prune(args: argparse.Namespace) -> int:
    """Apply retention over both sides (or one); exit 0, 2 (unconfirmed), 10, 11, 12."""
    config = load_config(args)
    sides = snapshot.open_sides(config, local_only=args.local_only, remote_only=args.remote_only)
    if args.dry_run:
        found, decisions = _plan(sides, config)
        removing = [d.id for d in decisions if "remote" in d.remove_from]
        left = _versions(sides, removing, required=False)
        return _report(args, sides, found, decisions, Removed(ids=[], aborted=[]), left, 0)
    confirmed: set[str] | None = None
    if not args.yes:  # ask before taking the lock, then decide again under it
        found, decisions = _plan(sides, config)
        confirmed = {d.id for d in decisions if not d.keep}
        if confirmed:
            confirm(args, f"remove {len(confirmed)} snapshots")
    with operation_lock(config.state_dir, "snapshot prune"):
        found, decisions = _plan(sides, config)  # a pin or an upload since counts
        if confirmed is not None:
            decisions = [_unless_unconfirmed(d, confirmed) for d in decisions]
        with render.progress("removing") as progress:
            removed = snapshot.apply_retention(sides, decisions, found.uploads, progress)
        left = _versions(sides, (), required=args.purge_versions)
        purged = 0
        if (
            sides.remote
            and isinstance(left, VersionsLeft)
            and left.versions
            and args.purge_versions
        ):
            purged = snapshot.purge_versions(sides.remote, left, len(removed.ids))
    return _report(args, sides, found, decisions, removed, left, purged)


def _versions(sides: Sides, removing: Sequence[str], *, required: bool) -> Left:
    """The bucket's versions of removed snapshots, or why they could not be listed.

    A bucket refusing to list them (a policy without s3:ListBucketVersions) is said in the
    report rather than failing the prune, unless ``required`` (``--purge-versions``).
    """
    if sides.remote is None:
        return None
    try:
        return snapshot.versions_left(sides.remote, removing)
    except UnavailableError as error:
        if required:
            raise
        return error.message


def _plan(sides: Sides, config: Config) -> tuple[Survey, list[PruneDecision]]:
    found = snapshot.survey(sides)
    return found, snapshot.plan_retention(found.candidates, config.snapshot, now=_now())


def _unless_unconfirmed(decision: PruneDecision, confirmed: set[str]) -> PruneDecision:
    if decision.keep or decision.id in confirmed:
        return decision
    reasons = ("not in the removals confirmed (it changed meanwhile)",)
    return replace(decision, keep=True, reasons=reasons, remove_from=())


def _report(
    args: argparse.Namespace,
    sides: Sides,
    found: Survey,
    decisions: list[PruneDecision],
    removed: Removed,
    left: Left,
    purged: int,
) -> int:
    pruned = Pruned(
        dry_run=args.dry_run,
        sides=sides,
        found=found,
        decisions=tuple(decisions),
        removed=removed,
        left=left,
        purged=purged,
    )
    document = pruned.to_json()
    return render.emit(bool(args.json), document, _prune_text(args, sides, document, left, purged))


def _prune_text(
    args: argparse.Namespace,
    sides: Sides,
    document: dict[str, Any],
    left: Left,
    purged: int,
) -> str:
    lines = [
        f"{'KEEP' if d['keep'] else 'REMOVE':<7} {d['id']:<20} {'+'.join(d['sides']):<13} "
        f"{', '.join(d['reasons'])}"
        for d in document["decisions"]
    ]
    kept = sum(1 for d in document["decisions"] if d["keep"])
    removing = len(document["decisions"]) - kept
    lines.append(
        f"prune ({' and '.join(str(r.where) for r in sides.named().values())}): keep {kept}, "
        f"{'would remove' if args.dry_run else 'removed'} {removing}"
        + (
            f"; aborted {len(document['aborted_uploads'])} incomplete upload(s)"
            if document["aborted_uploads"]
            else ""
        )
    )
    if purged:
        lines.append(f"deleted {purged} noncurrent object version(s) of removed snapshots for good")
    elif isinstance(left, str):
        lines.append(f"could not list the bucket's old object versions: {left}")
    elif left is not None and left.count:
        lines.append(
            f"{'would leave' if args.dry_run else 'left'} {left.count} noncurrent object "
            f"version(s) ({left.size_bytes} bytes) of {len(left.snapshot_ids)} removed "
            f"snapshot(s) in the versioned bucket; --purge-versions deletes them"
        )
    return "\n".join(lines)


def run_pin(args: argparse.Namespace) -> int:
    """Pin a snapshot on every side storing it; exit 0, 2 (stored nowhere), 11, 12."""
    config = load_config(args)
    where, failed = _stored_on(config, args.id)
    pin = None
    if not args.dry_run:
        with operation_lock(config.state_dir, "snapshot pin"):  # not while a prune decides
            for repo in where.values():
                pin = pins.pin(repo, args.id, reason=args.reason, by="operator", now=_now())
    done = pins.Pinned(id=args.id, dry_run=args.dry_run, sides=tuple(where), pin=pin)
    _unfinished("would pin" if args.dry_run else "pinned", args.id, failed)
    text = f"{'would pin' if args.dry_run else 'pinned'} {args.id} on {' and '.join(where)}"
    return render.emit(bool(args.json), done.to_json(), text)


def run_unpin(args: argparse.Namespace) -> int:
    """Unpin a snapshot on every side storing it; exit 0, 2 (stored nowhere), 11, 12."""
    config = load_config(args)
    where, failed = _stored_on(config, args.id)
    was = {side: _pinned(repo, args.id) for side, repo in where.items()}
    if not args.dry_run:
        with operation_lock(config.state_dir, "snapshot unpin"):
            for repo in where.values():
                pins.unpin(repo, args.id, now=_now())
    _unfinished("would unpin" if args.dry_run else "unpinned", args.id, failed)
    done = pins.Unpinned(id=args.id, dry_run=args.dry_run, was_pinned=was)
    state = "it was pinned" if any(was.values()) else "it was not pinned"
    verb = "would unpin" if args.dry_run else "unpinned"
    return render.emit(
        bool(args.json), done.to_json(), f"{verb} {args.id} on {' and '.join(where)} ({state})"
    )


def _pinned(repo: SnapshotRepository, snapshot_id: str) -> bool:
    document = repo.read_json(snapshot_id, PINNED)
    return document is not None and document.get("pinned") is True


def _stored_on(
    config: Config, snapshot_id: str
) -> tuple[dict[str, SnapshotRepository], UnavailableError | None]:
    """The sides storing ``snapshot_id``, and the error of a side that could not be asked.

    Returns ``({side: repository}, error or None)``. Reads only.

    Raises:
        UsageError: not a snapshot id, or stored on no side that answered.
        UnavailableError: no side answered.
    """
    if not ID_PATTERN.match(snapshot_id) or not valid_id(snapshot_id):
        raise UsageError(f"{snapshot_id!r} is not a snapshot id (YYYYMMDDTHHMMSSZ, or with -N)")
    named = snapshot.open_sides(config).named()
    stored: dict[str, SnapshotRepository] = {}
    failed: UnavailableError | None = None
    for side, repo in named.items():
        try:
            if repo.exists(snapshot_id):
                stored[side] = repo
        except UnavailableError as error:
            failed = error
    if failed is not None and not stored:
        raise failed
    if not stored:
        places = " nor ".join(repo.where for repo in named.values())
        listing = "memsync snapshot list --remote" if "remote" in named else "memsync snapshot list"
        raise UsageError(
            f"snapshot {snapshot_id} is stored nowhere: not in {places}",
            f"{listing} shows the snapshots there",
        )
    return stored, failed


def _unfinished(done: str, snapshot_id: str, failed: UnavailableError | None) -> None:
    """Raise exit 11 when a side could not be asked, after the others were done.

    With ``--dry-run`` nothing was done: a dry run predicts the run's exit.
    """
    if failed is not None:
        raise UnavailableError(
            f"{done} {snapshot_id} in the snapshot directory only: {failed.message}",
            "run the same command again when the bucket answers",
        )


def _now() -> datetime:
    return datetime.now(UTC)
