"""restore --at: memsync killed at each phase leaves the live store as it was.

``restore --at`` restores each file from its Litestream replica into the work directory
(``_litestream_restore``), stages the files beside the live ones (``stage``), writes its intent
journal (``staged``), then swaps (restore's own ``put_files_in_place``, ``_swap``). Held at each
of those steps (tests.breaker.pauseat) and SIGKILLed there, it must leave every live file as it
was, byte for byte; ``restore --resume`` then rolls away what was staged (or finds nothing to
do), the deployment checks clean, and the next ``restore --at`` runs and leaves no scratch.
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
@pytest.mark.parametrize(
    "step",
    [
        "memsync.restore.at:_litestream_restore",  # the replicas restored into work_dir
        "memsync.restore:stage",  # before the staged copies beside the stores
        "memsync.restore:_swap",  # staged and journaled, nothing moved yet
    ],
)
def test_a_restore_at_killed_at_each_phase_leaves_the_live_store_as_it_was(
    make_deployment: Any, tmp_path: Path, cli: Any, step: str
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
    root = Path(deployment.paths.root)
    with pauseat.paused(step, args, flag) as restore:
        staged = sorted(p.name for p in root.rglob("*.restore-at-*"))
        restore.send_signal(signal.SIGKILL)
        restore.communicate(timeout=60)
    assert restore.returncode == -signal.SIGKILL
    if step.endswith("_swap"):  # both stores were staged from the replicas, nothing swapped
        suffix = "at-" + moment.strftime("%Y%m%dT%H%M%S%fZ")
        assert staged == [f"history.db.restore-{suffix}", f"qdrant.restore-{suffix}"]
    assert fingerprint(deployment) == files  # the live store as it was, byte for byte

    resumed = cli("restore", "--resume", "--json", config=deployment.config)
    assert resumed.code == 0, resumed.err
    if step.endswith("_swap"):
        assert resumed.json()["recovered"].startswith("rolled back the unfinished restore of at-")
    else:
        assert resumed.json()["recovered"] is None
    assert not list(root.rglob("*.restore-at-*"))
    assert fingerprint(deployment) == files
    assert later in memory_ids(deployment)
    assert cli("check", config=deployment.config).code == 0
    again = cli("restore", "--at", utc.iso(moment), "--force", "--json", config=deployment.config)
    assert again.code == 0, again.err
    assert later not in memory_ids(deployment)
    work = deployment.paths.root / "memsync-state"
    assert not [p for p in work.rglob("restore-at-*") if p.is_dir()]  # the killed run's scratch
