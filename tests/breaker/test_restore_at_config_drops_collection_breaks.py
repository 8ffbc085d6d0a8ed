"""Breaker: ``restore --at`` when ``<state_dir>/litestream.yml`` no longer lists the collection.

The configuration edited by hand (or left from before a collection was protected) to list only
history.db: ``replicated_files`` accepts it, and the in-place restore swaps the whole vector
store directory for a staged one holding no collection file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.process.test_protect import state_dir
from tests.process.test_restore_at import fingerprint, memory_ids, replicated


@pytest.mark.slow(reason="the daemon and Litestream shipping, a restore --at in place")
def test_restore_at_with_a_configuration_missing_the_collection_keeps_the_live_store(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, _, _ = replicated(
        make_deployment, tmp_path, cli, "keeps the spare key under the mat"
    )
    before = memory_ids(deployment)
    files = fingerprint(deployment)
    path = state_dir(deployment) / "litestream.yml"
    document = json.loads(path.read_text())
    document["dbs"] = [db for db in document["dbs"] if db["path"].endswith("history.db")]
    path.write_text(json.dumps(document))

    done = cli("restore", "--at", "latest", "--force", "--json", config=deployment.config)

    if done.code != 0:  # refused: nothing of the live store changed
        changed = [p for p in files if fingerprint(deployment).get(p) != files[p]]
        assert changed == [], (done.code, done.err, changed)
    assert memory_ids(deployment) == before, (done.code, done.err)
