"""Breaker 7: the tripwire reads the previous snapshot's table file, binary or CSV, sealed or not."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.pg import as_csv_snapshot
from tests.pg.test_restore_pgvector import memsync
from tests.process.test_tripwire import add_memories


@pytest.mark.parametrize("kind", ["binary", "csv", "encrypted"])
def test_a_bulk_deletion_trips_and_is_split_by_scope_after_a_pg_snapshot(
    make_deployment, tmp_path, kind
):
    extra = "tripwire_percent = 20\ntripwire_memories = 10\n"
    if kind == "encrypted":
        key = tmp_path / "k"
        key.write_text(os.urandom(32).hex())
        extra += f'encrypt_key_file = "{key}"\n'
    deployment = make_deployment(count=40, pg=True, extra_config=extra)
    add_memories(deployment.memory, "brk-bob", 8)
    add_memories(deployment.memory, "brk-carol", 8)
    deployment.close()
    first = memsync(deployment, "snapshot", "create", "--json")
    assert first.returncode == 0, first.stderr
    first_id = json.loads(first.stdout)["id"]
    root = deployment.paths.root / "snapshots" / first_id
    manifest = json.loads((root / "manifest.json").read_text())
    assert bool(manifest.get("encryption")) == (kind == "encrypted"), sorted(manifest)
    if kind == "csv":
        as_csv_snapshot(root, deployment.paths.pg_url)
    memory = deployment.reopen()
    memory.delete_all(user_id="brk-bob")
    memory.delete_all(user_id="brk-carol")
    deployment.close()
    second = memsync(deployment, "snapshot", "create", "--json")
    assert second.returncode == 0, second.stderr
    tripwire = json.loads(second.stdout)["tripwire"]
    assert tripwire["previous"] == first_id
    assert tripwire["tripped"] is True, tripwire
    assert [d["scope"] for d in tripwire["drops"]] == [None, "user_id=brk-bob", "user_id=brk-carol"]
    assert [d["deleted"] for d in tripwire["drops"]] == [16, 8, 8], tripwire


@pytest.mark.parametrize("damage", ["short_uuid", "wrong_count_mid"])
def test_the_tripwire_over_a_damaged_previous_pgcopy_still_trips_and_creates(
    make_deployment, damage
):
    from tests.breaker import test_pgcopy_b7_hostile as hostile

    extra = "tripwire_percent = 20\ntripwire_memories = 10\n"
    deployment = make_deployment(count=40, pg=True, extra_config=extra)
    add_memories(deployment.memory, "brk-bob", 8)
    add_memories(deployment.memory, "brk-carol", 8)
    deployment.close()
    first = memsync(deployment, "snapshot", "create", "--json")
    first_id = json.loads(first.stdout)["id"]
    root = deployment.paths.root / "snapshots" / first_id
    relative = "pgvector/mem0.pgcopy"
    rows = hostile.parse((root / relative).read_bytes())
    hostile.write(root, relative, getattr(hostile, damage)(rows, hostile.columns(root)))
    memory = deployment.reopen()
    memory.delete_all(user_id="brk-bob")
    memory.delete_all(user_id="brk-carol")
    deployment.close()
    second = memsync(deployment, "snapshot", "create", "--json")
    assert "Traceback" not in second.stderr, second.stderr[-1500:]
    assert second.returncode in (0, 3), second.stderr
    tripwire = json.loads(second.stdout)["tripwire"]
    assert tripwire["tripped"] is True, tripwire
