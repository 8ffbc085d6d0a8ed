"""``memsync daemon`` and ``memsync status``."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from typing import Any

from memsync import config as config_module
from memsync import daemon, jobs
from memsync.cli import render
from memsync.cli.common import add_command, load_config
from memsync.errors import ExitCode

DAEMON_HELP = (
    "run check, prune, snapshot and retention on the [daemon] schedule (a systemd service)"
)
JOB_HELP = (
    "run one daemon job now (check, prune, snapshot, retention), as the daemon or a timer would"
)
STATUS_HELP = (
    "the daemon's jobs: last success, outcome, next run; exit 3 when one is overdue or failing"
)


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add ``daemon`` and ``status``."""
    parser = add_command(subparsers, "daemon", DAEMON_HELP, common, epilog)
    parser.set_defaults(run=run_daemon, default_log_level="info")
    parser = add_command(subparsers, "job", JOB_HELP, common, epilog)
    parser.add_argument(
        "name", choices=jobs.JOB_NAMES, metavar="JOB", help=", ".join(jobs.JOB_NAMES)
    )
    parser.set_defaults(run=run_job)
    parser = add_command(subparsers, "status", STATUS_HELP, common, epilog)
    parser.set_defaults(run=run_status)


def run_daemon(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM (exit 0); 10 bad config, 12 another daemon runs."""
    path = config_module.config_path(getattr(args, "config", None), os.environ)
    return daemon.run_daemon(path.absolute(), os.environ)


def run_job(args: argparse.Namespace) -> int:
    """Run one daemon job now, as the daemon would (for systemd timers); its command's exit."""
    from memsync.cli import main

    config = load_config(args)
    argv = jobs.job_argv(config, args.name)
    extra = ["--json"] if args.json else []
    return main(
        [
            *argv,
            *extra,
            "--config",
            str(config_module.config_path(getattr(args, "config", None), os.environ)),
        ]
    )


def run_status(args: argparse.Namespace) -> int:
    """Print the daemon's state; exit 3 when a job is overdue or failing, or no daemon runs."""
    config = load_config(args)
    state = jobs.load_state(config)
    pid = jobs.daemon_pid(config)
    rows = jobs.job_health(config, state, datetime.now(UTC))
    document: dict[str, Any] = {
        "command": "status",
        "daemon": {
            "running": pid is not None,
            "pid": pid,
            "current_job": state.get("current_job") if pid else None,
            "started_at": state.get("started_at"),
            "stopped_at": state.get("stopped_at"),
        },
        "jobs": rows,
    }
    bad = [r for r in rows if r["overdue"] or r["failing"]]
    document["ok"] = not bad
    lines = [
        f"daemon: {'running as pid ' + str(pid) if pid else 'not running'}"
        + (
            f", running {document['daemon']['current_job']}"
            if document["daemon"]["current_job"]
            else ""
        )
    ]
    for row in rows:
        flags = ", ".join(name for name in ("overdue", "failing") if row[name])
        lines.append(
            f"{row['job']:<10} last success {row['last_success_at'] or 'never':<28} "
            f"outcome {row['last_outcome'] or '-':<9} next {row['next_run_at'] or '-'}"
            + (f"  <- {flags}" if flags else "")
        )
    if args.json:
        render.emit_json(document)
    else:
        render.emit_text("\n".join(lines))
    return int(ExitCode.PROBLEMS_FOUND if bad else ExitCode.OK)
