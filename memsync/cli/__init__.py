"""memsync's command line: parser, logging setup, dispatch, and exceptions -> exit codes.

``main`` is the only place an exception becomes an exit status (docs/reference/contract.md). On exit 1 or
>= 10 stdout stays empty and stderr gets one line (a JSON ``exit_error`` with ``--json``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Sequence

import structlog

from memsync import __version__, log
from memsync.cli import check as check_command
from memsync.cli import config as config_command
from memsync.cli import daemon as daemon_command
from memsync.cli import doctor as doctor_command
from memsync.cli import forget as forget_command
from memsync.cli import migrate as migrate_command
from memsync.cli import pending as pending_command
from memsync.cli import reconcile as reconcile_command
from memsync.cli import recover as recover_command
from memsync.cli import render
from memsync.cli import repair_meta as repair_meta_command
from memsync.cli import restore as restore_command
from memsync.cli import review as review_command
from memsync.cli import snapshot as snapshot_command
from memsync.cli import tune as tune_command
from memsync.errors import EXIT_CODE_TABLE, ExitCode, MemsyncError

logger = structlog.get_logger(__name__)

EPILOG = "exit status:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODE_TABLE)
COMMANDS = (
    check_command,
    doctor_command,
    snapshot_command,
    restore_command,
    recover_command,
    migrate_command,
    reconcile_command,
    forget_command,
    pending_command,
    review_command,
    daemon_command,
    config_command,
    tune_command,
    repair_meta_command,
)


def common_options() -> argparse.ArgumentParser:
    """Options every command accepts before or after its name (defaults only at top level)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="config file (default: $MEMSYNC_CONFIG, else /etc/memsync/memsync.toml)",
    )
    parent.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print one JSON document on stdout",
    )
    parent.add_argument(
        "--log-level",
        default=argparse.SUPPRESS,
        choices=("debug", "info", "warning", "error"),
        help="default: warning",
    )
    parent.add_argument(
        "--log-format",
        default=argparse.SUPPRESS,
        choices=("auto", "json", "console"),
        help="default: auto",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    """Return the full parser with one subcommand per command module."""
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="memsync",
        description="Keep a self-hosted mem0 deployment's vectors and history in agreement.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"memsync {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.register(subparsers, common, EPILOG)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one memsync command and return its exit status (see ``memsync --help``)."""
    parser = build_parser()
    for stream in (sys.stdout, sys.stderr):  # never die on a character the terminal lacks
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    if threading.current_thread() is not threading.main_thread():
        return _main(parser, argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(parser, argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (systemd stop, timeout) unwinds like Ctrl-C, so temporary copies are removed."""
    raise KeyboardInterrupt


def _main(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # argparse: --help, --version, usage errors
        return int(exit_request.code or 0)
    as_json = bool(getattr(args, "json", False))
    args.json = as_json
    default_level = getattr(args, "default_log_level", "warning")  # the daemon logs each job: info
    log.configure(getattr(args, "log_level", default_level), getattr(args, "log_format", "auto"))
    run: Callable[[argparse.Namespace], int] = args.run
    with structlog.contextvars.bound_contextvars(
        run_id=uuid.uuid4().hex[:12], command=args.command
    ):
        try:
            return int(run(args))
        except MemsyncError as error:
            logger.debug("command_failed", error=error.message, exit_code=int(error.exit_code))
            render.exit_error(int(error.exit_code), error.message, error.hint, as_json=as_json)
            return int(error.exit_code)
        except KeyboardInterrupt:
            render.exit_error(int(ExitCode.INTERRUPTED), "interrupted", None, as_json=as_json)
            return int(ExitCode.INTERRUPTED)
        except Exception as error:  # noqa: BLE001 - the one boundary that maps bugs to exit 1
            logger.debug("command_crashed", exc_info=True)
            render.exit_error(
                int(ExitCode.FAILURE),
                f"unexpected {type(error).__name__}: {error}",
                "this is a bug in memsync; rerun with --log-level debug for the traceback",
                as_json=as_json,
            )
            return int(ExitCode.FAILURE)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
