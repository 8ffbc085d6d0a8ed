"""``memsync forget`` and ``memsync prune``: deletes through mem0's API, proven afterwards."""

from __future__ import annotations

import argparse
import shlex
import uuid
from datetime import UTC, datetime
from typing import Any

from memsync import forget, restore
from memsync.cli import render
from memsync.cli.common import (
    add_command,
    add_scope_arguments,
    confirm,
    open_deployment,
)
from memsync.erase import apply as erase
from memsync.erase import replicas
from memsync.errors import ExitCode, UsageError
from memsync.state import operation_lock

FORGET_HELP = "delete memories through mem0 (ids or a whole user/agent/run), then prove them gone"
PRUNE_HELP = "delete through mem0 every memory whose expiration_date has passed"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add ``forget`` and ``prune``."""
    parser = add_command(subparsers, "forget", FORGET_HELP, common, epilog, writes=True)
    parser.add_argument("memory_ids", nargs="*", metavar="MEMORY_ID")
    add_scope_arguments(parser)
    parser.add_argument("--dry-run", action="store_true", help="list what would go; change nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument(
        "--no-snapshot", action="store_true", help="skip the safety snapshot taken first"
    )
    parser.add_argument(
        "--erase",
        action="store_true",
        help="also remove the text (with a scope: also of its memories deleted earlier) from "
        "history, raw messages, free pages, WAL files and memsync's copies; a byte search proves "
        "it; with [protect], Litestream's replicas start a new generation and the older ones "
        "(earlier restore points) are removed",
    )
    parser.set_defaults(run=run_forget)
    prune = add_command(subparsers, "prune", PRUNE_HELP, common, epilog, writes=True)
    prune.add_argument(
        "--dry-run", action="store_true", help="list the expired memories; change nothing"
    )
    prune.set_defaults(run=run_expiry_prune)


def _text(command: str, done: forget.Forgotten, args: argparse.Namespace) -> str:
    targets = done.targets
    lines = [
        f"memory-not-found {m}: nothing was touched -> check the id (memsync export-context "
        "--user ID --json lists a user's memory ids)"
        for m in targets.not_found
    ]
    if done.erased and "history_rows_blanked" not in done.erased:  # the copies alone
        ids = done.erased["only_in_copies"]
        verb = "would erase" if done.dry_run else "erased"
        return "\n".join(
            [
                f"{command}: no live memory of this scope; {verb} {len(ids)} a restore rolled "
                f"back from the pre-restore copies: {' '.join(ids)}",
                *(f"  purged {path}" for path in done.erased["purged"]),
                *(replicas.restore_points_note(done.replicas) if done.replicas else []),
            ]
        )
    if done.empty_scope:
        return (
            f"memory-not-found: no memory of {done.scope_text} in the store: nothing was "
            "touched -> check the id (memsync export-context --user ID --json lists a user's "
            "memories)"
        )
    if done.dry_run:
        lines += [f"would delete {m}" for m in targets.all]
        if getattr(args, "erase", False):  # deleted earlier (named, or the scope's past)
            lines += [
                f"would erase the text left of {m} (deleted earlier)"
                for m in targets.already_deleted
            ]
        snapshot_first = (  # as forget_memories: a forget's, never an erasure's
            command == "forget"
            and not getattr(args, "erase", False)
            and not getattr(args, "no_snapshot", True)
        )
        if targets.all and snapshot_first and done.route != "queued":
            lines.append("would take a safety snapshot first (--no-snapshot skips it)")
        if getattr(args, "erase", False) and (targets.all or targets.already_deleted):
            lines.append(
                "would erase their text: history rows, raw messages of emptied scopes, free "
                "pages and WAL files (a byte search proves it), memsync's own copies"
            )
        if done.replicas is not None:
            lines += replicas.restore_points_note(done.replicas)
        lines.append(
            f"{command} --dry-run: {len(targets.all)} memories would go"
            + (f" (route: {done.route})" if done.route else "")
        )
        return "\n".join(lines)
    if targets.not_found:
        return "\n".join(lines)
    if done.pending_id is not None:
        lines.append(
            f"{command}: queued as {done.pending_id} ({len(targets.all)} memories would go now): "
            "no route to write while the app holds the store; applied by memsync pending apply "
            "(run by the daemon every few minutes, or as the app unit's ExecStartPre=) once "
            "the app's agent answers, a window is configured or the app is stopped"
        )
        return "\n".join(lines)
    lines += [
        f"NOT PROVEN {m}: a point, a live event or an entity link is left" for m in done.unproven
    ]
    lines.append(
        f"{command}: deleted {len(done.deleted)} through mem0, recorded {len(done.recorded)} "
        f"history-only; {len(targets.all) - len(done.unproven)} proven gone"
        + (f" (route: {done.route}" if done.route else "")
        + (f", app down {done.downtime_s:.1f} s" if done.downtime_s is not None else "")
        + (")" if done.route else "")
    )
    if done.snapshot_id is not None:
        lines.append(
            f"safety snapshot {done.snapshot_id} taken first: memsync recover "
            f"{_recover_what(args)} --from {done.snapshot_id} brings these memories back if "
            "this was a mistake"
            if not done.erased
            else f"safety snapshot {done.snapshot_id} taken first: it holds them until "
            "memsync snapshot purge-memory rewrites it (listed below)"
        )
    if done.erased:
        lines += _copies_lines(done.erased)
    if done.replicas is not None:
        lines += replicas.restore_points_note(done.replicas)
    return "\n".join(lines)


UNATTRIBUTED_SHOWN = 10


def _recover_what(args: argparse.Namespace) -> str:
    """What ``recover`` needs to bring a forget back: its scope, or its ids (shell-quoted)."""
    for flag, value in (
        ("--user", args.user_id),
        ("--agent", args.agent_id),
        ("--run", args.run_id),
    ):
        if value:
            return f"{flag} {shlex.quote(value)}"
    return " ".join(shlex.quote(memory_id) for memory_id in args.memory_ids)


def _copies_lines(erased: dict[str, Any]) -> list[str]:
    """The erasure line and one line per copy still holding the text, with its command."""
    copies = erased.get("copies") or []
    held = (
        f"{len(copies)} copies memsync knows of still hold it or may:"
        if copies
        else "no copy memsync knows of holds it"
    )
    unverified = erase.unverified(erased)
    searched = (erased.get("verified") or {}).get("files")
    lines = [
        f"erased: {erased['history_rows_blanked']} history rows blanked, NOT verified gone from "
        f"the store files: {'; '.join(unverified)} -> run the same command again (the next "
        "memsync write also retries); if it stays, end the app's long transaction or stop the "
        "app, then run it again"
        if unverified
        else f"erased: {erased['history_rows_blanked']} history rows blanked, both stores "
        f"rewritten ({erased.get('compaction') or 'VACUUM'})"
        + (
            ""
            if searched is None
            else f", {searched} store file{'s' * (searched != 1)} searched: no byte left"
        )
        + f"; {held}"
    ]
    if unverified:
        lines.append(held)
    lines += [
        f"deleted earlier, erased too: {e['memory_id']} (found in {e['found_in']})"
        for e in erased.get("deleted_earlier") or []
    ]
    lines += [
        f"rolled back by a restore, erased from its pre-restore copies: {memory_id}"
        for memory_id in erased.get("only_in_copies") or []
    ]
    unknown = erased.get("unattributed") or []
    if unknown:
        shown = " ".join(unknown[:UNATTRIBUTED_SHOWN]) + (
            " ..." if len(unknown) > UNATTRIBUTED_SHOWN else ""
        )
        lines.append(
            f"{len(unknown)} deleted memories keep text in history that no snapshot or erasure "
            f"ledger ties to a user, agent or run (added and deleted between snapshots): {shown} "
            "-> if one is this scope's: memsync forget ID... --erase (--json lists them all)"
        )
    lines += [
        f"  {c['holds']:<7} {c['kind']:<22} {c['where']}: {c['why']} -> {c['remove']}"
        for c in copies
    ]
    old = erased.get("migration_source")
    if old is not None:  # a switched migration's old store, kept until migrate --cleanup
        lines.append(
            f"migration-source {old['where']}: {old['erased']} stored points erased"
            if old["erased"] is not None
            else f"  {old['holds']:<7} {'migration-source':<22} {old['where']}: not erased: "
            f"{old['why']} -> {old['remove']}"
        )
    return lines


def run_forget(args: argparse.Namespace) -> int:
    """Forget memories; exit 0, 2 (unconfirmed), 3 (unknown id), 4 (not proven), 5 (queued).

    With ``--erase``, 4 also when the bucket's copies could not be read (``holds: unknown``).
    """
    if not args.memory_ids and not (args.user_id or args.agent_id or args.run_id):
        raise UsageError("forget needs MEMORY_ID... or one of --user/--agent/--run")
    if args.memory_ids and (args.user_id or args.agent_id or args.run_id):
        raise UsageError("give memory ids or a scope, not both")
    args.memory_ids = [_memory_id(memory_id) for memory_id in args.memory_ids]
    deployment = open_deployment(args)
    config = deployment.config
    what = (
        f"forget {len(args.memory_ids)} memories"
        if args.memory_ids
        else "forget every memory of the scope"
    )
    if not args.dry_run:
        confirm(args, what + (" and erase their text" if args.erase else ""), shows="the list")
    if not args.dry_run:
        restore.finish_interrupted(deployment)
    with operation_lock(config.state_dir, "forget"), render.progress("deleting") as progress:
        done = forget.run_forget(
            deployment,
            datetime.now(UTC),
            memory_ids=args.memory_ids,
            user_id=args.user_id,
            agent_id=args.agent_id,
            run_id=args.run_id,
            dry_run=args.dry_run,
            take_snapshot=not args.no_snapshot,
            erase=args.erase,
            progress=progress,
        )
    return _emit(args, "forget", done)


def run_expiry_prune(args: argparse.Namespace) -> int:
    """Prune expired memories; exit 0, 4 (not proven), 5 (queued: no route now)."""
    deployment = open_deployment(args)
    config = deployment.config
    if not args.dry_run:
        restore.finish_interrupted(deployment)
    with operation_lock(config.state_dir, "prune"), render.progress("deleting") as progress:
        done = forget.run_expiry_prune(
            deployment, datetime.now(UTC), dry_run=args.dry_run, progress=progress
        )
    return _emit(args, "prune", done)


def _emit(args: argparse.Namespace, command: str, done: forget.Forgotten) -> int:
    if args.json:
        render.emit_json(done.to_json(command))
    else:
        render.emit_text(_text(command, done, args))
    if done.exit_code is ExitCode.OK and _bucket_unknown(done.erased):
        return int(ExitCode.PARTIAL)  # the erasure of the bucket's copies was not observed
    return int(done.exit_code)


def _bucket_unknown(erased: dict[str, Any] | None) -> bool:
    """Whether the erasure report could not read the bucket (its ``s3`` entry is ``unknown``)."""
    copies = (erased or {}).get("copies") or []
    return any(c["kind"] == "s3" and c["holds"] == "unknown" for c in copies)


def _memory_id(text: str) -> str:
    """``text`` as Qdrant spells a point id: a lowercase UUID (mem0's) or an unsigned integer.

    Raises:
        UsageError: anything else (exit 2), before the deployment is opened.
    """
    if text.isascii() and text.isdigit():
        return text
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise UsageError(
            f"{text[:60]!r} is not a memory id: mem0's memory ids are UUIDs",
            "find them with memsync export-context --user ID --json, or forget a whole scope "
            "with --user/--agent/--run",
        ) from None
