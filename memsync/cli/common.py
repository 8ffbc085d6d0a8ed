"""Helpers shared by the command modules."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from memsync import config
from memsync.deployment import Deployment
from memsync.errors import UsageError


def load_config(args: argparse.Namespace) -> config.Config:
    """Load the configuration the command line names. Raises ConfigError (exit 10)."""
    path = config.config_path(getattr(args, "config", None), os.environ)
    accepted = os.environ.get(ACCEPTED_COPY_ENV)  # set by the daemon for its jobs
    return config.load(path, os.environ, Path(accepted) if accepted else None)


def open_deployment(args: argparse.Namespace) -> Deployment:
    """The deployment the command line's config names, opened once. Raises as ``load_config``."""
    return Deployment.open(load_config(args))


# The daemon runs its jobs with the configuration it accepted last (a SIGHUP with a broken file
# keeps the old one): the JSON document it keeps in its state directory (memsync.config.accepted).
ACCEPTED_COPY_ENV = "MEMSYNC_ACCEPTED_CONFIG"


# The routes of a write through mem0, for the --help of each command that makes one.
ROUTES_NOTE = """how it writes while the app may run (the report's "route"):
  agent   the app's memsync agent writes with the app's own Memory: no downtime
  direct  nobody holds the store: a short-lived process of the app's interpreter writes
  window  [app] stop_command and start_command stop the app for the write, then start it
          (at most [app] max_downtime_s)
  none of these: forget and prune queue the request and exit 5 (memsync pending list;
  applied by memsync pending apply, the daemon or the agent); reconcile, recover and
  review confirm exit 12. An agent that refuses memsync is exit 11, never queued.

"""


def add_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    common: argparse.ArgumentParser,
    epilog: str,
    *,
    writes: bool = False,
) -> argparse.ArgumentParser:
    """Add a (sub)command with the shared options, ``text`` as its help, and the exit-status epilog.

    ``writes``: it writes through mem0; its help says how (``ROUTES_NOTE``).
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        parents=[common],
        help=text,
        description=text,
        epilog=ROUTES_NOTE + epilog if writes else epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(command_parser=parser)  # a stray argument is reported with its usage
    return parser


def confirm(args: argparse.Namespace, what: str, shows: str = "the plan") -> None:
    """Ask ``what? [y/N]`` on a terminal unless ``--yes``; anything but yes refuses.

    Raises:
        UsageError: not confirmed, or no terminal to ask on and no ``--yes`` (exit 2; the hint
            names ``--dry-run``, which shows ``shows``).
    """
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(
            f"confirmation needed to {what}", f"pass --yes (or --dry-run to see {shows})"
        )
    if input(f"{what}? [y/N] ").strip().lower() not in ("y", "yes"):
        raise UsageError("not confirmed")


def add_scope_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the mutually exclusive ``--user`` / ``--agent`` / ``--run ID`` (``user_id``, ...)."""
    scope = parser.add_mutually_exclusive_group()
    for flag, dest in (("--user", "user_id"), ("--agent", "agent_id"), ("--run", "run_id")):
        scope.add_argument(flag, dest=dest, metavar="ID", help=f"every memory of this {dest}")
