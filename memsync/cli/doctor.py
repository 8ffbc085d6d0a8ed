"""``memsync doctor``: health check of every path and store, for people and monitoring."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from memsync import doctor
from memsync.cli import render
from memsync.cli.common import add_command, open_deployment
from memsync.errors import ExitCode

HELP = "health check of paths, mounts, locks, SQLite files, versions and a check summary"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``doctor`` subcommand."""
    parser = add_command(subparsers, "doctor", HELP, common, epilog)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run every probe; print the results; return 0, or 3 when a result is an error."""
    deployment = open_deployment(args)
    report = doctor.run_doctor(deployment, datetime.now(UTC))
    if args.json:
        render.emit_json(report.to_json())
    else:
        render.emit_text(render.doctor_text(report))
    return int(ExitCode.OK if report.ok else ExitCode.PROBLEMS_FOUND)
