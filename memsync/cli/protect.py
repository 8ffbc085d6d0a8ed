"""``memsync protect [--dry-run] | --status``: continuous protection of the SQLite files by Litestream."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from memsync import protect, protection, restore
from memsync.cli import render
from memsync.cli.common import add_command, open_deployment
from memsync.errors import ExitCode
from memsync.jobs.state import daemon_pid
from memsync.model import Severity
from memsync.state import operation_lock

HELP = (
    "switch the SQLite files to WAL and write the Litestream configuration the daemon runs; "
    "--status: each file's replica, lag and bytes shipped"
)


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add the ``protect`` subcommand."""
    parser = add_command(subparsers, "protect", HELP, common, epilog)
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--dry-run",
        action="store_true",
        help="print the Litestream configuration and the files that would switch to WAL; "
        "change nothing",
    )
    what.add_argument(
        "--status",
        action="store_true",
        help="per file: replicated or not, lag, last position shipped, bytes shipped in the "
        "last hour (reads only; exit 3 when a file is unprotected or lagging)",
    )
    what.add_argument(
        "--verify",
        action="store_true",
        help="restore every replica to its last shipment in the work directory and check the "
        "pair, keeping nothing (exit 3 when the restored pair has errors)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Protect (or show the plan, the status, or verify the replicas); exit 0, 2, 3, 10, 11, 12, 75.

    3: ``--status`` found a file unprotected, or ``--verify`` an error in the restored pair.
    """
    deployment = open_deployment(args)
    config = deployment.config
    if args.status:
        status = protection.read_status(deployment.vector_store, config, datetime.now(UTC))
        code = ExitCode.PROBLEMS_FOUND if status.problems else ExitCode.OK
        render.emit(bool(args.json), status.to_json(), status_text(status))
        return int(code)
    if args.verify:
        verified = protect.verify_replicas(deployment, datetime.now(UTC))
        render.emit(bool(args.json), verified.to_json(), verify_text(verified))
        return int(ExitCode.OK if verified.ok else ExitCode.PROBLEMS_FOUND)
    if args.dry_run:
        done = protect.apply_protect(deployment, dry_run=True)
    else:
        restore.finish_interrupted(deployment)  # never switch files a restore left half swapped
        with operation_lock(config.state_dir, "protect"):
            done = protect.apply_protect(deployment)
    return render.emit(bool(args.json), done.to_json(), text(done, daemon_pid(config)))


def text(done: protect.Protected, daemon: int | None = None) -> str:
    """The human report: the WAL switch, the replicas, the configuration file."""
    tuned = done.tuned
    lines = []
    if tuned.changed:
        verb = "would switch" if done.dry_run else "switched"
        route = tuned.route or f"no route open now ({tuned.blocked})"
        lines.append(f"protect: {verb} {len(tuned.changed)} files to WAL mode (route: {route})")
    else:
        lines.append("protect: every SQLite file is in WAL mode already: nothing to switch")
    for path, replica in done.replicas.items():
        lines.append(f"{path} -> {replica}")
    if done.dry_run:
        would = "would be written" if done.changed else "unchanged"
        lines.append(f"protect --dry-run: Litestream configuration {done.config_file} ({would}):")
        lines.append(protection.render(done.litestream).rstrip())
    else:
        state = "written" if done.changed else "unchanged"
        runs = (
            "the memsync daemon runs Litestream with it"
            if daemon is not None
            else "no memsync daemon is running: start it (memsync daemon, or systemctl start "
            "memsync) and it runs Litestream with it"
        )
        lines.append(
            f"protect: Litestream configuration {done.config_file} {state}; {runs} "
            "(memsync protect --status shows the replicas)"
        )
    return "\n".join(lines)


def status_text(status: protection.ProtectionStatus) -> str:
    """The human ``--status``: one line per file, then the problems."""
    running = f"Litestream runs as pid {status.pid}" if status.pid else "Litestream is not running"
    lines = [running]
    for entry in status.files:
        if entry.replicated:
            lines.append(
                f"{entry.label}: lag {entry.lag_s:.1f} s, last shipped {entry.position} at "
                f"{entry.shipped_at:%Y-%m-%dT%H:%M:%SZ}, {entry.bytes_last_hour} bytes in the "
                f"last hour -> {entry.replica}"
            )
        else:
            lines.append(f"{entry.label}: not replicated: {entry.problem}")
    lines += [f"problem: {problem}" for problem in status.problems]
    if not status.problems:
        lines.append("protect: every file is replicated within max_lag_s")
    return "\n".join(lines)


def verify_text(verified: protect.ReplicasVerified) -> str:
    """The human ``--verify``: each file's position restored, then the check of the pair."""
    lines = ["protect --verify: every replica restored to its last shipment (work directory)"]
    for entry in verified.at.files:
        lines.append(
            f"  {entry.label}: {entry.point.position or entry.point.generation}, shipped "
            f"{entry.to_json()['shipped_at']}"
        )
    counts = verified.check.counts()
    errors = [f for f in verified.check.findings if f.severity == Severity.ERROR]
    lines += [f"  {f.code} {f.memory_id or f.path or ''}: {f.message}" for f in errors]
    verdict = "clean" if verified.ok else f"{counts['errors']} errors"
    lines.append(
        f"protect --verify: the restored pair holds {counts['points']} points and checks {verdict}"
    )
    return "\n".join(lines)
