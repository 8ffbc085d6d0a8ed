"""``memsync restore``: bring a deployment back from a snapshot, both stores together."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from memsync import restore
from memsync.cli import render
from memsync.cli.common import add_command, load_config
from memsync.errors import ExitCode, UsageError

HELP = "verify a snapshot, then replace both stores with it (old files moved aside, never deleted)"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``restore`` subcommand."""
    parser = add_command(subparsers, "restore", HELP, common, epilog)
    parser.add_argument("target", nargs="?", metavar="ID|PATH|s3://BUCKET/PREFIX/ID")
    parser.add_argument(
        "--dry-run", action="store_true", help="verify and print the moves; change nothing"
    )
    parser.add_argument("--force", action="store_true", help="replace a deployment that has data")
    parser.add_argument(
        "--if-empty",
        action="store_true",
        help="do nothing when the deployment has data (boot-time use)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="finish or roll back a restore that died, then stop"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Restore; exit 0, 2 (has data, no --force), 10, 11, 12."""
    config = load_config(args)
    if args.resume:
        outcome = restore.recover(config)
        text = outcome or "no unfinished restore"
        if args.json:
            render.emit_json({"command": "restore", "resume": True, "recovered": outcome})
        else:
            render.emit_text(text)
        return int(ExitCode.OK)
    if not args.target:
        raise UsageError(
            "restore needs a snapshot: ID, PATH or s3://BUCKET/PREFIX/ID", "memsync snapshot list"
        )
    done = restore.run_restore(
        config,
        args.target,
        datetime.now(UTC),
        dry_run=args.dry_run,
        force=args.force,
        if_empty=args.if_empty,
    )
    document: dict[str, Any] = {
        "command": "restore",
        "snapshot_id": done.snapshot_id,
        "dry_run": done.dry_run,
        "skipped": done.skipped,
        "recovered": done.recovered,
        "moves": [_move_json(m, done) for m in done.moves],
        "moved_aside": None if done.dry_run or done.skipped else list(done.moved_aside),
        "check_after": done.check.counts() if done.check else None,
    }
    if args.json:
        render.emit_json(document)
    else:
        render.emit_text(_text(done))
    return int(ExitCode.OK)


def _text(done: restore.Restored) -> str:
    """The text report of a restore, a dry run or a skip."""
    if done.skipped:
        text = f"restore {done.snapshot_id}: skipped, the deployment has data (--if-empty)"
    elif done.dry_run:
        text = "\n".join(
            [
                f"would move {m.live} aside to {m.aside} and put the snapshot's copy in its place"
                if m.had_live
                else f"would put the snapshot's copy at {m.live} (nothing there to move aside)"
                for m in done.moves
            ]
            + [f"restore {done.snapshot_id} --dry-run: verified, nothing changed"]
        )
    else:
        counts = done.check.counts() if done.check else {}
        kept = (
            "the old files are in " + ", ".join(done.moved_aside)
            if done.moved_aside
            else "there were no old files to move aside"
        )
        text = (
            f"restored {done.snapshot_id}; {kept}"
            + f"; check: {counts.get('errors', 0)} errors, {counts.get('warnings', 0)} warnings"
        )
        if counts.get("errors"):
            text += " (memsync reconcile settles them)"
    return text


def _move_json(move: restore.Move, done: restore.Restored) -> dict[str, Any]:
    """One target of the JSON report; ``aside`` is null when nothing was (or would be) moved."""
    if done.dry_run or done.skipped:
        aside = move.aside if move.had_live else None
    else:
        aside = move.aside if move.aside in done.moved_aside else None
    return {"live": move.live, "aside": aside}
