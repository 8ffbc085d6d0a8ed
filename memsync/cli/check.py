"""``memsync check``: prove that the stores agree, finding by finding (reads only)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from memsync import check
from memsync.cli import render
from memsync.cli.common import add_command, load_config
from memsync.stores.vector_store import vector_store_for

HELP = "prove that vectors and history agree (reads only; exit 3 on error findings)"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``check`` subcommand."""
    parser = add_command(subparsers, "check", HELP, common, epilog)
    parser.add_argument(
        "--limit",
        type=int,
        default=50,
        metavar="N",
        help="findings shown in the text report (default 50; --json shows all)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Capture both stores, judge them, print the report; return 0 or 3."""
    config = load_config(args)
    with render.progress("reading points") as progress:
        report = check.run_check(config, datetime.now(UTC), progress=progress)
    if args.json:
        render.emit_json(render.check_json(report, vector_store_for(config).kind))
    else:
        render.emit_text(render.check_text(report, limit=max(args.limit, 0)))
    return int(report.exit_code)
