"""``memsync restore --at TIME``: both stores back to one moment from their Litestream replicas.

The real Litestream binary (``make tools``) run by memsync's daemon, a directory replica, writes
through mem0 spaced by more than the sync interval, each one waited for on the replica (never a
fixed sleep); then ``restore --at`` a time between two of them, memory by memory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memsync import utc
from memsync.demo import deployment as build
from tests.conftest import s3_section
from tests.helpers import litestream
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_protect import poll, protected, state_dir, status


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


def moved(cli: Any, deployment: Any, before: dict[str, str]) -> dict[str, str]:
    """Wait until every file's last position shipped differs from ``before``'s; the positions."""
    return dict(  # type: ignore[arg-type]
        poll(
            "every file's position moved",
            lambda: (
                (found := {f["label"]: f["position"] for f in status(cli, deployment)["files"]})
                and all(p and p != before.get(label) for label, p in found.items())
                and found
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
    """Every file of both stores (their -wal included) by path, with its sha256.

    Not ``.lock``, nor ``-shm`` (SQLite's shared index, which any reader writes), nor the
    ``.restore-*`` copies a restore stages beside the stores.
    """
    files = [*deployment.paths.qdrant.rglob("*"), *deployment.paths.history_db.parent.glob("*")]
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(files)
        if p.is_file()
        and p.name != ".lock"
        and not p.name.endswith("-shm")
        and ".restore-" not in str(p)
    }


def running(make_deployment: Any, tmp_path: Path, cli: Any) -> tuple[Any, Any]:
    """A protected deployment (the app stopped) and the daemon running Litestream on it."""
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    daemon.wait_event("litestream_started")
    return deployment, daemon


def replicated(
    make_deployment: Any, tmp_path: Path, cli: Any, *texts: str
) -> tuple[Any, list[str], datetime]:
    """A protected deployment, everything shipped, then each of ``texts`` written and shipped in
    turn; the daemon stopped. The memory ids of ``texts``, and a moment between the first
    shipment and the first of them.
    """
    deployment, daemon = running(make_deployment, tmp_path, cli)
    written = []
    try:
        shipped(cli, deployment)
        moment = datetime.now(UTC)
        for text in texts:
            written.append(add(deployment, text))
            shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    return deployment, written, moment


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
    looked = cli("restore", "--at", stamp, "--dry-run", config=deployment.config)
    assert looked.code == 0, looked.err
    assert (
        f"would lose what was written after {utc.iso(between)}: 1 history events of 1 memories "
        f"({second}); 1 of them added after it are only in the live store"
    ) in looked.out
    assert "the seam: the two stores agree, memory by memory" in looked.out
    assert "--dry-run: restored and checked in the work directory; nothing changed" in looked.out
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
    assert at["lost_after"] == {
        "history_events": 1,
        "memories": [second],
        "only_in_live": [second],
    }
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
    deployment, _, _ = replicated(make_deployment, tmp_path, cli)
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
@pytest.mark.parametrize("state", ["kept", "lost"])  # lost: the disk held state_dir too
def test_after_a_lost_disk_restore_at_latest_brings_back_every_shipped_write(
    make_deployment: Any, tmp_path: Path, cli: Any, state: str
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
    if state == "lost":  # its litestream.yml with it: the replicas say which files they hold
        shutil.rmtree(state_dir(deployment))
        stray = tmp_path / "replica" / "collection" / "old_notes" / "generations"
        stray.mkdir(parents=True)  # a replica that holds no generation: passed over

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


def objects(replica: Path) -> int:
    return sum(1 for _ in replica.glob("generations/*/*/*"))


def ship_the_collection_alone(deployment: Any, tmp_path: Path) -> None:
    """A write in flight: Litestream ships the collection's part of the last write, not history's.

    Runs ``litestream replicate`` on the collection's file alone (the daemon stopped) until its
    replica holds a new object.
    """
    vectors = tmp_path / "replica" / "collection" / "mem0"
    document = json.loads((state_dir(deployment) / "litestream.yml").read_text())
    document["dbs"] = [db for db in document["dbs"] if db["path"].endswith("storage.sqlite")]
    alone = tmp_path / "collection-only.yml"
    alone.write_text(json.dumps(document))
    held = objects(vectors)
    process = subprocess.Popen(
        [str(litestream.ensure()), "replicate", "-config", str(alone)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll("the collection's part of the write shipped", lambda: objects(vectors) > held)
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.mark.slow(reason="the daemon started twice, Litestream alone on one file, a reconcile")
def test_a_write_one_file_shipped_at_time_and_the_other_not_is_the_seam_and_reconcile_settles_it(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, _, _ = replicated(make_deployment, tmp_path, cli)
    written = add(deployment, "parks on the third floor")  # nothing runs Litestream now
    ship_the_collection_alone(deployment, tmp_path)
    moment = datetime.now(UTC)
    events = tmp_path / "replica" / "history.db"
    held = objects(events)
    (tmp_path / "again").mkdir()
    daemon = start(deployment.config, Notify(tmp_path / "again"))
    try:
        daemon.wait_event("litestream_started")
        poll("history's part of the write shipped", lambda: objects(events) > held)
    finally:
        code, err = stop(daemon)
    assert code == 0, err

    done = cli("restore", "--at", utc.iso(moment), "--force", "--json", config=deployment.config)

    assert done.code == 0, done.out
    at = done.json()["at"]
    assert at["seam"] == [{"code": "orphan-point", "memory_id": written, "collection": "mem0"}]
    assert at["reconcile"] == "memsync reconcile"
    settled = at["reconcile_result"]
    assert settled["error"] is None and settled["actions"]["done"] == 1, settled
    assert settled["check_after"]["errors"] == 0 and at["reconciled"] is True
    assert at["lost_after"] == {
        "history_events": 1,
        "memories": [written],
        "only_in_live": [written],
    }
    assert written in memory_ids(deployment)  # the vector shipped before the moment: kept
    assert cli("check", config=deployment.config).code == 0


@pytest.mark.slow(reason="the daemon and Litestream shipping to moto's S3 server, a restore")
def test_restore_at_from_an_s3_replica_lands_between_two_writes(
    make_deployment: Any, tmp_path: Path, cli: Any, bucket: str, s3_endpoint: str
) -> None:
    deployment = make_deployment(
        extra_config=s3_section(s3_endpoint, bucket)
        + f'\n[protect]\nlitestream = "{litestream.ensure()}"\ns3 = true\n'
    )
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))  # AWS_* from the s3_endpoint fixture
    try:
        daemon.wait_event("litestream_started")
        # S3 times its objects to the second: a file's last write is later than its shipment
        # (lag_s > 0); a write has shipped when each file's position moved past it
        positions = moved(cli, deployment, {})
        first = add(deployment, "waters the fern on Sundays")
        positions = moved(cli, deployment, positions)
        between = datetime.now(UTC)
        poll("a second passed", lambda: datetime.now(UTC).second != between.second)
        second = add(deployment, "gave the fern away")
        moved(cli, deployment, positions)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    before = memory_ids(deployment)
    (state_dir(deployment) / "litestream.yml").unlink()  # the bucket's listing names the files

    done = cli("restore", "--at", utc.iso(between), "--force", "--json", config=deployment.config)

    assert done.code == 0, done.err
    at = done.json()["at"]
    assert [f["replica"][:5] for f in at["files"]] == ["s3://", "s3://"]
    assert at["lost_after"]["memories"] == at["lost_after"]["only_in_live"] == [second]
    assert first in before and memory_ids(deployment) == before - {second}


@pytest.mark.slow(reason="the daemon and Litestream's first shipments, a job restoring them")
def test_the_replica_job_restores_every_replica_into_scratch_and_checks_it_clean(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, _, _ = replicated(make_deployment, tmp_path, cli)
    files = fingerprint(deployment)

    job = cli("job", "replica", "--json", config=deployment.config)
    verified = cli("protect", "--verify", "--json", config=deployment.config)

    assert job.code == 0, job.out
    assert verified.code == 0, verified.out
    report = verified.json()
    assert report["ok"] is True and report["findings"] == []
    assert report["check_after"]["points"] == len(deployment.seeded.live)
    assert [f["label"] for f in report["at"]["files"]] == ["collection mem0", "history.db"]
    assert fingerprint(deployment) == files  # nothing live written
    work = list((deployment.paths.root / "memsync-state").rglob("protect-verify-*"))
    assert work == []  # nothing kept
    shutil.rmtree(tmp_path / "replica" / "history.db")  # the replica lost
    lost = cli("protect", "--verify", config=deployment.config)
    assert lost.code == 11 and lost.err.count("\n") == 1
    assert "history.db: its replica" in lost.err and "holds no generation" in lost.err


@pytest.mark.slow(reason="the daemon and Litestream's first shipments")
def test_a_litestream_that_fails_on_a_damaged_replica_refuses_with_its_last_line(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, _, _ = replicated(make_deployment, tmp_path, cli)
    files = fingerprint(deployment)
    for segment in (tmp_path / "replica" / "history.db").glob("generations/*/*/*.lz4"):
        segment.write_bytes(b"not lz4")  # the replica damaged where it is stored

    done = cli("restore", "--at", "latest", "--force", config=deployment.config)

    assert done.code == 11
    assert done.err.count("\n") == 1
    assert "litestream restore of history.db failed: " in done.err
    assert "level=ERROR" in done.err  # Litestream's own last line
    assert fingerprint(deployment) == files
    assert not [p for p in deployment.paths.root.rglob("*") if ".restore-" in p.name]


@pytest.mark.slow(reason="the daemon and Litestream, a restore under them, a write shipped after")
def test_restore_at_under_a_running_daemon_leaves_litestream_following_the_restored_files(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
        moment = datetime.now(UTC)
        gone = add(deployment, "keeps receipts in a shoebox")
        shipped(cli, deployment)
        done = cli(
            "restore", "--at", utc.iso(moment), "--force", "--json", config=deployment.config
        )
        assert done.code == 0, done.err
        daemon.wait_event("litestream_stopped")  # the daemon saw the files replaced
        after = add(deployment, "moved the receipts to a folder")
        shipped(cli, deployment)  # the restored files replicate, with the write after
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert done.json()["at"]["lost_after"]["memories"] == [gone]
    found = memory_ids(deployment)
    assert after in found and gone not in found
    again = cli(
        "restore",
        "--at",
        "latest",
        "--to",
        str(tmp_path / "copy"),
        "--json",
        config=deployment.config,
    )
    assert again.code == 0, again.err
    assert again.json()["check_after"]["errors"] == 0
    copy = build.Paths(tmp_path / "copy")
    connection = sqlite3.connect(copy.history_db)
    try:
        ids = {row[0] for row in connection.execute("SELECT memory_id FROM history")}
    finally:
        connection.close()
    assert after in ids and gone not in ids  # the replica's latest: after the restore, its write


@pytest.mark.slow(reason="the daemon and Litestream shipping a forget, then a recover through mem0")
def test_recover_at_a_time_before_a_forget_brings_the_memory_back_and_leaves_the_rest(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    gone = deployment.seeded.live[0]
    try:
        shipped(cli, deployment)
        moment = datetime.now(UTC)
        forgotten = cli("forget", gone, "--yes", "--no-snapshot", config=deployment.config)
        assert forgotten.code == 0, forgotten.err
        later = add(deployment, "bought a new kettle")
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    memory = deployment.reopen()
    try:
        assert memory.get(gone) is None
    finally:
        deployment.close()

    done = cli("recover", gone, "--at", utc.iso(moment), "--json", config=deployment.config)

    assert done.code == 0, done.err
    report = done.json()
    assert report["snapshot_id"] == "at-" + moment.strftime("%Y%m%dT%H%M%S%fZ")
    assert [(m["memory_id"], m["status"]) for m in report["memories"]] == [(gone, "recovered")]
    assert report["check_after"]["errors"] == 0
    memory = deployment.reopen()
    try:
        assert memory.get(gone)["id"] == gone
        assert memory.get(later)["id"] == later  # written after TIME: left as it is
    finally:
        deployment.close()
