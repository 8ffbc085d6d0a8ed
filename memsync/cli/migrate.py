"""``memsync migrate``: copy the deployment to a new embedder or vector store, then verify it."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path

from memsync import config as config_module
from memsync.cli import migrate_cleanup, render
from memsync.cli.common import add_command, open_deployment
from memsync.deployment import Deployment
from memsync.errors import UsageError
from memsync.migrate import switch_report
from memsync.migrate.plan import DEFAULT_BATCH_SIZE, MigratePlan
from memsync.migrate.run import Migrated, run_migrate
from memsync.migrate.switch import run_switch

HELP = (
    "copy every memory (same ids and payloads) into the vector store and embedder that "
    "NEW.toml names, re-embedding when the embedder changes, while the app runs; then verify "
    "the target; with --switch, move the app onto it"
)
SHOWN = 20  # text output lists at most this many differences and not-copied ids


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``migrate`` subcommand."""
    parser = add_command(subparsers, "migrate", HELP, common, epilog)
    parser.add_argument(
        "--to",
        metavar="NEW.toml",
        help="the memsync config naming the target vector store and embedder",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"points written (and embedded) per batch (default: {DEFAULT_BATCH_SIZE})",
    )
    parser.add_argument(
        "--switch",
        action="store_true",
        help="after a verified copy: snapshot the source, stop the app's writes, catch up, "
        "write the app's new mem0 config and start the app on the new store",
    )
    parser.add_argument(
        "--cleanup",
        action="store_true",
        help="remove the old store a switched migration kept, once [migrate] keep_source_days "
        "have passed (no --to: the journal names the migration)",
    )
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Migrate; exit 0 (verified), 3 (a difference), 10 (refused), 11, 12."""
    if args.cleanup:
        if args.to is not None or args.switch:
            raise UsageError(
                "--cleanup takes no --to or --switch: the migration's journal names it"
            )
        return migrate_cleanup.run(args)
    if args.to is None:
        raise UsageError("the following argument is required: --to")
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1 (got {args.batch_size})")
    deployment = open_deployment(args)
    to = Path(args.to)
    new_config = config_module.load(to, os.environ)
    if args.switch:
        return _switch(args, deployment, new_config, to)
    with render.progress("migrating") as progress:
        done = run_migrate(
            deployment,
            new_config,
            to,
            datetime.now(UTC),
            dry_run=args.dry_run,
            batch_size=args.batch_size,
            progress=progress,
        )
    render.emit(args.json, done.to_json(), _text(done))
    return int(done.exit_code)


def _switch(
    args: argparse.Namespace,
    deployment: Deployment,
    new_config: config_module.Config,
    to: Path,
) -> int:
    """``--switch``: the switch's report after the final catch-up's."""
    path = config_module.config_path(getattr(args, "config", None), os.environ)
    with render.progress("catching up") as progress:
        done = run_switch(
            deployment, path, new_config, to, os.environ,
            dry_run=args.dry_run, batch_size=args.batch_size, progress=progress,
        )  # fmt: skip
    text = "\n".join([_text(done.migrated, switching=True), *switch_report.text_lines(done)])
    render.emit(args.json, done.to_json(), text)
    return int(done.exit_code)


def _plan_text(plan: MigratePlan) -> list[str]:
    source, target = plan.source, plan.target
    vectors = (
        f"re-embed {plan.memories + plan.entities} points ({plan.embedder_calls} embedder calls)"
        if plan.re_embed
        else "copy the vectors as they are (no embedder call)"
    )
    return [
        f"from: {source.kind} {source.where} ({source.embedder_provider}, {source.dims} dims)",
        f"to:   {target.kind} {target.where} ({target.embedder_provider}, {target.dims} dims)",
        f"memories: {plan.memories}, entities: {plan.entities}; {vectors}",
        f"batches: {plan.batches} of up to {plan.batch_size}; target size about "
        f"{plan.disk_bytes / 1e6:.1f} MB",
    ]


def _text(done: Migrated, switching: bool = False) -> str:
    lines = _plan_text(done.plan)
    if done.dry_run:
        lines.append("migrate --dry-run: nothing changed")
        return "\n".join(lines)
    copied = done.copied
    lines.append(
        f"copied {copied.copied} points ({copied.re_embedded} re-embedded), "
        f"{copied.skipped} already in the target" + (" (resumed)" if done.resumed else "")
    )
    if done.removed or done.replaced:
        lines.append(
            f"caught up with the source: {len(done.replaced)} target points it changed copied "
            f"again, {len(done.removed)} it no longer has deleted from the target"
        )
    for difference in done.differences[:SHOWN]:
        lines.append(f"  {difference.what}: {difference.point_id}  {difference.detail}")
    if len(done.differences) > SHOWN:
        lines.append(f"  ... and {len(done.differences) - SHOWN} more (--json lists every one)")
    if done.sampled:
        missed = len(done.index_misses) + sum(d.what == "search" for d in done.differences)
        lines.append(
            f"search: {done.sampled - missed} of {done.sampled} sampled memories found first "
            "for their own text"
        )
    if done.index_misses:
        lines.append(
            f"search: {len(done.index_misses)} of them missed by the target's approximate index "
            "(pgvector HNSW), though each vector is exactly its text's embedding: the app's "
            "searches will miss as often (not a difference)"
        )
    if done.not_copied:
        lines.append(
            f"{len(done.not_copied)} memories written by the app since the capture are not "
            "copied (not_copied in --json): the same memsync migrate run again catches the "
            "target up, and --switch does it once more with the app's writes stopped"
        )
    if done.check_after is not None:
        counts = done.check_after.counts()
        lines.append(
            f"check on the new config: {counts['errors']} errors, {counts['warnings']} warnings"
            + (
                " (the app's writes since the capture show there as missing-point and the "
                "like until the catch-up: not damage, do not reconcile them on the new config)"
                if done.not_copied and counts["errors"]
                else ""
            )
        )
    verdict = "verified" if not done.differences else f"{len(done.differences)} differences"
    lines.append(
        f"migrate: {verdict}"
        + ("" if switching else "; the app still uses the old store (--switch moves it)")
    )
    if done.differences:
        lines.append(
            "hint: run the same memsync migrate again: it copies again what the source changed "
            "and deletes from the target what the source no longer has, then verifies; a "
            "difference that stays means the target was changed behind memsync: remove the "
            f"target {done.plan.target.where} and the journal migrate.json in state_dir, then "
            "migrate afresh"
        )
    return "\n".join(lines)
