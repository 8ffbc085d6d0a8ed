"""memsync runs a learned interpreter only when nobody else could have put it there."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from memsync.stores.interpreter import trusted


def test_the_base_interpreter_is_trusted():
    # the interpreter file itself (root's, in root's directories), wherever the checkout lives
    assert trusted(os.path.realpath(sys.executable))


def test_an_interpreter_under_a_world_writable_directory_is_not(tmp_path):
    # /tmp (1777) is above tmp_path: anyone could have made this "venv"
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(os.path.realpath(sys.executable), venv / "bin" / "python")
    assert not trusted(str(venv / "bin" / "python"))


def test_a_relative_or_missing_path_is_not():
    assert not trusted("python3")
    assert not trusted(str(Path(sys.prefix) / "bin" / "no-such-python"))
