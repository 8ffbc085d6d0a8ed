"""The demo's entry point: its arguments, and the directory it starts over in."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.demo.__main__ import main


def test_help_prints_what_the_demo_does_and_runs_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    assert "a real mem0 deployment built offline" in capsys.readouterr().out
    assert main(["--bogus"]) == 2


def test_a_directory_the_demo_did_not_make_is_never_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "precious.txt").write_text("someone's file")
    monkeypatch.setenv("MEMSYNC_DEMO_DIR", str(tmp_path))
    assert main([]) == 10
    assert (tmp_path / "precious.txt").read_text() == "someone's file"
    assert "MEMSYNC_DEMO_DIR" in capsys.readouterr().out
