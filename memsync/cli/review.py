"""``memsync review``, ``confirm``, ``audit`` and ``export-context``."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

from memsync import review, routes, utc
from memsync.cli import render
from memsync.cli.common import add_command, open_deployment
from memsync.config import parse_duration
from memsync.errors import ExitCode, UsageError
from memsync.state import operation_lock


def _duration(text: str) -> Any:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the four commands."""

    def add(name: str, text: str) -> argparse.ArgumentParser:
        return add_command(subparsers, name, text, common, epilog, writes=name == "confirm")

    parser = add(
        "review", "the memories last confirmed longest ago, with where they came from (reads only)"
    )
    parser.add_argument(
        "--older-than", type=_duration, default=_duration("90d"), metavar="DURATION"
    )
    parser.add_argument("--limit", type=int, default=20, metavar="N")
    parser.set_defaults(run=run_review)
    parser = add("confirm", "stamp confirmed_at on memories through mem0 (a metadata change)")
    parser.add_argument("memory_ids", nargs="+", metavar="MEMORY_ID")
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would be stamped; change nothing"
    )
    parser.set_defaults(run=run_confirm)
    parser = add(
        "audit", "memories added or changed recently, flagging text that did not come from the user"
    )
    parser.add_argument("--since", type=_duration, default=_duration("1d"), metavar="DURATION")
    parser.set_defaults(run=run_audit)
    parser = add(
        "export-context", "a user's live memories with their confirmed dates, ready for a prompt"
    )
    parser.add_argument("--user", dest="user_id", required=True, metavar="ID")
    parser.set_defaults(run=run_export)


def run_review(args: argparse.Namespace) -> int:
    """Print the memories due for review."""
    deployment = open_deployment(args)
    now = datetime.now(UTC)
    points, _ = review.load_points_and_events(deployment, with_events=False)
    rows, due = review.plan_review(points.values(), now, args.older_than, max(args.limit, 0))
    lines = [
        f"{utc.iso_or_none(r.confirmed_at) or 'never':<28} {r.memory_id}  {r.text!r}  "
        f"(user: {r.source.get('user_id', '-')}, source: {r.source.get('source', '-')}, "
        f"role: {r.source.get('role', '-')})"
        for r in rows
    ]
    lines.append(
        f"review: {due} memories not confirmed for {_span(args.older_than)}"
        + (f", the {len(rows)} oldest shown (--limit)" if len(rows) < due else "")
        + " (memsync confirm MEMORY_ID... once checked)"
    )
    return _emit(args, review.Listed(memories=tuple(rows), due=due).to_json(), "\n".join(lines))


def _span(span: timedelta) -> str:
    """``--older-than`` as a person says it: "90 days", "12 hours", "45 seconds"."""
    seconds = int(span.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def run_confirm(args: argparse.Namespace) -> int:
    """Stamp confirmed_at; exit 3 when an id does not exist (the others are stamped)."""
    deployment = open_deployment(args)
    config = deployment.config
    now = datetime.now(UTC)
    if args.dry_run:
        route = deployment.would_take()
        return _emit(
            args,
            review.Confirmed(
                memory_ids=tuple(args.memory_ids),
                at=now,
                taken=routes.Taken(route=route),
                dry_run=True,
            ).to_json(),
            f"would stamp confirmed_at={utc.iso_or_none(now)} on {len(args.memory_ids)} memories "
            f"(route: {route or 'none: exit 12'})",
        )
    taken = routes.Taken()
    with operation_lock(config.state_dir, "confirm"):
        done, missing = review.confirm(deployment, args.memory_ids, now, taken)
    confirmed = review.Confirmed(
        memory_ids=tuple(done), at=now, taken=taken, not_found=tuple(missing)
    )
    _emit(
        args,
        confirmed.to_json(),
        "\n".join(
            [f"memory-not-found {m}" for m in missing]
            + [f"confirmed {len(done)} memories at {utc.iso_or_none(now)} (route: {taken.route})"]
        ),
    )
    return int(ExitCode.PROBLEMS_FOUND if missing else ExitCode.OK)


def run_audit(args: argparse.Namespace) -> int:
    """Print recent changes; flagged ones came from a role other than the user's."""
    deployment = open_deployment(args)
    now = datetime.now(UTC)
    points, events = review.load_points_and_events(deployment, with_events=True)
    found = review.find_audit(events, points, now - args.since)
    lines = [
        f"{'FLAG' if a.flagged else '    '} {utc.iso_or_none(a.at)} {a.kind:<8} {a.memory_id} role={a.role or '-'} "
        f"actor={a.actor_id or '-'} source={a.source or '-'} {a.text!r}"
        for a in found
    ]
    lines.append(
        f"audit: {len(found)} changes since {utc.iso_or_none(now - args.since)}, "
        f"{sum(a.flagged for a in found)} flagged (not from the user)"
    )
    audit = review.Audit(since=now - args.since, changes=tuple(found))
    return _emit(args, audit.to_json(), "\n".join(lines))


def run_export(args: argparse.Namespace) -> int:
    """Print the user's live memories for a prompt."""
    if not args.user_id:
        raise UsageError("export-context needs --user ID")
    deployment = open_deployment(args)
    now = datetime.now(UTC)
    points, _ = review.load_points_and_events(deployment, with_events=False)
    rows = review.build_context(points.values(), args.user_id, now.date())
    lines = [f"- {r.text} ({_when(r)})" for r in rows]
    return _emit(
        args,
        review.Listed(memories=tuple(rows), user_id=args.user_id).to_json(),
        "\n".join(lines) if lines else f"(no live memories for {args.user_id})",
    )


def _when(row: review.Reviewed) -> str:
    """``confirmed DATE`` when a confirmation stamped it, else ``written DATE`` (mem0's own)."""
    day = (utc.iso_or_none(row.confirmed_at) or "")[:10]
    if not day:
        return "date unknown"
    return f"confirmed {day}" if row.confirmed_by == review.CONFIRMED_AT else f"written {day}"


def _emit(args: argparse.Namespace, document: dict[str, Any], text: str) -> int:
    return render.emit(bool(args.json), document, text)
