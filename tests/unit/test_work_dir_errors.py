"""The error for a work directory memsync cannot write names the right fix."""

from __future__ import annotations

import errno
from pathlib import Path

from memsync.stores.sqlite_files import work_dir_error


def test_a_state_directory_not_made_yet_is_named_with_how_to_make_it(tmp_path: Path) -> None:
    # a fresh VPS: /var/lib/memsync does not exist until the unit's StateDirectory= makes it
    work = tmp_path / "var-lib" / "memsync" / "tmp"
    error = work_dir_error(work, PermissionError(errno.EACCES, "Permission denied"))
    assert error.exit_code == 11
    assert f"{tmp_path / 'var-lib'} does not exist" in error.message
    assert "set work_dir" not in str(error.hint)
    assert "install -d" in str(error.hint) and "StateDirectory=" in str(error.hint)


def test_an_existing_directory_it_cannot_write_keeps_the_work_dir_hint(tmp_path: Path) -> None:
    error = work_dir_error(tmp_path, PermissionError(errno.EACCES, "Permission denied"))
    assert "set work_dir" in str(error.hint)
    full = work_dir_error(tmp_path, OSError(errno.ENOSPC, "No space left on device"))
    assert full.exit_code == 75
