"""Breaker findings on issue 12's backup features: each test failed before its fix.

Real deployments (hash embedder), real snapshots, moto's S3 server on 127.0.0.1, the real CLI.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memsync import config as memsync_config
from memsync import snapshot
from memsync.deployment import Deployment
from memsync.stores.snapshots import PINNED
from tests.process.test_snapshot_retention import make, remote_deployment

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "memsync/brk"
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def remote(make_deployment: Any, s3_endpoint: str, bucket: str) -> Any:
    return remote_deployment(make_deployment, s3_endpoint, bucket, PREFIX, 8)


def test_damaged_local_pin_keeps_the_snapshot(remote: Any, cli: Any) -> None:
    """A pinned.json that cannot be read (truncated by a full disk, edited by hand) is no
    licence to remove the snapshot: prune keeps it and says the pin is unreadable."""
    d = remote
    pinned = make(d, 10, upload=False)
    make(d, 1, upload=False)
    assert cli("snapshot", "pin", pinned, "--reason", "keep", config=d.config).code == 0
    pin_file = d.paths.root / "snapshots" / pinned / PINNED
    pin_file.write_text(pin_file.read_text()[:15])  # truncated
    result = cli("snapshot", "prune", "--yes", "--local-only", "--json", config=d.config)
    assert result.code == 0, result.err
    decision = {x["id"]: x for x in result.json()["decisions"]}[pinned]
    assert decision["keep"], decision
    assert (d.paths.root / "snapshots" / pinned).is_dir()


@pytest.mark.parametrize("damage", ["truncated", "pinned-not-bool"])
def test_damaged_remote_pin_keeps_the_snapshot_on_both_sides(
    remote: Any, cli: Any, damage: str
) -> None:
    """A pin damaged in the bucket only (a hand edit, ``"pinned": "yes"``) still keeps the
    snapshot on both sides, and ``snapshot unpin`` replaces the damaged document."""
    d = remote
    pinned = make(d, 10)
    make(d, 1)
    assert cli("snapshot", "pin", pinned, config=d.config).code == 0
    key = f"{PREFIX}/{pinned}/{PINNED}"
    body = b'{"pinned": tr' if damage == "truncated" else b'{"pinned": "yes"}'
    d.client.put_object(Bucket=d.bucket, Key=key, Body=body)
    (d.paths.root / "snapshots" / pinned / PINNED).unlink()  # pinned on the remote side only
    result = cli("snapshot", "prune", "--yes", "--json", config=d.config)
    assert result.code == 0, result.err
    decision = {x["id"]: x for x in result.json()["decisions"]}[pinned]
    assert decision["keep"] and decision["sides"] == ["local", "remote"], decision
    assert (d.paths.root / "snapshots" / pinned).is_dir()
    unpin = cli("snapshot", "unpin", pinned, config=d.config)
    assert unpin.code == 0, unpin.err
    again = cli("snapshot", "prune", "--yes", "--json", config=d.config)
    assert pinned in again.json()["removed"]


def test_restore_to_through_a_link_into_the_live_deployment_is_refused(
    deployment: Any, cli: Any, tmp_path: Any
) -> None:
    """``restore --to`` refuses a directory inside the live deployment (restore.md); a
    symbolic link on the way there (LINK -> the live mem0 directory, --to LINK/copy) must
    not get around that."""
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    snapshot_id = made.json()["id"]
    link = tmp_path / "elsewhere"
    link.symlink_to(deployment.paths.root / "mem0")
    before = sorted(p.name for p in (deployment.paths.root / "mem0").iterdir())
    result = cli("restore", snapshot_id, "--to", str(link / "copy"), config=deployment.config)
    assert result.code == 2, (result.code, result.err)
    assert "inside" in result.err
    assert sorted(p.name for p in (deployment.paths.root / "mem0").iterdir()) == before


@pytest.mark.parametrize(
    "marker", [b'{"since": "2026-11-30T00:00:00Z", "attempts": "many"}', b'{"since": "2026-1']
)
def test_damaged_upload_marker_is_uploaded_and_shown_pending(
    remote: Any, cli: Any, marker: bytes
) -> None:
    """A damaged ``upload-pending.json`` (hand-edited attempts, truncated) leaves the snapshot
    pending: ``snapshot list`` says so, and the next ``create --upload`` uploads it."""
    d = remote
    waiting = make(d, 0.5, upload=False)
    (d.paths.root / "snapshots" / waiting / "upload-pending.json").write_bytes(marker)
    listed = cli("snapshot", "list", "--json", config=d.config)
    assert listed.code == 0, listed.err
    row = {r["id"]: r for r in listed.json()["snapshots"]}[waiting]
    assert row["upload_pending"] is True, row
    result = cli("snapshot", "create", "--upload", "--pending-only", "--json", config=d.config)
    assert result.code == 0, (result.code, result.err)
    assert not (d.paths.root / "snapshots" / waiting / "upload-pending.json").exists()
    keys = d.client.list_objects_v2(Bucket=d.bucket, Prefix=f"{PREFIX}/{waiting}/")["Contents"]
    assert any(k["Key"].endswith("/manifest.json") for k in keys)


@pytest.mark.parametrize(
    "document",
    [
        [{"at": "2026-11-01T00:00:00+00:00", "memory_ids": ["m-old"], "scope": {}}],
        {"erasures": {"m-old": 1}},
        {"erasures": [{"at": "x", "memory_ids": 7, "scope": {}}]},
    ],
)
def test_misshapen_erasure_ledger_is_refused_never_overwritten(
    tmp_path: Any, document: Any
) -> None:
    """An ``erasures.json`` that is JSON but not the ledger's shape is as unreadable as a
    truncated one (exit 11 naming it): recording the next erasure must not replace it (the
    earlier ids were the only record of what to look for in old S3 versions)."""
    from memsync.erase import ledger
    from memsync.errors import UnavailableError

    path = tmp_path / ledger.LEDGER
    text = json.dumps(document)
    path.write_text(text)
    with pytest.raises(UnavailableError, match="erasures.json"):
        ledger.record(tmp_path, ["m-new"], None, NOW)
    with pytest.raises(UnavailableError, match="erasures.json"):
        ledger.erased_ids(tmp_path)
    assert path.read_text() == text


def _killed(config: Any, target: str, nth: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat", target, "--nth", str(nth), "--",
         *argv, "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_recover_killed_between_event_and_point_is_finished_by_the_next_run(
    deployment: Any, cli: Any
) -> None:
    """SIGKILL ``recover --user`` after the 3rd memory's history event, before its point;
    the next ``recover`` brings every memory of the user back, each with one recover event,
    and check is clean."""
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    snapshot_id = made.json()["id"]
    assert cli("snapshot", "verify", snapshot_id, config=deployment.config).code == 0
    forgot = cli("forget", "--user", "alice", "--yes", "--no-snapshot", "--json",
                 config=deployment.config)  # fmt: skip
    assert forgot.code == 0, forgot.err
    theirs = set(forgot.json()["deleted"])
    assert len(theirs) >= 4
    killed = _killed(deployment.config, "memsync.stores.agent_client:AgentWriter.put_back", 3,
                     "recover", "--user", "alice", "--from", snapshot_id)  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    again = cli("recover", "--user", "alice", "--from", snapshot_id, "--json",
                config=deployment.config)  # fmt: skip
    assert again.code == 0, again.err
    document = again.json()
    assert document["check_after"]["errors"] == 0, document["check_after"]
    back = {m["memory_id"] for m in document["memories"] if m["status"] in ("recovered", "present")}
    assert back == theirs, document["memories"]
    with sqlite3.connect(deployment.paths.history_db) as connection:
        events = connection.execute(
            "SELECT memory_id, count(*) FROM history WHERE actor_id = 'memsync' GROUP BY memory_id"
        ).fetchall()
    assert {m for m, _ in events} == theirs and all(n == 1 for _, n in events), events


def test_prune_killed_while_removing_a_local_snapshot_leaves_nothing_for_good(
    deployment: Any, cli: Any
) -> None:
    """SIGKILL ``snapshot prune`` after it took a removed snapshot's manifest, before its
    files went: the half-removed directory is not a damaged snapshot left for the operator
    forever; the next create and prune leave nothing of it."""
    deployment.close()
    config = memsync_config.load(deployment.config, os.environ)
    old = str(snapshot.create_snapshot(Deployment.open(config), NOW - timedelta(days=30)).id)
    for days in (3, 2, 1):
        snapshot.create_snapshot(Deployment.open(config), NOW - timedelta(days=days))
    directory = deployment.paths.root / "snapshots"
    killed = _killed(deployment.config, "shutil:rmtree", 1,
                     "snapshot", "prune", "--yes", "--local-only")  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    assert not (directory / old / "manifest.json").exists()  # the kill landed mid-removal
    assert cli("snapshot", "create", config=deployment.config).code == 0
    again = cli("snapshot", "prune", "--yes", "--local-only", "--json", config=deployment.config)
    assert again.code == 0, again.err
    assert not [p for p in directory.iterdir() if p.name.startswith(old)]


def test_remote_prune_during_the_upload_of_an_old_pending_snapshot_breaks_nothing(
    remote: Any, cli: Any, tmp_path: Any
) -> None:
    """An old snapshot (captured 2 days ago, S3 down since) is being uploaded when
    ``snapshot prune --remote-only`` runs: its remote part is "incomplete, older than 1 day".
    Removing it under the running upload left a remote snapshot whose manifest lists files
    that are gone (verify fails, the local copy is no longer pending)."""
    d = remote
    make(d, 0.1)  # a newer complete snapshot on both sides
    waiting = make(d, 2, upload=False)
    flag = tmp_path / "paused"
    upload = subprocess.Popen(
        [sys.executable, "-m", "tests.breaker.pauseat", "memsync.s3:ObjectStore.put_file",
         "--nth", "2", "--flag", str(flag), "--",
         "snapshot", "upload", waiting, "--config", str(d.config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(600):
            if flag.exists() or upload.poll() is not None:
                break
            time.sleep(0.05)
        assert flag.exists(), upload.communicate()
        pruned = cli("snapshot", "prune", "--remote-only", "--yes", "--json", config=d.config)
        assert pruned.code == 0, pruned.err
        decision = {x["id"]: x for x in pruned.json()["decisions"]}[waiting]
        assert decision["keep"], decision
    finally:
        flag.unlink(missing_ok=True)
        out, err = upload.communicate(timeout=120)
    assert upload.returncode == 0, err
    verified = cli("snapshot", "verify", f"s3://{waiting}", config=d.config)
    assert verified.code == 0, verified.out + verified.err


@pytest.mark.parametrize("moment", ["0001-01-01T00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_before_a_time_out_of_range_is_a_usage_error(
    deployment: Any, cli: Any, moment: str
) -> None:
    """``--before`` at the ends of the calendar (valid ISO 8601 with an offset, but not a UTC
    time) is exit 2 naming it, not exit 1 ``unexpected OverflowError``."""
    deployment.close()
    for argv in (
        ("restore", "--before", moment, "--dry-run"),
        ("recover", "--user", "alice", "--before", moment, "--dry-run"),
    ):
        result = cli(*argv, config=deployment.config)
        assert result.code == 2, (argv, result.code, result.err)
        assert moment in result.err


def test_purge_memory_keeps_the_pin_and_the_pending_upload_of_a_snapshot(
    remote: Any, cli: Any
) -> None:
    """``snapshot purge-memory`` rewrites a snapshot holding the memory; the rewrite must keep
    what stood beside it: its pin (retention removed the pinned snapshot after an erasure)
    and its upload-pending mark (the erased copy was then never uploaded)."""
    d = remote
    pinned = make(d, 3, upload=False)
    waiting = make(d, 2, upload=False)
    make(d, 1, upload=False)
    directory = d.paths.root / "snapshots"
    assert cli("snapshot", "pin", pinned, "--reason", "audit", config=d.config).code == 0
    for snapshot_id in (pinned, waiting):
        (directory / snapshot_id / "upload-pending.json").write_text(
            json.dumps({"since": "2026-11-29T00:00:00Z", "attempts": 1, "to": "s3://x",
                        "last_error": "S3 down"})
        )  # fmt: skip
    victim = sorted(d.seeded.live)[0]
    purged = cli("snapshot", "purge-memory", victim, "--yes", "--json", config=d.config)
    assert purged.code == 0, purged.err
    assert set(purged.json()["rewritten"]) >= {pinned, waiting}, purged.out
    for snapshot_id in (pinned, waiting):
        assert (directory / snapshot_id / "upload-pending.json").is_file(), snapshot_id
    assert json.loads((directory / pinned / PINNED).read_text())["pinned"] is True
    pruned = cli("snapshot", "prune", "--local-only", "--yes", "--json", config=d.config)
    assert pinned not in pruned.json()["removed"]


def test_purge_memory_killed_between_its_renames_is_finished_by_the_next_run(
    deployment: Any, cli: Any
) -> None:
    """SIGKILL ``purge-memory`` after the old snapshot was renamed ``.purged-old`` and before
    the verified rewrite took its place: the snapshot vanished from every listing (retention,
    restore) and its unpurged bytes stayed. The next run puts the rewrite in place."""
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    snapshot_id = made.json()["id"]
    victim = sorted(deployment.seeded.live)[0]
    killed = _killed(deployment.config, "os:rename", 2,
                     "snapshot", "purge-memory", victim, "--yes")  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    directory = deployment.paths.root / "snapshots"
    assert not (directory / snapshot_id).exists()  # the kill landed between the renames
    again = cli("snapshot", "purge-memory", victim, "--yes", "--json", config=deployment.config)
    assert again.code == 0, again.err
    assert sorted(p.name for p in directory.iterdir() if p.name.startswith(snapshot_id)) == [
        snapshot_id
    ]
    assert cli("snapshot", "verify", snapshot_id, config=deployment.config).code == 0
    assert again.json()["holding"] == [], again.out
