"""``memsync restore``: bring a deployment back from a snapshot, both stores together."""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsync import restore
from memsync.cli import render
from memsync.cli.common import add_command, open_deployment
from memsync.deployment import Deployment
from memsync.errors import ExitCode, MemsyncError, UsageError
from memsync.restore import at, to_dir
from memsync.snapshot import choose
from memsync.state import operation_lock

HELP = "verify a snapshot, then replace both stores with it (old files moved aside, never deleted)"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``restore`` subcommand."""
    parser = add_command(subparsers, "restore", HELP, common, epilog)
    parser.add_argument(
        "target",
        nargs="?",
        metavar="ID|PATH|s3://BUCKET/PREFIX/ID|latest",
        help="latest: the newest complete snapshot whose verification passed, local or remote",
    )
    parser.add_argument(
        "--before",
        metavar="TIME",
        help="the newest complete, verified snapshot made before TIME (ISO 8601 with Z or an "
        "offset, e.g. 2026-11-30T12:00Z)",
    )
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="every SQLite file back to TIME from its Litestream replica (memsync protect): "
        "TIME as for --before, or latest (the last position shipped); meta.json from the "
        "newest snapshot at or before TIME",
    )
    parser.add_argument(
        "--to",
        metavar="DIR",
        help="copy both stores into the new or empty directory DIR with a memsync config and a "
        "mem0 config pointing there; the live deployment is not touched",
    )
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
    """Restore (or copy with --to); exit 0, 2 (has data, no --force; a bad --before), 10, 11, 12.

    Exit 4: the stores were swapped but the check after the swap could not run (``check_error``).
    """
    if args.to is not None and (args.force or args.if_empty or args.resume):
        raise UsageError(
            "--to makes a copy in a new directory: --force, --if-empty and --resume do not apply"
        )
    if args.at is not None:
        return _run_at(args)
    before = choose.parse_time(args.before) if args.before is not None else None
    deployment = open_deployment(args)
    config = deployment.config
    if args.resume:
        outcome = restore.finish_interrupted(deployment)
        text = outcome or "no unfinished restore"
        if args.json:
            render.emit_json(restore.Resumed(recovered=outcome).to_json())
        else:
            render.emit_text(text)
        return int(ExitCode.OK)
    if args.to is not None:
        return _run_to(args, deployment, before)
    done = restore.run_restore(
        deployment,
        args.target,
        datetime.now(UTC),
        dry_run=args.dry_run,
        force=args.force,
        if_empty=args.if_empty,
        before=before,
    )
    now = datetime.now(UTC)
    age_s = done.age_s(now)
    if args.json:
        render.emit_json(done.to_json(now))
    else:
        lost = ""
        if done.since_snapshot is not None and not done.skipped:
            lost = "\n" + _lost_text(done.since_snapshot, str(config.state_dir), done.dry_run)
        render.emit_text(_chosen_line(done.chosen) + _text(done) + _age_line(age_s, done) + lost)
    return int(ExitCode.PARTIAL if done.check_error else ExitCode.OK)


def _run_at(args: argparse.Namespace) -> int:
    """``restore --at TIME`` (in place, or ``--to DIR``); exit 0, 2, 4, 10, 11, 12."""
    if args.target is not None or args.before is not None or args.if_empty or args.resume:
        raise UsageError(
            "--at restores from the replicas: a snapshot (ID, latest, --before), --if-empty "
            "and --resume do not apply"
        )
    if args.to is not None and args.force:
        raise UsageError("--to makes a copy in a new directory: --force does not apply")
    when = at.parse_at(args.at)
    deployment = open_deployment(args)
    now = datetime.now(UTC)
    if args.to is not None:
        done = at.run_restore_at_to(deployment, when, now, Path(args.to), dry_run=args.dry_run)
    else:
        done = at.run_restore_at(deployment, when, now, dry_run=args.dry_run, force=args.force)
        if done.at.seam and not args.dry_run:
            done = replace(done, at=replace(done.at, reconciled_by=_settle(deployment)))
    if args.json:
        render.emit_json(done.to_json(datetime.now(UTC)))
    else:
        render.emit_text(_at_text(done))
    failed = done.restored is not None and done.restored.check_error
    unsettled = done.at.reconciled_by is not None and not done.at.reconciled
    return int(ExitCode.PARTIAL if failed or unsettled else ExitCode.OK)


def _settle(deployment: Deployment) -> dict[str, Any]:
    """Reconcile the seam of an in-place ``restore --at`` by its documented rules; what it did.

    As ``memsync reconcile`` (a safety snapshot first, no ``--record-lost``); an error stops
    it and is reported, the restore stands. Reconcile's modules (its routes) load only here.
    """
    from memsync.reconcile import apply as reconcile
    from memsync.snapshot import purge_memory as purge

    config = deployment.config
    try:
        with operation_lock(config.state_dir, "reconcile"):
            outcome = reconcile.run_reconcile(
                deployment,
                datetime.now(UTC),
                dry_run=False,
                only=None,
                take_snapshot=True,
                record_lost=False,
            )
            if outcome.erased_again and outcome.snapshot_id is not None:
                purge.purge_from(
                    deployment, outcome.snapshot_id, outcome.erased_again, datetime.now(UTC)
                )
    except MemsyncError as error:
        return {"actions": None, "check_after": None, "safety_snapshot": None,
                "error": error.message + (f" (hint: {error.hint})" if error.hint else "")}  # fmt: skip
    return {
        "actions": outcome.counts(),
        "check_after": outcome.after.counts() if outcome.after else None,
        "safety_snapshot": outcome.snapshot_id,
        "error": None,
    }


def _at_text(done: at.RestoredAt) -> str:
    """The text report of ``restore --at``: what TIME means per file, what came after, the seam."""
    report = done.at
    when = "latest" if report.time is None else report.to_json()["time"]
    lines = [f"restore --at {when}: each file from its Litestream replica"]
    for entry in report.files:
        where = entry.point.position or f"{entry.point.generation} (its snapshot)"
        line = f"  {entry.label}: {where}, shipped {entry.to_json()['shipped_at']}"
        if entry.last_event_at is not None:
            line += f"; newest history event {entry.last_event_at}"
        lines.append(line)
    lines.append(f"meta.json from the {report.meta_from}")
    lost = report.lost_after
    moment = "the last shipment" if report.time is None else when
    if lost is None:
        lines.append(f"no live history.db: memsync cannot count what was written after {moment}")
    else:
        if done.restored is None:  # --to: a copy; the live stores keep everything
            verb = f"not in the copy, kept in the live store: written after {moment}"
        elif done.restored.dry_run:
            verb = f"would lose what was written after {moment}"
        else:
            verb = f"lost what was written after {moment} (moved aside with the live files)"
        ids = ", ".join(lost["memories"][:10])
        more = f" and {len(lost['memories']) - 10} more" if len(lost["memories"]) > 10 else ""
        lines.append(
            f"{verb}: {lost['history_events']} history events of "
            f"{len(lost['memories'])} memories"
            + (f" ({ids}{more})" if ids else "")
            + f"; {len(lost['only_in_live'])} of them added after it are only in the live store"
        )
    if report.seam:
        settled = report.reconciled_by
        if settled is None:
            how = f"not reconciled; settle them with `{report.reconcile}`"
        elif settled["error"]:
            how = f"reconcile could not run: {settled['error']}"
        else:
            left = (settled["check_after"] or {}).get("errors")
            how = (
                "reconciled, and the check after it is clean"
                if report.reconciled
                else f"reconcile ran ({settled['actions']}) and {left} errors remain: see "
                "`memsync reconcile --dry-run`"
            )
        lines.append(
            f"the seam: {len(report.seam)} memories in one store only at TIME (writes in "
            f"flight), {how}:"
        )
        lines += [f"  {s['code']} {s['memory_id']}" for s in report.seam]
    else:
        lines.append("the seam: the two stores agree, memory by memory")
    if done.copied is not None:
        copied = done.copied
        layout = copied.layout
        counts = copied.check.counts() if copied.check else {}
        lines.append(
            f"restore --at {when} --to {layout.root} --dry-run: restored and checked in the work "
            "directory; nothing written"
            if copied.dry_run
            else f"copied into {layout.root} (the live deployment was not touched); check: "
            f"{counts.get('points', 0)} points, {counts.get('errors', 0)} errors\n"
            f"look at it with: memsync --config {layout.config} check"
        )
    elif done.restored is not None and done.restored.dry_run:
        lines += [
            f"would move {m.live} aside to {m.aside} and put the restored copy in its place"
            if m.had_live
            else f"would put the restored copy at {m.live} (nothing there to move aside)"
            for m in done.restored.moves
        ]
        lines.append(
            f"restore --at {when} --dry-run: restored and checked in the work directory; "
            "nothing changed"
        )
    else:
        assert done.restored is not None
        lines.append(_text(done.restored))
    return "\n".join(lines)


def _age_line(age_s: float | None, done: restore.Restored) -> str:
    """What the restored pair may lack: the app's writes since the snapshot was taken."""
    if age_s is None or done.skipped:
        return ""
    hours = age_s / 3600
    minutes = round(age_s / 60)
    when = (
        f"{hours:.1f} hours"
        if hours >= 1
        else ("less than a minute" if minutes < 1 else f"{minutes} minute{'s' * (minutes != 1)}")
    )
    verb = "would lack" if done.dry_run else "lacks"
    return (
        f"\nthe snapshot was taken {when} ago: the restored deployment {verb} what the app "
        "wrote since then"
    )


def _run_to(args: argparse.Namespace, deployment: Deployment, before: datetime | None) -> int:
    """``restore --to DIR``: a copy for inspection; exit 0, 2, 10, 11."""
    done = to_dir.run_restore_to(
        deployment,
        args.target,
        datetime.now(UTC),
        Path(args.to),
        dry_run=args.dry_run,
        before=before,
    )
    layout = done.layout
    if args.json:
        render.emit_json(done.to_json())
        return int(ExitCode.OK)
    if done.dry_run:
        text = (
            f"restore {done.snapshot_id} --to {layout.root} --dry-run: verified; would write "
            f"{layout.vectors}, {layout.history_db}, {layout.config} and {layout.mem0_config}"
        )
    else:
        counts = done.check.counts() if done.check else {}
        text = (
            f"copied {done.snapshot_id} into {layout.root} (the live deployment was not touched); "
            f"check: {counts.get('points', 0)} points, {counts.get('errors', 0)} errors\n"
            f"look at it with: memsync --config {layout.config} check   (mem0's dict: "
            f"{layout.mem0_config})"
        )
    render.emit_text(_chosen_line(done.chosen) + text)
    return int(ExitCode.OK)


def _chosen_line(chosen: choose.Chosen | None) -> str:
    """``chose <id> (<where>): ...`` when ``latest`` or ``--before`` picked the snapshot."""
    if chosen is None:
        return ""
    why = (
        "the newest complete snapshot whose verification passed"
        if chosen.before is None
        else f"the newest complete, verified snapshot made before {chosen.to_json()['before']}"
    )
    line = f"chose {chosen.snapshot_id} ({chosen.where}): {why}\n"
    if chosen.passed_over:
        newest = chosen.passed_over[-1]
        line += (
            f"passed over {len(chosen.passed_over)} newer snapshot(s) with no passing "
            f"verification: {' '.join(chosen.passed_over)} -> memsync snapshot verify {newest} "
            "records one (a failed one stays passed over), or name it by id\n"
        )
    return line


def _planned(move: restore.Move) -> str | None:
    """A dry run's line for one move (None: a table neither side has)."""
    if not move.staged:  # a table the snapshot does not hold (pgvector)
        if not move.had_live:
            return None
        return (
            f"would move {move.live} aside to {move.aside}, with no replacement (the snapshot "
            "has none; mem0 creates it empty)"
        )
    if move.had_live:
        return (
            f"would move {move.live} aside to {move.aside} and put the snapshot's copy in its place"
        )
    return f"would put the snapshot's copy at {move.live} (nothing there to move aside)"


def _text(done: restore.Restored) -> str:
    """The text report of a restore, a dry run or a skip."""
    if done.skipped:
        text = f"restore {done.snapshot_id}: skipped, the deployment has data (--if-empty)"
    elif done.dry_run:
        text = "\n".join(
            [line for m in done.moves if (line := _planned(m))]
            + [f"restore {done.snapshot_id} --dry-run: verified, nothing changed"]
        )
    else:
        counts = done.check.counts() if done.check else {}
        kept = (
            "the old files are in " + ", ".join(done.moved_aside)
            if done.moved_aside
            else "there were no old files to move aside"
        )
        checked = (
            f"the check after the swap could not run: {done.check_error}; run `memsync check` "
            "once that is fixed (older pre-restore copies were left in place)"
            if done.check_error
            else f"check: {counts.get('errors', 0)} errors, {counts.get('warnings', 0)} warnings"
        )
        text = f"restored {done.snapshot_id}; {kept}; {checked}"
        if done.verification is not None and done.verification["snapshot"] == "hashed":
            text += (
                " (the files' sha256 matched the manifest while they were copied: the"
                " verification its create recorded stands"
                + (
                    ", and so does its check"
                    if done.verification["check_after"] == "recorded"
                    else ""
                )
                + ")"
            )
        if counts.get("errors"):
            text += " (memsync reconcile settles them)"
        if done.pre_restore_removed:
            text += "\nremoved older pre-restore copies ([restore] keep_pre_restore): " + ", ".join(
                done.pre_restore_removed
            )
    return text


def _lost_text(lost: dict[str, Any], state_dir: str, dry_run: bool) -> str:
    """The report's line on what the snapshot lacks that memsync saw. Pure."""
    if lost["last_check_at"] is None:
        return (
            f"no check is recorded in {state_dir} (memsync's state did not survive, or it never "
            "checked): memsync cannot say what was written after the snapshot"
        )
    seen = (
        f"the last check, {_ago(lost['last_check_age_s'])} ago, saw {lost['memories_seen']:,} "
        "memories"
    )
    if lost["after_snapshot"] is None:  # stamped later than now
        return (
            f"the last check is stamped {lost['last_check_at']}, later than now (a clock set "
            "wrong?): memsync cannot say what was written after the snapshot"
        )
    if not lost["after_snapshot"]:
        return (
            f"{seen}, before this snapshot was taken: memsync cannot say what was written after it"
        )
    held = lost["memories_in_snapshot"]
    if not lost["known"]:
        return f"{seen}; the snapshot's manifest does not count its memories"
    scopes = ", ".join(f"{s['scope']} {s['seen'] - s['in_snapshot']:,}" for s in lost["scopes"][:8])
    more = f", {len(lost['scopes']) - 8} more scopes" if len(lost["scopes"]) > 8 else ""
    verb = "would not be" if dry_run else "are not"
    if not lost["missing"] and not scopes:
        return (
            f"{seen}; this snapshot holds {held:,}: the counts show none missing "
            "(a write offset by a delete would not show)"
        )
    if not lost["missing"]:  # as many in all, but some scopes hold fewer: deletes offset them
        return (
            f"{seen}; this snapshot holds {held:,}, as many or more in all, but fewer in some "
            f"scopes: memories written after it {verb} in it ({scopes}{more})"
        )
    return (
        f"{seen}; this snapshot holds {held:,}: about {lost['missing']:,} written after it "
        f"{verb} in it" + (f" ({scopes}{more})" if scopes else "")
    )


def _ago(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
