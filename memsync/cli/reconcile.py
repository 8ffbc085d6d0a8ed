"""``memsync reconcile``: make the stores agree again, through mem0, with a journal."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from memsync import findings, restore
from memsync.cli import render
from memsync.cli.common import add_command, open_deployment
from memsync.errors import UsageError
from memsync.reconcile import apply as reconcile
from memsync.snapshot import purge_memory as purge
from memsync.state import operation_lock

HELP = "plan and apply the repairs check's findings call for (tombstones win; nothing invented)"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``reconcile`` subcommand."""
    parser = add_command(subparsers, "reconcile", HELP, common, epilog, writes=True)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan; change nothing (exit 3 when there is work)",
    )
    policy = sorted(findings.repaired(findings.Repair.POLICY))
    parser.add_argument(
        "--only",
        metavar="CODE,...",
        help=f"answer only these finding codes (needed for {', '.join(policy)})",
    )
    parser.add_argument(
        "--no-snapshot", action="store_true", help="skip the safety snapshot taken first"
    )
    parser.add_argument(
        "--record-lost",
        action="store_true",
        help="record memories that no snapshot can bring back as deleted",
    )
    parser.add_argument(
        "--create-history",
        action="store_true",
        help="create history.db when it does not exist (a missing file more often means a "
        "wrong mem0_dir or history_db_path: check the path first)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Plan, apply, check again; exit 0, 3 (dry run with work), 4 (some failed or unrecoverable)."""
    deployment = open_deployment(args)
    config = deployment.config
    only = _parse_only(args.only)
    if args.dry_run:
        outcome = reconcile.run_reconcile(
            deployment,
            datetime.now(UTC),
            dry_run=True,
            only=only,
            take_snapshot=False,
            record_lost=args.record_lost,
            create_history=args.create_history,
        )
    else:
        # a restore that died is finished or rolled back first
        restore.finish_interrupted(deployment)
        with operation_lock(config.state_dir, "reconcile"):
            outcome = reconcile.run_reconcile(
                deployment,
                datetime.now(UTC),
                dry_run=False,
                only=only,
                take_snapshot=not args.no_snapshot,
                record_lost=args.record_lost,
                create_history=args.create_history,
            )
            if outcome.erased_again and outcome.snapshot_id is not None:
                # the safety snapshot captured them live: it must not keep what was erased
                purge.purge_from(
                    deployment, outcome.snapshot_id, outcome.erased_again, datetime.now(UTC)
                )
    if args.json:
        render.emit_json(outcome.to_json())
    else:
        render.emit_text(_text(outcome, outcome.counts()))
    return int(outcome.exit_code)


def _parse_only(value: str | None) -> frozenset[str] | None:
    """``--only a,b`` as a set of check's finding codes (None when not given)."""
    if value is None:
        return None
    only = frozenset(code.strip() for code in value.split(",") if code.strip())
    if not only:
        raise UsageError(
            "--only needs at least one finding code", "e.g. --only resurrected-point,orphan-point"
        )
    unknown = sorted(only - set(findings.codes(findings.Source.CHECK)))
    if unknown:
        raise UsageError(
            f"--only: unknown finding codes {unknown}", "see docs/reference/findings.md"
        )
    return only


def _text(outcome: reconcile.Outcome, counts: dict[str, int]) -> str:
    lines = [
        f"{a.status.upper():<13} {a.kind!s:<15} {a.code:<22} {a.memory_id or ''}\n"
        f"{'':<14}{a.why}" + (f"\n{'':<14}error: {a.error}" if a.error else "")
        for a in outcome.actions
    ]
    if outcome.dry_run:
        lines.append(
            f"reconcile --dry-run: {len(outcome.actions)} actions planned, nothing changed"
            + (f" (route: {outcome.route})" if outcome.route else "")
        )
    else:
        after = outcome.after.counts() if outcome.after else {}
        lines.append(
            f"reconcile: {counts['done']} applied, {counts['failed']} failed, "
            f"{counts['unrecoverable']} unrecoverable"
            + (f"; safety snapshot {outcome.snapshot_id}" if outcome.snapshot_id else "")
            + (f"; check after: {after.get('errors', 0)} errors" if after else "")
            + (f"; route {outcome.route}" if outcome.route else "")
            + (f", app down {outcome.downtime_s:.1f} s" if outcome.downtime_s is not None else "")
        )
    if outcome.erased_again:
        lines.append(
            f"erased again: {len(outcome.erased_again)} erased memories an older store brought back"
            + (
                "; NOT verified gone: "
                + "; ".join(outcome.erased_unverified)
                + " (run memsync forget ID --erase for each once the files are free)"
                if outcome.erased_unverified
                else "; no byte of their texts left in the store files"
            )
        )
    if outcome.read:
        lines.append(_read_line(outcome))
    return "\n".join(lines)


def _read_line(outcome: reconcile.Outcome) -> str:
    """What the search for lost points read: snapshots by side, those skipped, bytes fetched."""
    read = [r for r in outcome.read if r.skipped is None]
    local = [r.snapshot_id for r in read if r.side == "local"]
    remote = [r.snapshot_id for r in read if r.side == "remote"]
    skipped = len(outcome.read) - len(read)
    parts = [
        f"local {', '.join(local)}" if local else "",
        f"remote {', '.join(remote)}" if remote else "",
    ]
    return (
        f"snapshots read for lost points: {'; '.join(p for p in parts if p) or 'none'}"
        f" ({skipped} skipped by their manifest or unreadable);"
        f" {outcome.fetched_bytes} bytes fetched into the work directory, removed since"
    )
