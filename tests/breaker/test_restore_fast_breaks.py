"""restore's check after a fast swap: a write into the restored files before it runs is seen.

The restore is paused (tests.breaker.pauseat) after its swap, just before the check that
relies on the hash; a process writes history.db meanwhile, as an app started too early would.
The files in place are then no longer the ones staged and hashed, so check runs in full and
reports the stores as they are.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.breaker import pauseat


def test_a_write_between_the_swap_and_the_check_sends_it_down_the_full_check(
    deployment: Any, cli: Any, tmp_path: Path
) -> None:
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    flag = tmp_path / "paused"
    with pauseat.paused(
        "memsync.restore:_in_place",
        ["restore", made.json()["id"], "--force", "--json", "--config", str(deployment.config)],
        flag,
    ) as restore:
        with sqlite3.connect(deployment.paths.history_db) as db:  # a memory's ADD, no point
            db.execute(
                "INSERT INTO history (id, memory_id, old_memory, new_memory, event, created_at,"
                " updated_at, is_deleted, actor_id, role) VALUES"
                " ('written-after', 'memory-written-after', NULL, 'x', 'ADD',"
                " '2026-01-01T00:00:00+00:00', NULL, 0, NULL, 'user')"
            )
        db.close()
        flag.unlink()  # the restore goes on, to the check after its swap
        out, err = restore.communicate(timeout=300)
    assert restore.returncode == 0, err
    report = json.loads(out)
    assert report["verification"] == {"snapshot": "hashed", "check_after": "full"}
    checked = cli("check", "--json", config=deployment.config).json()["counts"]
    assert {key: checked[key] for key in report["check_after"]} == report["check_after"]
    recorded = made.json()["check"]["history_memories"]
    assert report["check_after"]["history_memories"] == recorded + 1  # the write is counted
