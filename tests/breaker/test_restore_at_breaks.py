"""restore --at: memsync killed once the replicas' files are staged beside the live ones.

``restore --at`` restores each file from its Litestream replica into the work directory, stages
the files beside the live ones and writes its intent journal (``staged``), then swaps (restore's
own ``put_files_in_place``). Held at ``_swap`` (tests.breaker.pauseat) and SIGKILLed there, it
must leave every live file as it was, byte for byte; ``restore --resume`` then rolls the staged
copies away and the deployment checks clean.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memsync import utc
from tests.breaker import pauseat
from tests.process.test_daemon import stop
from tests.process.test_restore_at import add, fingerprint, memory_ids, running, shipped


@pytest.mark.slow(
    reason="the daemon and Litestream shipping two rounds of writes, a killed restore"
)
def test_a_restore_at_killed_between_staging_and_swap_leaves_the_live_store_as_it_was(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
        moment = datetime.now(UTC)
        later = add(deployment, "keeps the ladder in the shed")
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    files = fingerprint(deployment)
    flag = tmp_path / "paused"
    args = ["restore", "--at", utc.iso(moment), "--force", "--config", str(deployment.config)]
    with pauseat.paused("memsync.restore:_swap", args, flag) as restore:
        root = Path(deployment.paths.root)
        staged = sorted(p.name for p in root.rglob("*.restore-at-*"))
        restore.send_signal(signal.SIGKILL)
        restore.communicate(timeout=60)
    assert restore.returncode == -signal.SIGKILL
    suffix = "at-" + moment.strftime("%Y%m%dT%H%M%S%fZ")
    assert staged == [f"history.db.restore-{suffix}", f"qdrant.restore-{suffix}"]
    assert fingerprint(deployment) == files  # the live store as it was, byte for byte

    resumed = cli("restore", "--resume", "--json", config=deployment.config)
    assert resumed.code == 0, resumed.err
    assert resumed.json()["recovered"].startswith("rolled back the unfinished restore of at-")
    assert not list(Path(deployment.paths.root).rglob("*.restore-at-*"))
    assert fingerprint(deployment) == files
    assert later in memory_ids(deployment)
    assert cli("check", config=deployment.config).code == 0
