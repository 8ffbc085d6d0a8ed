"""``memsync snapshot verify --scheduled [--dry-run]``: one run of scheduled verification."""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import UTC, datetime

from memsync.cli import render
from memsync.cli.common import open_deployment
from memsync.errors import ExitCode
from memsync.snapshot import verify_scheduled
from memsync.snapshot.verify import VerifyReport
from memsync.snapshot.verify_scheduled import ScheduledReport, SideResult, SnapshotResult


def run_scheduled(args: argparse.Namespace) -> int:
    """Verify manifests, the newest snapshot and this run's slice on each side; exit 0 or 3.

    ``--dry-run`` prints the plan (reads the listings and manifests only).
    """
    deployment = open_deployment(args)
    now = datetime.now(UTC)
    if args.dry_run:
        report = verify_scheduled.run_scheduled(deployment, now, dry_run=True)
    else:
        with render.byte_progress("verifying", None) as progress:
            report = verify_scheduled.run_scheduled(deployment, now, progress=progress)
    render.emit(bool(args.json), report.to_json(), _text(report))
    return int(ExitCode.OK if report.ok else ExitCode.PROBLEMS_FOUND)


def _text(report: ScheduledReport) -> str:
    lines: list[str] = []
    for side in report.sides:
        lines += _side_lines(side, report.dry_run)
    cycle_days = report.cycle.total_seconds() / 86400
    coverage = ", ".join(f"{s.side} {s.coverage:.0%}" for s in report.sides)
    verdict = "plan only" if report.dry_run else ("ok" if report.ok else "FAILED")
    lines.append(
        f"verify --scheduled: {verdict}; read {sum(s.bytes_read for s in report.sides)} bytes; "
        f"{cycle_days:g}-day cycle covered: {coverage}"
    )
    return "\n".join(lines)


def _side_lines(side: SideResult, dry_run: bool) -> list[str]:
    lines = [
        f"{side.side} {side.where}: {side.manifests} manifests, "
        f"{len(side.incomplete)} incomplete skipped; slice budget {side.plan.budget_bytes} "
        f"of {side.plan.other_bytes} bytes"
    ]
    verb = "would read" if dry_run else "read"
    lines += [f"  {verb} {sid:<20} manifest damaged" for sid in side.damaged_manifests]
    for item in side.plan.items:
        what = "all files" if item.full else ", ".join(item.paths)
        lines.append(
            f"  {verb} {item.snapshot_id:<20} {what} ({item.size_bytes} bytes; {item.reason})"
        )
    for result in side.results:
        if result.expected:
            lines.append(f"  {'EXPECTED':<8} {result.snapshot_id:<20} {expected_line(result)}")
        for finding in result.findings:
            lines.append(
                f"  {finding.severity.value.upper():<8} {finding.code:<20} {finding.path or ''}"
            )
            lines.append(f"           {finding.message}")
    return lines


def expected_line(result: SnapshotResult | VerifyReport) -> str:
    """What a safety snapshot holds by design: its damage, named by code and count. Pure."""
    counts = Counter(f.code for f in result.expected)
    codes = ", ".join(f"{code} {count}" for code, count in sorted(counts.items()))
    by = (result.label or {}).get("by") or "a command"
    return (
        f"safety snapshot taken by {by}: holds the damage it was taken to keep "
        f"({len(result.expected)} findings: {codes}), not a failure"
    )
