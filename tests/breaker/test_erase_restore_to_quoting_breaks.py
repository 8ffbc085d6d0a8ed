"""Breaker: ``forget --erase`` names a ``restore --to DIR`` copy with ``rm -r DIR`` unquoted.

DIR is the operator's own choice (``restore ID --to "/srv/look at alice"``): the removal the
erasure prints, pasted into a shell, removes ``/srv/look`` and ``./at`` and ``./alice`` and
leaves the copy that holds the text. The command should be shell-quoted, as forget's recover
command is (``shlex.quote``).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any


def test_the_removal_of_a_restore_to_copy_with_a_space_is_one_shell_word(
    deployment: Any, cli: Any, tmp_path: Path
) -> None:
    deployment.close()
    victim = deployment.seeded.live[0]
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    look = tmp_path / "look at alice"
    copied = cli("restore", made.json()["id"], "--to", str(look), config=deployment.config)
    assert copied.code == 0, copied.out + copied.err

    erased = cli("forget", victim, "--erase", "--yes", "--json", config=deployment.config)

    assert erased.code == 0, erased.out + erased.err
    (listed,) = [c for c in erased.json()["erased"]["copies"] if c["kind"] == "restore-to-copy"]
    assert listed["where"] == str(look) and listed["holds"] == "yes"
    assert shlex.split(listed["remove"]) == ["rm", "-r", str(look)], listed["remove"]
