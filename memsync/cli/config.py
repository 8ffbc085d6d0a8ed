"""``memsync config validate|show``: check a configuration file; print the effective one."""

from __future__ import annotations

import argparse
import json
import os

from memsync import config
from memsync.cli import render
from memsync.cli.common import add_command
from memsync.config.effective import (
    effective_document,
    flatten,
    shown_json,
    validated_json,
    writable_paths,
)
from memsync.errors import ExitCode

HELP = "validate the configuration (every problem at once, exit 10) or show the effective one"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    """Add ``config`` and its subcommands ``validate`` and ``show``."""
    parser = add_command(subparsers, "config", HELP, common, epilog)
    actions = parser.add_subparsers(dest="config_action", metavar="ACTION", required=True)
    for name, text, run in (
        ("validate", "check every key; exit 0 when valid, 10 listing every problem", run_validate),
        (
            "show",
            "print the effective configuration: defaults filled in, paths resolved, secrets "
            "redacted",
            run_show,
        ),
    ):
        sub = add_command(actions, name, text, common, epilog)
        sub.set_defaults(run=run)


def _load(args: argparse.Namespace) -> config.Config:
    """The file the command line names (never the daemon's accepted copy). Raises ConfigError."""
    return config.load(config.config_path(getattr(args, "config", None), os.environ), os.environ)


def run_validate(args: argparse.Namespace) -> int:
    """Exit 0 when the file is valid; a ConfigError (exit 10) lists every problem otherwise."""
    loaded = _load(args)
    if args.json:
        render.emit_json(validated_json(loaded))
    else:
        render.emit_text(f"{loaded.source}: valid")
    return int(ExitCode.OK)


def run_show(args: argparse.Namespace) -> int:
    """Print every key with its effective value; secrets are never printed. Exit 0 or 10."""
    loaded = _load(args)
    if args.json:
        render.emit_json(shown_json(loaded))
    else:
        document = effective_document(loaded)
        lines = [f"# {loaded.source} (effective: defaults filled in, secrets redacted)"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in flatten(document)]
        lines.append(
            "# memsync writes under: " + " ".join(str(path) for path in writable_paths(loaded))
        )
        render.emit_text("\n".join(lines))
    return int(ExitCode.OK)
