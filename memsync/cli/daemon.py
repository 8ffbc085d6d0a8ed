"""``memsync daemon``, ``memsync job`` and ``memsync status``."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from typing import Any

import structlog

from memsync import config as config_module
from memsync import daemon, jobs
from memsync.cli import build_parser, main, render
from memsync.cli.common import add_command, load_config
from memsync.daemon.runner import ChildResult, Entry, JobPlan, JobRunner, job_lock
from memsync.daemon.status import read_status

DAEMON_HELP = (
    "run check, prune, snapshot, retention, verify and replica on the [daemon] schedule "
    "(a systemd service)"
)
JOB_HELP = (
    "run one daemon job now and record it as the daemon would (check, prune, snapshot, "
    "retention, verify, replica, apply-pending)"
)
FORKED = Entry(run=main, load=build_parser)  # jobs run in a fork of this process (daemon.runner)
STATUS_HELP = (
    "the daemon's jobs and the queue: last success, outcome, reason, next run; "
    "exit 3 when a job is overdue or failing"
)


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add ``daemon``, ``job`` and ``status``."""
    parser = add_command(subparsers, "daemon", DAEMON_HELP, common, epilog)
    parser.set_defaults(run=run_daemon, default_log_level="info")
    parser = add_command(subparsers, "job", JOB_HELP, common, epilog)
    parser.add_argument(
        "name", choices=jobs.JOB_NAMES, metavar="JOB", help=", ".join(jobs.JOB_NAMES)
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="show the command the job runs; run nothing"
    )
    parser.set_defaults(run=run_job)
    parser = add_command(subparsers, "status", STATUS_HELP, common, epilog)
    parser.set_defaults(run=run_status)


def run_daemon(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM (exit 0); 10 bad config, 12 another daemon runs."""
    path = config_module.config_path(getattr(args, "config", None), os.environ)
    return daemon.run_daemon(path.absolute(), os.environ, entry=FORKED)


def run_job(args: argparse.Namespace) -> int:
    """Run one job now, in a child process, and record it as the daemon records its runs.

    Waits for a run of the same job the daemon has in progress. Returns the job command's exit
    status; prints its ``--json`` report (with ``--json``) or a summary line.
    """
    config = load_config(args)
    path = config_module.config_path(getattr(args, "config", None), os.environ).absolute()
    job = jobs.job_named(config, args.name)
    if args.dry_run:
        argv = ("memsync", *job.argv, "--json", "--config", str(path))
        plan = JobPlan(job=job.name, argv=argv, state=jobs.state_path(config))
        _emit(args, plan.to_json(), f"would run: {' '.join(argv)}; recorded in {plan.state}")
        return 0
    options = [
        (flag, getattr(args, name))
        for flag, name in (("--log-level", "log_level"), ("--log-format", "log_format"))
        if hasattr(args, name)
    ]
    runner = JobRunner(
        config=config,
        config_path=path,
        environ=os.environ,
        daemon=False,
        child_options=tuple(part for option in options for part in option),
        entry=FORKED,
    )
    with (
        structlog.contextvars.bound_contextvars(job=job.name),
        job_lock(config, job.name, wait=True),
    ):
        run, record, child = runner.run(job, "hand")
    runner.wait_for_pings()
    _relay(args, run, child)
    if run.exit_code in (0, 3, 4, 5):
        _emit(args, dict(run.output), _summary(run, record))
    return run.exit_code


def _relay(args: argparse.Namespace, run: jobs.Run, child: ChildResult) -> None:
    """The child's log lines to stderr, then its ``exit_error`` line (in this command's format)."""
    error = jobs.parse_exit_error(child.stderr)
    for line in child.stderr.splitlines(keepends=True):
        if error is None or jobs.parse_exit_error(line) is None:
            sys.stderr.write(line)
    sys.stderr.flush()
    if error is not None:
        render.exit_error(
            run.exit_code, str(error.get("message")), error.get("hint"), as_json=args.json
        )


def _summary(run: jobs.Run, record: dict[str, Any]) -> str:
    figures = ", ".join(
        f"{key} {value}"
        for key, value in (record.get("summary") or {}).items()
        if isinstance(value, int | float | str) and run.outcome in ("ok", "problems")
    )
    line = f"job {run.name}: {run.outcome} (exit {run.exit_code}) in {run.duration_s:.1f} s"
    line += f" ({figures})" if figures else ""
    if record.get("reason"):
        line += f"\n  reason: {record['reason']}"
    if record.get("next_step"):
        line += f"\n  next:   {record['next_step']}"
    return line


def run_status(args: argparse.Namespace) -> int:
    """Print the daemon's state and the queue; exit 3 when a job is overdue or failing."""
    config = load_config(args)
    now = datetime.now(UTC)
    done = read_status(config, now)
    document = done.to_json()
    _emit(args, document, _status_text(document))
    return done.exit_code


def _status_text(document: dict[str, Any]) -> str:
    running = document["daemon"]
    lines = [
        f"daemon: {'running as pid ' + str(running['pid']) if running['running'] else 'not running'}"
        + (f", running {running['current_job']}" if running["current_job"] else "")
    ]
    for row in document["jobs"]:
        flags = ", ".join(name for name in ("overdue", "failing") if row[name])
        lines.append(
            f"{row['job']:<13} last success {row['last_success_at'] or 'never':<28} "
            f"outcome {row['last_outcome'] or '-':<11} next {row['next_run_at'] or '-'}"
            + (f"  <- {flags}" if flags else "")
        )
        lines += [f"  {label}: {row[key]}" for label, key in _EXPLAINED if flags and row[key]]
        if row["job"] == "verify" and row.get("summary"):
            lines.append(_verify_line(row["summary"]))
    app = document["app_interpreter"]
    if app is None:
        lines.append("writes: the app's interpreter is unknown: set [app] python (memsync doctor)")
    else:
        versions = f" (mem0ai {app['mem0ai']})" if app.get("mem0ai") else ""
        lines.append(f"writes: with the app's interpreter {app['python']}{versions}")
    if document["window_left_open"] is not None:
        lines.append(
            "maintenance window left open by a memsync that is gone: the app may be down "
            "(the next write runs [app] start_command; or start the app by hand)"
        )
    queue = document["queue"]
    if queue["count"] is None:
        lines.append(f"queue: unreadable: {queue['error']}")
    elif queue["count"] == 0:
        lines.append("queue: empty")
    else:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(queue["kinds"].items()))
        lines.append(
            f"queue: {queue['count']} request(s) waiting for a route ({kinds}), "
            f"oldest {queue['oldest_age_s']:.0f} s ({queue['oldest_requested_at']})"
        )
    pending = document["snapshots"]["pending_upload"]
    if pending:
        lines.append(f"snapshots: {pending} wait for upload (memsync snapshot list)")
    lines += _protection_lines(document["protection"])
    return "\n".join(lines)


def _protection_lines(protection: dict[str, Any] | None) -> list[str]:
    """``[protect]``: each file's lag, or what is wrong (memsync protect --status has it all)."""
    if protection is None:
        return []
    if protection["protected"]:
        lags = ", ".join(f"{f['label']} {f['lag_s']:.1f} s" for f in protection["files"])
        return [f"protection: Litestream pid {protection['pid']}; lag {lags}"]
    return [f"protection: {problem}" for problem in protection["problems"]]


_EXPLAINED = (("reason", "reason"), ("next  ", "next_step"))


def _verify_line(summary: dict[str, Any]) -> str:
    """The verify job's figures: last clean run, bytes read, problems, coverage of the cycle."""
    coverage = ", ".join(
        f"{side} {value:.0%}" for side, value in sorted((summary.get("coverage") or {}).items())
    )
    return (
        f"  verified: last clean run {summary.get('last_ok_at') or 'never'}, read "
        f"{summary.get('bytes_read', 0)} bytes, {summary.get('problems', 0)} problems; "
        f"cycle covered: {coverage or '-'}"
    )


def _emit(args: argparse.Namespace, document: dict[str, Any], text: str) -> None:
    if args.json:
        render.emit_json(document)
    else:
        render.emit_text(text)
