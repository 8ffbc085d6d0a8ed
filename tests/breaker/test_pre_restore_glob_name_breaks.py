"""keep_pre_restore: a store whose name holds a glob character removes another store's copies.

``state.pre_restore_copies`` finds copies with ``parent.glob(f"{target.name}.pre-restore-*")``,
the store's name unescaped. For a history file named ``history[ab].db`` (legal, and what a
templated path can give) the pattern is ``history[ab].db.pre-restore-*``: it never matches the
deployment's own copies, and it does match ``historya.db.pre-restore-*``, the copies of another
deployment's ``historya.db`` in the same directory. A restore with ``keep_pre_restore = 1``
deletes the older of that other deployment's two pre-restore copies, which no restore of this one made, while its
own copies pile up. The name should be escaped (glob.escape) or matched literally.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def test_retention_never_touches_another_stores_copies(deployment: Any, cli: Any) -> None:
    deployment.close()
    config = deployment.config
    old = Path(deployment.paths.history_db)
    own = old.with_name("history[ab].db")
    old.rename(own)
    text, count = re.subn(
        r'^history_db_path = ".*"$', f'history_db_path = "{own}"', config.read_text(), flags=re.M
    )
    assert count == 1
    config.write_text(text + "\n[restore]\nkeep_pre_restore = 1\n")
    others = [  # another deployment's (historya.db) two copies
        own.with_name(f"historya.db.pre-restore-2026010{day}T000000Z") for day in (1, 2)
    ]
    for other in others:
        other.write_bytes(own.read_bytes())
    made = cli("snapshot", "create", "--json", config=config)
    assert made.code == 0, made.err
    removed: list[str] = []
    for _ in range(2):
        restored = cli("restore", made.json()["id"], "--force", "--json", config=config)
        assert restored.code == 0, restored.err
        removed += restored.json()["pre_restore_removed"]
    assert all(other.exists() for other in others), removed
