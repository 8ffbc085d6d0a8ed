"""``memsync pending list|apply``: the queue of forget, erase and prune requests."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from memsync import forget, restore
from memsync.cli import render
from memsync.cli.common import add_command, load_config, open_deployment
from memsync.forget.queued import exit_code
from memsync.routes import queue as pending
from memsync.state import operation_lock

HELP = "the forget, erase and prune requests queued while no route could write (list, apply)"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add ``pending`` and its subcommands."""
    parser = add_command(subparsers, "pending", HELP, common, epilog)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = add_command(
        actions,
        "list",
        "the queued requests, oldest first, with who asked and when",
        common,
        epilog,
    )
    listing.set_defaults(run=run_list)
    apply = add_command(
        actions,
        "apply",
        "apply every queued request through the route available now (exit 5: some stay queued)",
        common,
        epilog,
        writes=True,
    )
    apply.add_argument(
        "--dry-run", action="store_true", help="say what each would do and by which route"
    )
    apply.set_defaults(run=run_apply)


def _selection(request: pending.PendingRequest) -> str:
    if request.kind == "prune":
        return "every expired memory"
    scope = [f"{k}={v}" for k, v in (("user", request.user_id), ("agent", request.agent_id),
                                     ("run", request.run_id)) if v]  # fmt: skip
    return ", ".join(scope) or f"{len(request.memory_ids)} memories"


def run_list(args: argparse.Namespace) -> int:
    """Print the queue (reads only); exit 0."""
    config = load_config(args)
    now = datetime.now(UTC)
    requests = pending.load(config.state_dir)
    oldest = pending.oldest_age_s(requests, now)
    lines = [
        f"{r.id}  {r.kind:<6} {_selection(r):<28} asked {r.requested_at} by "
        f"{r.requested_by.get('user', '?')} ({r.age_s(now) / 3600:.1f} h ago)"
        for r in requests
    ]
    lines.append(
        f"pending: {len(requests)} queued"
        + (f", oldest {oldest / 3600:.1f} h" if oldest is not None else "")
    )
    listing = pending.Listing(requests=tuple(requests), now=now)
    return render.emit(bool(args.json), listing.to_json(), "\n".join(lines))


def run_apply(args: argparse.Namespace) -> int:
    """Apply the queue; exit 0 (empty after), 4 (some failed), 5 (some stay queued)."""
    deployment = open_deployment(args)
    config = deployment.config
    now = datetime.now(UTC)
    if args.dry_run:
        applied, taken = forget.apply_pending(deployment, now, dry_run=True)
    else:
        restore.finish_interrupted(deployment)
        with operation_lock(config.state_dir, "pending apply"):
            applied, taken = forget.apply_pending(deployment, now, dry_run=False)
    done = forget.QueueRun(
        dry_run=bool(args.dry_run),
        applied=tuple(applied),
        taken=taken,
        left=len(pending.load(config.state_dir)),
        now=now,
    )
    left = done.left
    lines = [
        f"{item.status.upper():<12} {item.request.id} {item.request.kind:<6} "
        f"{_selection(item.request)}" + (f": {item.error}" if item.error else "")
        for item in applied
    ]
    lines.append(
        f"pending apply{' --dry-run' if args.dry_run else ''}: {len(applied)} requests, "
        f"{left} left in the queue"
        + (f" (route: {taken.route}" if taken.route else "")
        + (f", app down {taken.downtime_s:.1f} s" if taken.downtime_s is not None else "")
        + (")" if taken.route else "")
    )
    render.emit(bool(args.json), done.to_json(), "\n".join(lines))
    return 0 if args.dry_run else int(exit_code(applied))
