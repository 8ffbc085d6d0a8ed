"""[restore] keep_pre_restore keeps the copies moved aside last, whatever rewrote the older ones since.

`forget --erase` rewrites every pre-restore copy in name order (``state.pre_restore_copies``).
When the copies' names do not sort in the order they were moved aside (a restore of a newer
snapshot, then of an older one: a user rolling back further), the rewrite leaves the copy
moved aside first with the newest change time. The next restore's retention then removes the
copy moved aside later, which the user asked to keep, and keeps the older one; and it orders
each store on its own, so the kept history copy and the kept vector copy need not be a pair.
Seen before pre-restore.json recorded when each copy was moved aside: the vector store's copy
moved aside first was removed (its directory's ctime is not touched by the rewrite of a file
below it), history's copy moved aside second was removed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.breaker import restores


def test_retention_after_an_erasure_removes_the_oldest_copy_moved_aside(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    config = deployment.config
    older, newer = restores.two_snapshots(cli, config)
    for snapshot_id in (newer, older):  # roll back to the newer snapshot, then further back
        restored = cli("restore", snapshot_id, "--force", "--json", config=config)
        assert restored.code == 0, restored.err
        time.sleep(0.05)
    history = Path(deployment.paths.history_db)
    qdrant = Path(deployment.paths.qdrant)
    moved_first = [f"{qdrant}.pre-restore-{newer}", f"{history}.pre-restore-{newer}"]
    moved_second = [f"{qdrant}.pre-restore-{older}", f"{history}.pre-restore-{older}"]
    assert all(Path(p).exists() for p in moved_first + moved_second)
    erased = cli(
        "forget", deployment.seeded.live[0], "--erase", "--yes", "--no-snapshot", "--json",
        config=config,
    )  # fmt: skip
    assert erased.code == 0, erased.err
    config.write_text(config.read_text() + "\n[restore]\nkeep_pre_restore = 2\n")
    restored = cli("restore", older, "--force", "--json", config=config)
    assert restored.code == 0, restored.err
    removed = restored.json()["pre_restore_removed"]
    # the copies moved aside first are the ones beyond the newest 2; the later ones stay
    assert all(Path(p).exists() for p in moved_second), removed
    assert set(moved_first) <= set(removed), removed
