"""``memsync tune --wal | --rollback-journal``: the journal mode of the deployment's SQLite files."""

from __future__ import annotations

import argparse

from memsync import restore, tune
from memsync.cli import render
from memsync.cli.common import add_command, open_deployment
from memsync.state import operation_lock

HELP = "switch history.db and every storage.sqlite to WAL mode (or back), through a safe route"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``tune`` subcommand."""
    parser = add_command(subparsers, "tune", HELP, common, epilog)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--wal",
        dest="target",
        action="store_const",
        const=tune.WAL,
        help="WAL mode: a capture's read never blocks the app's writer (and back with "
        "--rollback-journal)",
    )
    target.add_argument(
        "--rollback-journal",
        dest="target",
        action="store_const",
        const=tune.ROLLBACK,
        help="mem0's default rollback journal (needs the app stopped)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="show each file's mode and the route; change nothing"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Switch the files (or show the plan); exit 0, 11 (unreadable), 12 (no route), 75 (busy)."""
    deployment = open_deployment(args)
    config = deployment.config
    if args.dry_run:
        tuned = tune.apply_tune(deployment, args.target, dry_run=True)
    else:
        restore.finish_interrupted(deployment)  # never switch files a restore left half swapped
        with operation_lock(config.state_dir, "tune"):
            tuned = tune.apply_tune(deployment, args.target)
    return render.emit(bool(args.json), tuned.to_json(), text(tuned))


def text(tuned: tune.Tuned) -> str:
    """The human report: one line per file, then a summary."""
    mode = "WAL" if tuned.target == tune.WAL else "rollback journal"
    lines = []
    for entry in tuned.files:
        if tuned.dry_run:
            state = f"would switch to {tuned.target}" if entry.change else "unchanged"
        else:
            state = f"now {entry.after}" if entry.change else f"unchanged ({entry.after})"
        lines.append(f"{entry.before or 'not a database yet':<9} {entry.path}: {state}")
    if not tuned.changed:
        lines.append(f"tune: every file is already in {mode} mode; nothing to do")
    elif tuned.dry_run:
        route = tuned.route or f"none open now ({tuned.blocked})"
        lines.append(f"tune --dry-run: {len(tuned.changed)} files would switch; route: {route}")
    else:
        paused = (
            f"; the app's writes were held {tuned.paused_s:.2f} s by its agent"
            if tuned.paused_s is not None
            else ""
        )
        lines.append(
            f"tune: {len(tuned.changed)} files switched to {mode} mode ({tuned.route} route), "
            f"each read back by a new connection{paused}"
        )
    return "\n".join(lines)
