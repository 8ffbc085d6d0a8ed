"""Docs stay true: every command and finding code has its page, the example config loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memsync import cli, config, doctor
from memsync.check import FINDING_CODES
from memsync.errors import EXIT_CODE_TABLE

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "reference"
CONTRACT = ROOT.parent / "shared" / "CONTRACT.md"


def command_names() -> list[str]:
    parser = cli.build_parser()
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sorted(actions[0].choices)


@pytest.mark.parametrize("name", command_names())
def test_every_command_has_a_page_and_help(name):
    assert (DOCS / "commands" / f"{name}.md").is_file()
    assert cli.main([name, "--help"]) == 0


@pytest.mark.parametrize("code", sorted(FINDING_CODES))
def test_every_finding_code_is_documented(code):
    text = (DOCS / "findings.md").read_text()
    assert f"`{code}`" in text and f"### `{code}`" in text


def test_finding_codes_match_the_contract():
    if not CONTRACT.is_file():
        pytest.fail(f"{CONTRACT} is missing: the contract travels beside the repository")
    rows = re.findall(r"^\| ([a-z-]+) \| (error|warning|info) \|", CONTRACT.read_text(), re.MULTILINE)
    assert {code: severity for code, severity in rows} == {c: s.value for c, s in FINDING_CODES.items()}


@pytest.mark.parametrize("code", doctor.RESULT_CODES)
def test_every_doctor_result_is_documented(code):
    assert f"`{code}`" in (DOCS / "commands" / "doctor.md").read_text()


def test_every_exit_status_is_documented():
    text = (DOCS / "exit-codes.md").read_text()
    for code, _meaning in EXIT_CODE_TABLE:
        assert f"| {code} |" in text


def test_example_config_loads():
    loaded = config.load(ROOT / "ops" / "memsync.example.toml", {"HOME": "/root"})
    assert loaded.collection == "mem0"
