"""keep_pre_restore removes a file restore never made, first, because its name fits the pattern.

``pre_restore_copies`` takes every ``<store>.pre-restore-*`` beside a store for a copy, and
``pre_restore_sets`` puts the ones ``pre-restore.json`` does not name after every one it names:
so a user's own backup named in the same style (``history.db.pre-restore-manual-before-upgrade``,
made with cp before trying a restore) is the very first thing retention deletes, on the next
restore with ``keep_pre_restore = 2``, although the ledger records every copy this memsync
moved aside and that name is in no snapshot id's form. Retention should remove only copies a
restore made (the ledger's, or pre-0.3 copies whose suffix is a snapshot id), never a stranger.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_retention_leaves_a_file_no_restore_made(deployment: Any, cli: Any) -> None:
    deployment.close()
    config = deployment.config
    made = cli("snapshot", "create", "--json", config=config)
    assert made.code == 0, made.err
    history = Path(deployment.paths.history_db)
    manual = Path(f"{history}.pre-restore-manual-before-upgrade")
    manual.write_bytes(history.read_bytes())  # the user's own copy, before any restore
    config.write_text(config.read_text() + "\n[restore]\nkeep_pre_restore = 2\n")
    removed: list[str] = []
    for _ in range(2):
        restored = cli("restore", made.json()["id"], "--force", "--json", config=config)
        assert restored.code == 0, restored.err
        removed += restored.json()["pre_restore_removed"]
    assert manual.exists(), removed
