"""memsync's command line: parser, logging setup, dispatch, and exceptions -> exit codes.

``main`` is the only place an exception becomes an exit status (docs/reference/contract.md). On exit 1 or
>= 10 stdout stays empty and stderr gets one line (a JSON ``exit_error`` with ``--json``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Sequence

from memsync import __version__
from memsync.errors import EXIT_CODE_TABLE, ExitCode, MemsyncError

EPILOG = "exit status:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODE_TABLE)
# Each command: the module under memsync.cli that registers it, and its line in `memsync --help`.
# Only the module of the command being run is imported (`memsync --version` and `--help` import
# none); tests/unit/test_cli_parser.py checks this table against what the modules register.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("check", "check", "prove that vectors and history agree (reads only; exit 3 on error findings)"),
    ("doctor", "doctor", "health check of paths, mounts, locks, SQLite files, versions and a check summary"),
    ("snapshot", "snapshot", "capture both stores into one dated, verified snapshot; upload, list, verify, prune"),
    ("restore", "restore", "verify a snapshot, then replace both stores with it (old files moved aside, never deleted)"),
    ("recover", "recover", "bring back through mem0 the memories of a user, agent, run or ids that a snapshot holds and were deleted or vanished since (same ids, vectors and payloads; a memory changed after the snapshot with its last text from history, embedded again); everything else is left"),
    ("migrate", "migrate", "copy every memory (same ids and payloads) into the vector store and embedder that NEW.toml names, re-embedding when the embedder changes, while the app runs; then verify the target; with --switch, move the app onto it"),
    ("reconcile", "reconcile", "plan and apply the repairs check's findings call for (tombstones win; nothing invented)"),
    ("forget", "forget", "delete memories through mem0 (ids or a whole user/agent/run), then prove them gone"),
    ("prune", "forget", "delete through mem0 every memory whose expiration_date has passed"),
    ("pending", "pending", "the forget, erase and prune requests queued while no route could write (list, apply)"),
    ("review", "review", "the memories last confirmed longest ago, with where they came from (reads only)"),
    ("confirm", "review", "stamp confirmed_at on memories through mem0 (a metadata change)"),
    ("audit", "review", "memories added or changed recently, flagging text that did not come from the user"),
    ("export-context", "review", "a user's live memories with their confirmed dates, ready for a prompt"),
    ("daemon", "daemon", "run check, prune, snapshot, retention, verify and replica on the [daemon] schedule (a systemd service)"),
    ("job", "daemon", "run one daemon job now and record it as the daemon would (check, prune, snapshot, retention, verify, replica, apply-pending)"),
    ("status", "daemon", "the daemon's jobs and the queue: last success, outcome, reason, next run; exit 3 when a job is overdue or failing"),
    ("config", "config", "validate the configuration (every problem at once, exit 10) or show the effective one"),
    ("tune", "tune", "switch history.db and every storage.sqlite to WAL mode (or back), through a safe route"),
    ("protect", "protect", "switch the SQLite files to WAL and write the Litestream configuration the daemon runs; --status: each file's replica, lag and bytes shipped"),
    ("repair-meta", "repair_meta", "rewrite an embedded store's meta.json without the unset keys the app's qdrant-client refuses (a snapshot first; the old file kept)"),
)  # fmt: skip
# Options of the top level that take a value: the word after them is never the command.
_VALUED_OPTIONS = ("--config", "--log-level", "--log-format")
_TOP_LEVEL_OPTIONS = ("--config", "--json", "--log-level", "--log-format", "--help", "--version")


def _long_option(word: str) -> str | None:
    """The top-level option ``word`` names, as argparse reads it: in full or a unique prefix."""
    if not word.startswith("--") or "=" in word or word == "--":
        return None
    if word in _TOP_LEVEL_OPTIONS:
        return word
    matches = [option for option in _TOP_LEVEL_OPTIONS if option.startswith(word)]
    return matches[0] if len(matches) == 1 else None


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


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: the first word that names one, skipping options' values.

    None when there is none, or when ``-h``/``--help``/``--version`` comes first (the top level
    answers those).
    """
    names = {command for command, _, _ in COMMANDS}
    skip = False
    for word in argv:
        option = _long_option(word)  # argparse takes `--conf PATH` for `--config PATH`
        if skip:
            skip = False
        elif word in ("-h", "--", *_TOP_LEVEL_OPTIONS[-2:]) or option in ("--help", "--version"):
            return None
        elif option in _VALUED_OPTIONS:
            skip = True
        elif word in names:
            return word
        elif not word.startswith("-"):
            return None  # not a command: argparse says so
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Return the parser with a subcommand per command.

    With ``argv``, only the module of the command it runs is imported and its subcommands built
    in full; every other command is a bare entry (its name and help line), so ``--version``,
    ``--help`` and a usage error import no command at all. ``argv`` None builds them all.
    """
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
    if argv is None:
        wanted = list(dict.fromkeys(module for _, module, _ in COMMANDS))
    else:
        chosen = chosen_command(argv)
        wanted = [module for command, module, _ in COMMANDS if command == chosen]
    for module in wanted:
        importlib.import_module(f"memsync.cli.{module}").register(subparsers, common, EPILOG)
    for command, _, text in COMMANDS:
        if command not in subparsers.choices:
            subparsers.add_parser(command, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one memsync command and return its exit status (see ``memsync --help``)."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(arguments)
    if argv is None and not _imports_frozen:  # the process's own command (console script)
        _freeze_imports()
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


_imports_frozen = False


def _freeze_imports() -> None:
    """Move what the command's imports built out of the cycle collector's reach (once).

    Modules, classes and the models pydantic builds live until the process ends, yet every
    full collection walks them again, the last one at exit included: about 60 ms of CPU for
    ``restore`` (``gc.freeze``, as CPython advises before a fork; the daemon forks its jobs).
    What the command itself creates is collected as ever. Only when ``main`` reads
    ``sys.argv`` (the console script, ``python -m memsync``): a caller passing ``argv`` (a test,
    a program embedding memsync) may hold garbage that must still be collected.
    """
    global _imports_frozen
    _imports_frozen = True
    gc.freeze()


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (systemd stop, timeout) unwinds like Ctrl-C, so temporary copies are removed."""
    raise KeyboardInterrupt


def _main(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    try:
        args, stray = parser.parse_known_args(argv)
        if stray:  # told with the command's own usage, not the top level's
            getattr(args, "command_parser", parser).error(
                f"unrecognized arguments: {' '.join(stray)}"
            )
    except SystemExit as exit_request:  # argparse: --help, --version, usage errors
        return int(exit_request.code or 0)
    import structlog  # after parsing: --help, --version and usage errors need none of these

    from memsync import log
    from memsync.cli import render

    logger = structlog.get_logger(__name__)
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
