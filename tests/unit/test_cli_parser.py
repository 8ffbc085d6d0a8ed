"""The command line builds only the command it runs, and says exactly what the full parser says."""

from __future__ import annotations

import argparse

import pytest

from memsync import cli


def subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_the_top_level_help_is_the_full_parsers_word_for_word():
    assert cli.build_parser(["--help"]).format_help() == cli.build_parser().format_help()
    listed = [action.dest for action in subparsers(cli.build_parser())._choices_actions]
    assert listed == [command for command, _, _ in cli.COMMANDS]


@pytest.mark.parametrize("command", [command for command, _, _ in cli.COMMANDS])
def test_each_command_is_built_as_in_the_full_parser(command):
    full = subparsers(cli.build_parser()).choices[command]
    alone = subparsers(cli.build_parser([command])).choices[command]
    assert alone.format_help() == full.format_help()


@pytest.mark.parametrize(
    ("argv", "chosen"),
    [
        (["check"], "check"),
        (["--json", "--config", "check", "doctor", "--json"], "doctor"),  # an option's value
        (["--log-level", "debug", "snapshot", "create"], "snapshot"),
        (["--help", "check"], None),
        (["--version"], None),
        (["nonsense", "check"], None),
        ([], None),
        (["--conf", "check", "doctor"], "doctor"),  # argparse's unique prefix of --config
        (["--log-l", "debug", "check"], "check"),
        (["--log-f", "json", "--js", "check"], "check"),
        (["--vers", "check"], None),
    ],
)
def test_the_command_is_the_first_word_that_names_one(argv, chosen):
    assert cli.chosen_command(argv) == chosen


@pytest.mark.parametrize(
    "argv",
    [
        ["--conf", "/nonexistent/memsync.toml", "check"],
        ["--log-l", "error", "--config", "/nonexistent/memsync.toml", "check"],
        ["--log-f", "json", "--config", "/nonexistent/memsync.toml", "doctor"],
    ],
)
def test_an_abbreviated_top_level_option_runs_the_command(argv, capsys):
    """argparse takes `--conf` for `--config`: the command runs (it was a bare entry: a traceback)."""
    assert cli.main(argv) == 10  # the missing configuration, as `--config` in full says
    assert "file not found" in capsys.readouterr().err
