"""Breaker: ``restore --at`` after a lost disk (litestream.yml gone) with junk under ``collection/``.

With ``<state_dir>/litestream.yml`` lost, the collections to restore are every
``collection/<name>/generations`` directory of the replica (``protection.replicated_collections``).
One such directory that holds no generation (a removed collection's replica emptied by
retention, an operator's stray ``mkdir``, another tool's files) makes the whole restore of the
lost disk fail with exit 11 ("holds no generation: there is nothing to restore it from"),
though every file of the deployment has its replica. A replica with no generation holds no file:
it should be left out (as litestream.yml, when kept, leaves it out), not fail the restore.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.process.test_daemon import stop
from tests.process.test_protect import state_dir
from tests.process.test_restore_at import add, memory_ids, running, shipped


@pytest.mark.slow(reason="the daemon and Litestream shipping, a lost disk and a restore")
def test_a_stray_collection_directory_in_the_replica_does_not_fail_a_lost_disk_restore(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:  # meta.json comes from a snapshot (not SQLite: not replicated)
        made = cli("snapshot", "create", "--json", config=deployment.config)
        assert made.code == 0, made.err
        assert cli("snapshot", "verify", made.json()["id"], config=deployment.config).code == 0
        later = add(deployment, "written and shipped before the disk was lost")
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    expected = memory_ids(deployment)
    assert later in expected
    stray = tmp_path / "replica" / "collection" / "old_notes" / "generations"
    stray.mkdir(parents=True)  # no generation in it: nothing Litestream shipped
    shutil.rmtree(deployment.paths.qdrant)  # the lost disk: both stores and state_dir gone
    for side in deployment.paths.history_db.parent.glob("history.db*"):
        side.unlink()
    shutil.rmtree(state_dir(deployment))

    done = cli("restore", "--at", "latest", "--json", config=deployment.config)

    assert done.code == 0, done.out + done.err
    assert memory_ids(deployment) == expected
