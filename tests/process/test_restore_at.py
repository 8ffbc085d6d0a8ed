"""``memsync restore --at TIME``: both stores back to one moment from their Litestream replicas.

The real Litestream binary (``make tools``) run by memsync's daemon, a directory replica, writes
through mem0 spaced by more than the sync interval, each one waited for on the replica (never a
fixed sleep); then ``restore --at`` a time between two of them, memory by memory.
"""

from __future__ import annotations

import hashlib
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memsync import utc
from memsync.demo import deployment as build
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_protect import poll, protected, status


def shipped(cli: Any, deployment: Any) -> dict[str, Any]:
    """Wait until every file is replicated with nothing of it left unshipped; the status."""
    return dict(  # type: ignore[arg-type]
        poll(
            "every write shipped to the replica",
            lambda: (
                (s := status(cli, deployment))["files"]
                and all(f["replicated"] and f["position"] and f["lag_s"] == 0 for f in s["files"])
                and s
            ),
        )
    )


def add(deployment: Any, text: str) -> str:
    """One memory written through mem0 (the app's write); its id. The store is left free."""
    memory = deployment.reopen()
    try:
        [result] = memory.add(text, user_id="alice", infer=False)["results"]
    finally:
        deployment.close()
    return str(result["id"])


def memory_ids(deployment: Any) -> set[str]:
    memory = deployment.reopen()
    try:
        found = memory.get_all(filters={"user_id": "alice"}, limit=10_000)
    except TypeError:  # mem0ai before 2.x takes the scope as a keyword
        found = memory.get_all(user_id="alice", limit=10_000)
    finally:
        deployment.close()
    return {item["id"] for item in found["results"]}


def fingerprint(deployment: Any) -> dict[str, str]:
    """Every file of both stores (sides included) by path, with its sha256."""
    files = [*deployment.paths.qdrant.rglob("*"), *deployment.paths.history_db.parent.glob("*")]
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(files)
        if p.is_file() and p.name != ".lock"
    }


def running(make_deployment: Any, tmp_path: Path, cli: Any) -> tuple[Any, Any]:
    """A protected deployment (the app stopped) and the daemon running Litestream on it."""
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    daemon.wait_event("litestream_started")
    return deployment, daemon


@pytest.mark.slow(reason="the daemon and Litestream shipping three rounds of writes, a restore")
def test_restore_at_a_time_between_two_writes_lands_exactly_between_them(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
        first = add(deployment, "keeps a spare key under the blue pot")
        shipped(cli, deployment)
        between = datetime.now(UTC)  # the first write is on the replica; the second is not yet
        second = add(deployment, "moved the spare key to the garage")
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    before = memory_ids(deployment)
    assert {first, second} <= before

    stamp = between.isoformat().replace("+00:00", "Z")
    done = cli("restore", "--at", stamp, "--force", "--json", config=deployment.config)

    assert done.code == 0, done.err
    report = done.json()
    at = report["at"]
    assert at["time"] == utc.iso(between)
    assert [f["label"] for f in at["files"]] == ["collection mem0", "history.db"]
    for entry in at["files"]:
        assert entry["position"].startswith(entry["generation"] + "/")
        assert entry["shipped_at"] <= stamp
    assert at["meta_json"] == "live store"  # no snapshot was taken
    assert at["lost_after"] == {"history_events": 1, "memories": [second]}
    assert at["seam"] == [] and at["reconcile"] is None and at["reconciled"] is False
    assert report["check_after"]["errors"] == 0
    assert report["verification"] == {"snapshot": "replica", "check_after": "full"}
    assert len(report["moved_aside"]) >= 2
    assert memory_ids(deployment) == before - {
        second
    }  # memory by memory: the first, not the second
    assert cli("check", config=deployment.config).code == 0


@pytest.mark.slow(reason="the daemon and Litestream's first shipments")
def test_restore_at_before_the_replica_began_refuses_and_leaves_the_store_untouched(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    earlier = datetime.now(UTC)
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    files = fingerprint(deployment)
    stamp = earlier.isoformat().replace("+00:00", "Z")

    done = cli("restore", "--at", stamp, "--force", config=deployment.config)

    assert done.code == 11
    assert done.err.count("\n") == 1
    assert f"does not reach back to {stamp[:19]}" in done.err
    assert "its oldest snapshot was shipped at" in done.err
    assert fingerprint(deployment) == files
    leftovers = [p for p in deployment.paths.root.rglob("*") if ".restore-" in p.name]
    assert leftovers == []


@pytest.mark.slow(reason="the daemon and Litestream, a snapshot, a lost disk and two restores")
def test_after_a_lost_disk_restore_at_latest_brings_back_every_shipped_write(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        snapshot = cli("snapshot", "create", "--json", config=deployment.config)
        assert snapshot.code == 0, snapshot.err
        verified = cli("snapshot", "verify", snapshot.json()["id"], config=deployment.config)
        assert verified.code == 0, verified.out
        later = add(deployment, "was written after the snapshot")
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    expected = memory_ids(deployment)
    assert later in expected
    shutil.rmtree(deployment.paths.qdrant)  # the lost disk: both stores gone
    for side in deployment.paths.history_db.parent.glob("history.db*"):
        side.unlink()

    copy = tmp_path / "copy"
    looked = cli("restore", "--at", "latest", "--to", str(copy), "--json", config=deployment.config)
    assert looked.code == 0, looked.err
    assert looked.json()["check_after"]["errors"] == 0
    assert looked.json()["at"]["lost_after"] is None  # no live history.db to count from
    done = cli("restore", "--at", "latest", "--json", config=deployment.config)

    assert done.code == 0, done.err
    report = done.json()
    assert report["at"]["time"] == "latest"
    assert report["at"]["meta_json"] == f"snapshot {snapshot.json()['id']}"
    assert report["check_after"]["errors"] == 0 and report["moved_aside"] == []
    assert memory_ids(deployment) == expected  # the write after the snapshot too
    assert build.Paths(copy).history_db.is_file()
