"""Docs stay true: the contract pages in docs/reference/ and the code agree, in both directions.

The repository is self-contained: nothing here (or anywhere in the project) reads outside it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from memsync import cli, config, doctor
from memsync.errors import EXIT_CODE_TABLE
from memsync.findings import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "reference"
CONTRACT = DOCS / "contract.md"


def command_names() -> list[str]:
    parser = cli.build_parser()
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sorted(actions[0].choices)


@pytest.mark.parametrize("name", command_names())
def test_every_command_has_a_page_and_help(name):
    assert (DOCS / "commands" / f"{name}.md").is_file()
    assert cli.main([name, "--help"]) == 0


@pytest.mark.parametrize(
    "argv", [["forget"], ["prune"], ["reconcile"], ["recover"], ["confirm"], ["pending", "apply"]]
)
def test_each_write_commands_help_says_how_it_writes(argv, capsys):
    assert cli.main([*argv, "--help"]) == 0
    shown = capsys.readouterr().out
    for said in ("agent ", "direct ", "window ", "exit 5", "exit 12", "exit 11"):
        assert said in shown, (argv, said)


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_every_finding_code_is_documented(code):
    text = (DOCS / "findings.md").read_text()
    assert f"`{code}`" in text and f"### `{code}`" in text


def test_finding_codes_match_the_contract():
    rows = re.findall(
        r"^\| `([a-z-]+)` \| (error|warning|info) \|",
        (DOCS / "findings.md").read_text(),
        re.MULTILINE,
    )
    assert {code: severity for code, severity in rows} == {
        c: spec.severity.value for c, spec in REGISTRY.items()
    }


def test_no_file_of_the_project_reads_outside_the_repository():
    skipped = {".venv", ".git", "demo-run", "build"}  # build: the wheel, the app envs
    tracked = []
    for directory, subdirectories, files in os.walk(ROOT):
        subdirectories[:] = [d for d in subdirectories if d not in skipped]
        if Path(directory) == ROOT / "bench":  # out: generated deployments (PostgreSQL's files)
            subdirectories[:] = [d for d in subdirectories if d != "out"]
        tracked += [
            Path(directory) / f
            for f in files
            if Path(f).suffix in {".py", ".toml", ".sh", ".md", ".service", ".timer", ""}
        ]
    offenders = [
        str(p.relative_to(ROOT))
        for p in tracked
        if p != Path(__file__)
        and re.search(r"\.\./shared|parent / \"shared\"", p.read_text(errors="replace"))
    ]
    assert offenders == []


def test_every_reference_page_the_contract_names_exists():
    links = re.findall(r"\]\(([^)#]+)\)", CONTRACT.read_text())
    assert links, "contract.md links its pages"
    for link in links:
        assert (DOCS / link).exists(), link


@pytest.mark.parametrize("code", doctor.RESULT_CODES)
def test_every_doctor_result_is_documented(code):
    assert f"`{code}`" in (DOCS / "commands" / "doctor.md").read_text()


def test_every_exit_status_is_documented():
    text = (DOCS / "exit-codes.md").read_text()
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", text, re.MULTILINE)}
    assert documented == {code for code, _meaning in EXIT_CODE_TABLE}


def test_example_config_loads():
    loaded = config.load(ROOT / "ops" / "memsync.example.toml", {"HOME": "/root"})
    assert loaded.collection == "mem0"


def test_every_name_the_architecture_page_cites_exists():
    text = (ROOT / "docs" / "architecture.md").read_text()
    cited = re.findall(r"`([\w/]+\.py): ([\w, ]+)`", text)
    assert len(cited) >= 10
    for module, names in cited:
        candidates = [ROOT / "memsync" / module, ROOT / module]
        source = next((p for p in candidates if p.is_file()), None)
        assert source is not None, module
        code = source.read_text()
        for name in (n.strip() for n in names.split(",")):
            assert re.search(
                rf"^\s*(def|class|async def) {name}\b|^{name}\b.*=", code, re.MULTILINE
            ), f"{module}: {name}"


def test_every_page_the_code_points_to_exists_in_the_repository():
    outside = {"FIELD_NOTES.md", "CONTRACT.md", "DESIGN.md", "STYLE.md", "STYLE_ANCHORS.md"}
    dangling: list[str] = []
    for path in sorted((ROOT / "memsync").rglob("*.py")):
        text = path.read_text()
        for page in sorted(
            set(re.findall(r"\b((?:docs|ops|bench|systemd)/[\w./-]+\.(?:md|toml|sh))", text))
        ):
            if not (ROOT / page).exists():
                dangling.append(f"{path.relative_to(ROOT)}: {page}")
        dangling += [
            f"{path.relative_to(ROOT)}: {name} (not in this repository)"
            for name in outside
            if name in text
        ]
    assert dangling == []


def test_every_json_output_section_lists_its_fields_as_key_paths():
    from tests.helpers import json_contract

    documented = json_contract.sections()
    assert "`check --json`" in documented and "Errors" in documented
    bare = [heading for heading, paths in documented.items() if not paths]
    assert not bare, f"sections of json-output.md without a field table or fields block: {bare}"
    for heading, paths in documented.items():
        assert all(" " not in path for path in paths), (heading, paths)
