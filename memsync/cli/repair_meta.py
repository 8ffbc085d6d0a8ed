"""``memsync repair-meta``: make the store's meta.json loadable by the app's qdrant-client again."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from memsync import repair_meta
from memsync.cli import render
from memsync.cli.common import add_command, open_deployment
from memsync.state import operation_lock

HELP = (
    "rewrite an embedded store's meta.json without the unset keys the app's qdrant-client "
    "refuses (a snapshot first; the old file kept)"
)


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``repair-meta`` subcommand."""
    parser = add_command(subparsers, "repair-meta", HELP, common, epilog)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what the app's qdrant-client refuses; change nothing",
    )
    parser.add_argument(
        "--no-snapshot", action="store_true", help="do not take a snapshot before the rewrite"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Repair (or show it); exit 0 when the app's qdrant-client loads the file.

    Exit 3 when it still refuses it (a dry run), 10, 11 or 12 as ``repair_meta`` raises.
    """
    deployment = open_deployment(args)
    config = deployment.config
    now = datetime.now(UTC)
    if args.dry_run:
        done = repair_meta.repair_meta(deployment, now, dry_run=True)
    else:
        with operation_lock(config.state_dir, "repair-meta"):
            done = repair_meta.repair_meta(deployment, now, take_snapshot=not args.no_snapshot)
    code = render.emit(bool(args.json), done.to_json(), text(done))
    return code if done.loads else 3


def text(done: repair_meta.MetaRepaired) -> str:
    """The human report."""
    client = f"qdrant-client {done.app.qdrant_client} ({done.app.python})"
    refused = "; ".join(f"collection {n}: {', '.join(keys)}" for n, keys in done.refused.items())
    if done.repaired:
        lines = [
            f"{done.path}: rewrote it without {refused}; the app's {client} loads it now",
            f"the old file is kept as {done.kept}",
        ]
        if done.snapshot_id:
            lines.append(f"snapshot {done.snapshot_id} was taken first")
        return "\n".join(lines)
    if done.loads:
        return f"{done.path}: the app's {client} loads it; nothing to do"
    return (
        f"{done.path}: the app's {client} refuses {refused}\n"
        "run memsync repair-meta (without --dry-run) with the app stopped to rewrite it"
    )
