"""Breaker: ``forget --user --erase`` after a snapshot restore rolled a memory back.

A memory written after the snapshot (and shipped by Litestream) is only in the copies once
``restore ID`` puts the snapshot back: in the ``.pre-restore-*`` copies moved aside. The
scope's erasure finds it there by its scope, purges it from every copy and reports it
(``only_in_copies``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.holders import app_holding
from tests.process.test_daemon import stop
from tests.process.test_protect_erase import decompressed_hits, local_hits
from tests.process.test_restore_at import running, shipped

MARKER = "the locker code is BRK4-9911-SIGMA-rolledback"


@pytest.mark.slow(reason="the daemon and Litestream shipping, a snapshot, a restore, an erasure")
@pytest.mark.parametrize("user", ["alice", "zoe"])  # zoe: no live memory left after it
def test_a_scope_erasure_removes_a_rolled_back_memory_from_the_pre_restore_copies(
    user: str, make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
        snapshot = cli("snapshot", "create", "--json", config=deployment.config)
        assert snapshot.code == 0, snapshot.err
        memory = deployment.reopen()  # the user's, after the snapshot
        memory.add(MARKER, user_id=user, infer=False)
        deployment.close()
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    restored = cli("restore", snapshot.json()["id"], "--force", config=deployment.config)
    assert restored.code == 0, restored.err

    erased = cli("forget", "--user", user, "--erase", "--yes", "--json",
                 config=deployment.config)  # fmt: skip

    assert erased.code == 0, erased.out + erased.err
    report = erased.json()["erased"]
    purged = report["purged"]  # the pre-restore copies are listed here
    assert len(report["only_in_copies"]) == 1  # the memory the restore rolled back
    assert erased.json()["replicas"]["renewed"] is True, erased.json()["replicas"]
    assert decompressed_hits(tmp_path / "replica", MARKER.encode()) == []
    held = [
        p for p in local_hits(deployment.paths.root, MARKER.encode()) if "-litestream/" not in p
    ]
    assert held == [], (held, purged)


@pytest.mark.slow(
    reason="the daemon and Litestream shipping, a snapshot, a restore, a queued erasure"
)
def test_a_queued_scope_erasure_applied_after_a_restore_reaches_the_pre_restore_copies(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    """The request is queued while the app holds the store and zoe's one memory is live; a
    restore then rolls it back, and ``pending apply`` finds nothing live to delete: the memory
    is only in the copies the restore moved aside, and the erasure must still reach them."""
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
        snapshot = cli("snapshot", "create", "--json", config=deployment.config)
        assert snapshot.code == 0, snapshot.err
        memory = deployment.reopen()
        memory.add(MARKER, user_id="zoe", infer=False)
        deployment.close()
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    with app_holding(deployment.paths.qdrant):
        asked = cli("forget", "--user", "zoe", "--erase", "--yes", "--json",
                    config=deployment.config)  # fmt: skip
        assert asked.code == 5 and asked.json()["route"] == "queued", asked.out + asked.err
    restored = cli("restore", snapshot.json()["id"], "--force", config=deployment.config)
    assert restored.code == 0, restored.err

    applied = cli("pending", "apply", "--json", config=deployment.config)

    assert applied.code == 0, applied.out + applied.err
    (request,) = applied.json()["requests"]
    assert request["status"] == "applied" and request["deleted"] == [], request
    assert len(request["erased"]["only_in_copies"]) == 1, request["erased"]
    assert request["replicas"]["renewed"] is True, request["replicas"]
    assert applied.json()["left"] == 0
    assert decompressed_hits(tmp_path / "replica", MARKER.encode()) == []
    held = [
        p for p in local_hits(deployment.paths.root, MARKER.encode()) if "-litestream/" not in p
    ]
    assert held == [], held
