"""restore --at: memsync killed at each phase leaves the live store as it was.

``restore --at`` restores each file from its Litestream replica into the work directory
(``_litestream_restore``), stages the files beside the live ones (``stage``), writes its intent
journal (``staged``), then swaps (restore's own ``put_files_in_place``, ``_swap``). Held at each
of those steps (tests.breaker.pauseat) and SIGKILLed there, it must leave every live file as it
was, byte for byte; ``restore --resume`` then rolls away what was staged (or finds nothing to
do), the deployment checks clean, and the next ``restore --at`` runs and leaves no scratch.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memsync import utc
from memsync.demo import deployment as build
from tests.breaker import pauseat
from tests.helpers import litestream
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_restore_at import (
    add,
    fingerprint,
    memory_ids,
    replicated,
    running,
    shipped,
)


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
    deployment, [later], moment = replicated(
        make_deployment, tmp_path, cli, "keeps the ladder in the shed"
    )
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


@pytest.mark.slow(reason="the daemon and Litestream shipping, a restore whose Litestream is killed")
def test_a_litestream_killed_while_it_restores_refuses_and_leaves_the_live_store_as_it_was(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, [later], moment = replicated(
        make_deployment, tmp_path, cli, "keeps the ladder in the shed"
    )
    files = fingerprint(deployment)
    real = litestream.ensure()
    killed = tmp_path / "litestream-killed"  # every `litestream restore` SIGKILLed as it starts
    killed.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = restore ]; then "{real}" "$@" & child=$!; '
        'kill -KILL "$child"; wait "$child"; exit $?; fi\n'
        f'exec "{real}" "$@"\n'
    )
    killed.chmod(0o755)
    text = deployment.config.read_text()
    deployment.config.write_text(text.replace(f'litestream = "{real}"', f'litestream = "{killed}"'))

    done = cli("restore", "--at", utc.iso(moment), "--force", config=deployment.config)

    assert done.code == 11, done.err
    assert done.err.count("\n") == 1
    assert "litestream restore of " in done.err and " failed: " in done.err
    assert fingerprint(deployment) == files  # the live store as it was, byte for byte
    assert not [p for p in deployment.paths.root.rglob("*") if ".restore-" in p.name]
    work = deployment.paths.root / "memsync-state"
    assert not [p for p in work.rglob("restore-at-*") if p.is_dir()]
    deployment.config.write_text(text)
    again = cli("restore", "--at", utc.iso(moment), "--force", "--json", config=deployment.config)
    assert again.code == 0, again.err
    assert later not in memory_ids(deployment)


@pytest.mark.slow(reason="the daemon and Litestream, a restore held at its swap, the daemon killed")
def test_the_daemon_killed_during_a_restore_at_leaves_the_restore_whole_and_the_next_daemon_replicates_it(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    shipped(cli, deployment)
    moment = datetime.now(UTC)
    gone = add(deployment, "keeps receipts in a shoebox")
    shipped(cli, deployment)
    flag = tmp_path / "paused"
    args = ["restore", "--at", utc.iso(moment), "--force", "--json"]
    with pauseat.paused(
        "memsync.restore:_swap", [*args, "--config", str(deployment.config)], flag
    ) as restore:
        daemon.send_signal(signal.SIGKILL)  # its Litestream child is left running, orphaned
        daemon.process.wait(timeout=60)  # not communicate: the orphan holds its stderr open
        flag.unlink()
        out, err = restore.communicate(timeout=300)
    assert restore.returncode == 0, err
    assert json.loads(out)["check_after"]["errors"] == 0
    assert gone not in memory_ids(deployment)

    (tmp_path / "again").mkdir()
    again = start(deployment.config, Notify(tmp_path / "again"))
    try:
        again.wait_event("litestream_started")
        after = add(deployment, "moved the receipts to a folder")
        shipped(cli, deployment)  # the restored files replicate, with the write after
    finally:
        code, err = stop(again)
    assert code == 0, err
    copy = cli("restore", "--at", "latest", "--to", str(tmp_path / "copy"), "--json",
               config=deployment.config)  # fmt: skip
    assert copy.code == 0, copy.err
    assert copy.json()["check_after"]["errors"] == 0
    connection = sqlite3.connect(build.Paths(tmp_path / "copy").history_db)
    try:
        ids = {row[0] for row in connection.execute("SELECT memory_id FROM history")}
    finally:
        connection.close()
    assert after in ids and gone not in ids
