"""``memsync recover``: bring back from a snapshot the memories of a scope deleted since."""

from __future__ import annotations

import argparse
import uuid
from datetime import UTC, datetime

from memsync import recover
from memsync.cli import render
from memsync.cli.common import add_command, add_scope_arguments, open_deployment
from memsync.errors import UsageError
from memsync.repository import reading
from memsync.restore import at
from memsync.snapshot import choose

HELP = (
    "bring back through mem0 the memories of a user, agent, run or ids that a snapshot holds "
    "and were deleted or vanished since (same ids, vectors and payloads; a memory changed "
    "after the snapshot with its last text from history, embedded again); everything else is left"
)
SHOWN = 20  # text output lists at most this many memories per status


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``recover`` subcommand."""
    parser = add_command(subparsers, "recover", HELP, common, epilog, writes=True)
    parser.add_argument("memory_ids", nargs="*", metavar="MEMORY_ID")
    add_scope_arguments(parser)
    parser.add_argument(
        "--from",
        dest="source",
        metavar="SNAPSHOT",
        help="the snapshot: ID, PATH, s3://BUCKET/PREFIX/ID or latest (default: latest)",
    )
    parser.add_argument(
        "--before",
        metavar="TIME",
        help="instead of --from: the newest complete, verified snapshot made before TIME "
        "(ISO 8601 with Z or an offset)",
    )
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="instead of a snapshot: the pair as it was at TIME, restored from the Litestream "
        "replicas into the work directory (restore --at's own code; TIME as for --before, or "
        "latest)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="verify, list what would come back; change nothing"
    )
    parser.set_defaults(run=run)


def _scope(args: argparse.Namespace) -> recover.Scope:
    """The scope the arguments name: exactly one of --user, --agent, --run or ids."""
    named = [v for v in (args.user_id, args.agent_id, args.run_id) if v is not None]
    if len(named) + bool(args.memory_ids) != 1:
        raise UsageError(
            "recover needs exactly one scope: --user ID, --agent ID, --run ID or MEMORY_ID...",
            "memsync recover --user ana --from latest --dry-run",
        )
    if any(v == "" for v in named):
        raise UsageError("an empty --user/--agent/--run would match nothing")
    return recover.Scope(
        user_id=args.user_id,
        agent_id=args.agent_id,
        run_id=args.run_id,
        memory_ids=tuple(_normal_id(m) for m in args.memory_ids),
    )


def _normal_id(memory_id: str) -> str:
    """A memory id as Qdrant spells mem0's (a lowercase hyphenated UUID), else as given."""
    try:
        return str(uuid.UUID(memory_id))
    except ValueError:
        return memory_id


def run(args: argparse.Namespace) -> int:
    """Recover; exit 0, 2, 4 (a memory failed to come back), 10, 11, 12 (no route; never queued)."""
    scope = _scope(args)
    if args.at is not None:
        return _run_at(args, scope)
    before = choose.parse_time(args.before) if args.before is not None else None
    source = args.source if args.source is not None or before is not None else choose.LATEST
    deployment = open_deployment(args)
    with render.progress("recovering") as progress:
        done = recover.run_recover(
            deployment,
            source,
            datetime.now(UTC),
            scope,
            dry_run=args.dry_run,
            before=before,
            progress=progress,
        )
    render.emit(args.json, done.to_json(), _text(done))
    return int(done.exit_code)


def _run_at(args: argparse.Namespace, scope: recover.Scope) -> int:
    """``recover --at TIME``: from the pair the replicas held at TIME; exit as ``run``."""
    if args.source is not None or args.before is not None:
        raise UsageError("--at reads the replicas: --from and --before do not apply")
    when = at.parse_at(args.at)
    deployment = open_deployment(args)
    at.require_embedded(deployment, "recover --at")
    now = datetime.now(UTC)
    # <work_dir>/recover-at-<pid>-*: the next run removes one a SIGKILL left
    with reading.scratch(deployment.config, "recover-at") as scratch:
        restored = at.stage_at(deployment, when, scratch / "plain")
        with render.progress("recovering") as progress:
            done = recover.recover_from(
                deployment,
                scratch / "plain",
                restored.restore_id,
                now,
                scope,
                dry_run=args.dry_run,
                progress=progress,
            )
    render.emit(args.json, done.to_json(), _text(done))
    return int(done.exit_code)


def _text(done: recover.Recovered) -> str:
    """Per status, how many and which memories (at most ``SHOWN``), then the outcome."""
    lines = []
    if done.chosen is not None:
        lines.append(f"snapshot {done.snapshot_id} ({done.chosen.where}, chosen: {done.chosen.by})")
    for status in recover.Status:
        chosen = [d for d in done.decisions if d.status is status]
        if not chosen:
            continue
        lines.append(f"{status.value}: {len(chosen)}")
        lines += [
            f"  {d.memory_id}  {d.why}" + (f" ({d.error})" if d.error else "")
            for d in chosen[:SHOWN]
        ]
        if len(chosen) > SHOWN:
            lines.append(f"  ... and {len(chosen) - SHOWN} more (--json lists every one)")
    if done.unattributed:
        lines.append(
            f"deleted since, not in snapshot {done.snapshot_id}: {len(done.unattributed)} "
            "memories of any scope added after it (history holds their text but no scope: "
            "none is brought back; --json lists them, memsync audit shows them)"
        )
    planned = done.count(recover.Status.RECOVER)
    if done.dry_run:
        route = done.route or "none now: the app holds the store and no agent or window can write"
        again = _re_embedded(done, recover.Status.RECOVER)
        lines.append(
            f"recover --dry-run: {planned} would come back"
            + (f" ({again} with their last text, embedded again)" if again else "")
            + f" (route: {route}"
            + (", exit 12 when run" if planned and done.route is None else "")
            + "); nothing changed"
        )
    elif not done.decisions:
        lines.append(f"snapshot {done.snapshot_id} holds no memory of this scope")
    else:
        counts = done.after.counts() if done.after else {}
        again = _re_embedded(done, recover.Status.RECOVERED)
        lines.append(
            f"recovered {done.count(recover.Status.RECOVERED)} from {done.snapshot_id}"
            + (f" ({again} with their last text from history, embedded again)" if again else "")
            + (f" (route: {done.route})" if done.route else "")
            + (f"; check: {counts.get('errors', 0)} errors" if done.after else "")
        )
    return "\n".join(lines)


def _re_embedded(done: recover.Recovered, status: recover.Status) -> int:
    """How many memories of ``status`` come back with their last text, embedded again."""
    return sum(1 for d in done.decisions if d.status is status and d.text is not None)
