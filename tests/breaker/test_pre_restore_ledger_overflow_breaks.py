"""A pre-restore.json holding a number too large for a float stops every restore and doctor (exit 1).

``state.pre_restore_ledger`` guards json.loads (OSError, ValueError) and skips non-numbers, but
``float(at)`` on a JSON integer above ~1.8e308 raises OverflowError, which nothing catches:
restore dies after staging the snapshot (just before the swap, its journal left behind), and
every later restore and doctor dies the same way ("unexpected OverflowError ... a bug in
memsync") until the user finds and edits the ledger. A ledger entry that cannot be read should
be passed over like any other unreadable one (the copy falls back to its change time).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.breaker import restores


def test_a_ledger_number_too_large_for_a_float_is_passed_over(deployment: Any, cli: Any) -> None:
    deployment.close()
    config = deployment.config
    older, newer = restores.two_snapshots(cli, config)
    restored = cli("restore", older, "--force", "--json", config=config)
    assert restored.code == 0, restored.err
    ledgers = list(Path(config).parent.rglob("pre-restore.json"))
    assert len(ledgers) == 1, ledgers
    entries = json.loads(ledgers[0].read_text())["copies"]
    assert entries  # the first restore recorded its copies
    huge = [[path, 10**400] for path, _ in entries]  # valid JSON, no float
    ledgers[0].write_text(json.dumps({"copies": huge}))
    doctor = cli("doctor", "--json", config=config)
    restored = cli("restore", newer, "--force", "--json", config=config)
    assert restored.code == 0, restored.err[-600:]
    assert doctor.code != 1, doctor.err[-600:]
