"""keep_pre_restore = 1 removes the copy the restore itself just moved aside, when the ledger says so.

Retention orders copies by the time ``pre-restore.json`` recorded, a wall-clock reading. A
restore made while the clock ran ahead (a VM before NTP synced, a clock stepped back since)
records a time later than any restore made after the correction. The next restore then moves
the live stores aside (the user's newest data, the one copy they most likely want back), and
its own retention with ``keep_pre_restore = 1`` removes exactly those copies, keeping the older
ones. The copies a restore has just moved aside should never be removed by that restore's own
retention, whatever the ledger's times say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.breaker import restores


def test_retention_never_removes_the_copy_this_restore_moved_aside(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    config = deployment.config
    older, newer = restores.two_snapshots(cli, config)
    restored = cli("restore", older, "--force", "--json", config=config)
    assert restored.code == 0, restored.err
    ledger = Path(config).parent.rglob("pre-restore.json").__next__()
    entries = json.loads(ledger.read_text())["copies"]
    # that restore ran while the clock was a day ahead: the ledger holds what it read then
    ahead = [[path, at + 86400] for path, at in entries]
    ledger.write_text(json.dumps({"copies": ahead}))
    config.write_text(config.read_text() + "\n[restore]\nkeep_pre_restore = 1\n")
    restored = cli("restore", newer, "--force", "--json", config=config)
    assert restored.code == 0, restored.err
    moved_now = restored.json()["moved_aside"]
    removed = restored.json()["pre_restore_removed"]
    assert moved_now
    assert not set(moved_now) & set(removed), removed
    assert all(Path(p).exists() for p in moved_now), removed
