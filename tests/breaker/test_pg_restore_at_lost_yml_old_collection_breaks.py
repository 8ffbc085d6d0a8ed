"""Breaker: on pgvector with litestream.yml lost, a collection replica fails restore --at.

On pgvector Litestream replicates history.db alone (the vectors are PostgreSQL's). With
``<state_dir>/litestream.yml`` lost (a lost disk), ``restore.at.replicated_files`` takes every
``collection/<name>/generations`` of the replica as a file to restore and maps it through the
pgvector store's ``collection_file`` (``mem0.csv``, not a file of a live store): a valid
collection replica under the same ``[protect] directory`` (the embedded store's, left by Litestream
after ``migrate --switch`` to pgvector; Litestream never removes a replica) makes
``restore --at`` (``--dry-run`` here; ``recover --at`` too) fail with exit 11 "names mem0.csv,
which is not a file of this deployment", though history.db's replica is whole. It should
restore history.db (the one file pgvector replicates) and leave the old collection alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import litestream
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_protect import state_dir
from tests.process.test_restore_at import add, shipped


@pytest.mark.slow(reason="the daemon and Litestream shipping, then restore --at")
def test_restore_at_on_pgvector_without_litestream_yml_ignores_an_old_collection_replica(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    replica = tmp_path / "replica"
    deployment = make_deployment(
        pg=True,
        extra_config=f'\n[protect]\nlitestream = "{litestream.ensure()}"\ndirectory = "{replica}"\n',
    )
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        shipped(cli, deployment)
        add(deployment, "keeps the boat key in the red box")
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    (state_dir(deployment) / "litestream.yml").unlink()  # lost with the state directory
    alone = cli("restore", "--at", "latest", "--dry-run", "--json", config=deployment.config)
    assert alone.code == 0, alone.out + alone.err  # history.db's replica alone: restorable
    # a valid Litestream replica of the embedded store before the switch, beside it
    shutil.copytree(replica / "history.db", replica / "collection" / "mem0")

    looked = cli("restore", "--at", "latest", "--dry-run", "--json", config=deployment.config)

    assert looked.code == 0, looked.out + looked.err
