"""demo: a MEMSYNC_DEMO_DIR that is not a directory the demo can start over in crashes (traceback).

e680722 refuses (exit 10) a non-empty directory without the demo's marker. Two other values
never reach that refusal:
- a regular file: ``root.iterdir()`` raises NotADirectoryError, an uncaught traceback;
- a symlink to a directory the demo made (marker inside): the check passes through the link,
  ``shutil.rmtree(root, ignore_errors=True)`` silently refuses to remove a symlink, and
  ``root.mkdir(parents=True)`` raises FileExistsError, an uncaught traceback.
Neither destroys anything, but each should be the same exit-10 refusal naming
MEMSYNC_DEMO_DIR, not a Python traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.demo.__main__ import MARKER, main


@pytest.mark.parametrize("kind", ["file", "symlink-to-demo-dir"])
def test_a_demo_dir_that_is_a_file_or_a_symlink_is_refused(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "demo-run"
    if kind == "file":
        root.write_text("someone's notes\n")
    else:
        made = tmp_path / "made-by-demo"
        made.mkdir()
        (made / MARKER).write_text("made by python -m memsync.demo\n")
        (made / "left.txt").write_text("x")
        root.symlink_to(made)
    monkeypatch.setenv("MEMSYNC_DEMO_DIR", str(root))
    try:
        code = main([])
    except OSError as error:
        pytest.fail(f"crashed: {type(error).__name__}: {error}")
    assert code == 10
    assert "MEMSYNC_DEMO_DIR" in capsys.readouterr().out
    if kind == "file":
        assert root.read_text() == "someone's notes\n"
