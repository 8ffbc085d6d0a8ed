"""``forget --erase`` with ``[protect]``: the erased text leaves Litestream's replicas too.

Litestream (the real binary, ``make tools``) run by the daemon replicates both SQLite files to
moto's S3 server (a versioned bucket); a memory with a unique marker is written, shipped (the
byte search finds it in the bucket first), then erased while the app writes through mem0 with
memsync's agent. Afterwards no object version in the bucket (LZ4-decompressed, as Litestream
writes them) and no file under the deployment (Litestream's local generation state included)
holds the marker, and each file replicates in a new generation. Without a daemon memsync runs
Litestream itself for the new generation; one never seen keeps the older generations (exit 4).
A second Litestream writing to the same replica is ``replica-generation-changed``.
"""

from __future__ import annotations

import signal

import lz4.frame
import pytest

from tests.conftest import s3_section
from tests.helpers import litestream
from tests.helpers.app import AppProcess
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_protect import poll, protected, state_dir, status

MARKER = "the vault code is QX-7731-ZETA-replica"


def bucket_hits(client, bucket: str, needle: bytes) -> list[str]:
    """Every object version in the bucket holding ``needle`` (LZ4 frames decompressed)."""
    found = []
    pages = client.get_paginator("list_object_versions").paginate(Bucket=bucket)
    for page in pages:
        for item in page.get("Versions", []):
            body = client.get_object(Bucket=bucket, Key=item["Key"], VersionId=item["VersionId"])
            data = body["Body"].read()
            if item["Key"].endswith(".lz4"):
                data = lz4.frame.decompress(data)
            if needle in data:
                found.append(f"{item['Key']}@{item['VersionId']}")
    return found


def local_hits(root, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.slow(
    reason="the daemon and Litestream shipping to moto, a real app writing, a new generation"
)
def test_an_erasure_starts_new_generations_and_leaves_no_byte_in_the_bucket(
    make_deployment, tmp_path, cli, bucket, s3_endpoint
):
    import boto3

    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    deployment = make_deployment(
        count=10,
        extra_config=s3_section(s3_endpoint, bucket)
        + f'\n[protect]\nlitestream = "{litestream.ensure()}"\ns3 = true\n',
    )
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("both files replicated", lambda: status(cli, deployment)["protected"])
        memory = deployment.reopen()
        target = memory.add(MARKER, user_id="zed", infer=False)["results"][0]["id"]
        deployment.close()
        shipped = poll(  # the test's search sees what Litestream shipped, for both files
            "the marker shipped to the bucket",
            lambda: (
                (hits := bucket_hits(client, bucket, MARKER.encode()))
                and any("/history.db/" in h for h in hits)
                and any("/collection/" in h for h in hits)
                and hits
            ),
        )
        old = {f["label"]: f["generation"] for f in status(cli, deployment)["files"]}
        sock = tmp_path / "run" / "memsync-agent.sock"
        with AppProcess(deployment.paths.root, agent=sock, interval=0.05) as app:
            dry = cli("forget", target, "--erase", "--dry-run", "--json", config=deployment.config)
            erased = cli(
                "forget", target, "--erase", "--yes", "--no-snapshot", "--json",
                config=deployment.config,
            )  # fmt: skip
            stats = app.stop()
        after = poll(
            "both files replicated in their new generation",
            lambda: (s := status(cli, deployment))["protected"] and s,
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert len(shipped) >= 2  # both files' objects held it: history.db and storage.sqlite
    assert dry.code == 0, dry.err
    plan = dry.json()["replicas"]
    assert plan["dry_run"] is True
    assert sorted(f["generations"] == [old[f["label"]]] for f in plan["files"]) == [True, True]
    assert erased.code == 0, erased.out + erased.err
    report = erased.json()
    assert report["route"] == "agent"
    assert stats["failures"] == 0, stats["errors"]
    renewed = report["replicas"]
    assert renewed["renewed"] is True and renewed["problem"] is None
    for entry in renewed["files"]:
        assert entry["removed_generations"] == [old[entry["label"]]]
        assert entry["new_generation"] not in (None, old[entry["label"]])
        assert entry["restore_points_lost"]["from"] <= entry["restore_points_lost"]["to"]
    assert {f["label"]: f["generation"] for f in after["files"]} == {
        f["label"]: f["new_generation"] for f in renewed["files"]
    }
    assert bucket_hits(client, bucket, MARKER.encode()) == []
    assert local_hits(deployment.paths.root, MARKER.encode()) == []


def replicated_once(make_deployment, tmp_path, cli, binary):
    """A deployment whose directory replica got a generation holding the marker; Litestream is
    stopped again (no daemon runs). Returns ``(deployment, target, replica)``."""
    replica = tmp_path / "replica"
    deployment = protected(make_deployment, tmp_path, count=10)  # Litestream is ``binary``
    target = deployment.memory.add(MARKER, user_id="zed", infer=False)["results"][0]["id"]
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll(
            "the marker shipped to the replica directory",
            lambda: (
                (hits := decompressed_hits(replica, MARKER.encode()))
                and any("/history.db/" in h for h in hits)
                and any("/collection/" in h for h in hits)
            ),
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    return deployment, target, replica


def decompressed_hits(replica, needle: bytes) -> list[str]:
    found = []
    for path in replica.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            data = lz4.frame.decompress(data) if path.name.endswith(".lz4") else data
            found += [str(path)] if needle in data else []
    return found


@pytest.mark.slow(
    reason="the daemon and Litestream's first shipments, then Litestream run by memsync"
)
def test_without_a_daemon_memsync_runs_litestream_for_the_new_generation_then_stops_it(
    make_deployment, tmp_path, cli
):
    binary = litestream.ensure()
    deployment, target, replica = replicated_once(make_deployment, tmp_path, cli, binary)
    old = sorted(p.name for p in (replica / "history.db" / "generations").iterdir())
    result = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)
    assert result.code == 0, result.out + result.err
    renewed = result.json()["replicas"]
    assert renewed["renewed"] is True
    history = next(f for f in renewed["files"] if f["label"] == "history.db")
    assert history["removed_generations"] == old
    assert sorted(p.name for p in (replica / "history.db" / "generations").iterdir()) == [
        history["new_generation"]
    ]
    assert decompressed_hits(replica, MARKER.encode()) == []
    assert local_hits(deployment.paths.root, MARKER.encode()) == []
    status_now = status(cli, deployment)
    assert status_now["running"] is False  # memsync stopped the Litestream it ran itself
    assert [f["generation"] for f in status_now["files"] if f["label"] == "history.db"] == [
        history["new_generation"]
    ]


@pytest.mark.slow(reason="the daemon and Litestream's first shipments to a directory")
def test_a_new_generation_never_seen_keeps_the_older_ones_and_exits_4(
    make_deployment, tmp_path, cli
):
    binary = litestream.ensure()
    deployment, target, replica = replicated_once(make_deployment, tmp_path, cli, binary)
    broken = tmp_path / "broken-litestream"  # Litestream that exits at once (a bad install)
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    deployment.config.write_text(deployment.config.read_text().replace(str(binary), str(broken)))
    result = cli("forget", target, "--erase", "--yes", config=deployment.config)
    assert result.code == 4, result.out + result.err
    assert "replicas NOT renewed: no new generation reached " in result.out
    assert "the older generations (which hold the erased text) are kept" in result.out
    assert decompressed_hits(replica, MARKER.encode())  # nothing removed from the replica
    assert not (deployment.paths.root / "memsync-state" / "protect-hold.json").exists()


@pytest.mark.slow(reason="the daemon and Litestream's first shipments, then a second Litestream")
def test_another_litestream_on_the_replica_is_a_generation_change(make_deployment, tmp_path, cli):
    import json
    import subprocess

    binary = litestream.ensure()
    deployment, _, replica = replicated_once(make_deployment, tmp_path, cli, binary)
    (problem,) = status(cli, deployment)["problems"]
    assert problem.startswith("Litestream is not running: the daemon runs it, and no memsync")
    other = make_deployment(count=3, name="other")  # a copied config on another host
    other.close()
    foreign = tmp_path / "foreign.yml"
    foreign.write_text(
        json.dumps(
            {
                "dbs": [
                    {
                        "path": str(other.paths.history_db),
                        "replicas": [{"type": "file", "path": str(replica / "history.db")}],
                    }
                ]
            }
        )
    )
    process = subprocess.Popen(
        [str(binary), "replicate", "-config", str(foreign)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        doctor = poll(
            "doctor names the replica's changed generation",
            lambda: (
                (d := cli("doctor", "--json", config=deployment.config).json())
                and any(r["code"] == "replica-generation-changed" for r in d["results"])
                and d
            ),
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
    [changed] = [r for r in doctor["results"] if r["code"] == "replica-generation-changed"]
    assert changed["status"] == "error" and changed["path"] == str(deployment.paths.history_db)
    assert "written by another Litestream than this host's" in changed["message"]
    assert changed["fix"].startswith("find the other Litestream writing to this replica")
    problems = status(cli, deployment)["problems"]
    assert any("written by another Litestream" in p for p in problems)


@pytest.mark.slow(reason="the daemon and Litestream, an erasure, an older store back, a reconcile")
def test_a_reconcile_erasing_again_what_an_older_store_brought_back_renews_the_replicas(
    make_deployment, tmp_path, cli
):
    from memsync.demo import deployment as build

    replica = tmp_path / "replica"
    deployment = protected(make_deployment, tmp_path, count=10)
    target = deployment.memory.add(MARKER, user_id="zed", infer=False)["results"][0]["id"]
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    older = build.copy_qdrant(deployment.paths, tmp_path / "older")  # an hourly file backup
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("both files replicated", lambda: status(cli, deployment)["protected"])
        erased = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)
        assert erased.code == 0, erased.out + erased.err
        assert decompressed_hits(replica, MARKER.encode()) == []
        build.put_back_qdrant(deployment.paths, older)  # brings the erased point back
        poll(  # Litestream follows the new file: its new generation ships the erased text
            "the older store's text shipped to the replica",
            lambda: decompressed_hits(replica, MARKER.encode()),
        )
        reconciled = cli("reconcile", "--no-snapshot", "--json", config=deployment.config)
        after = poll(
            "both files replicated", lambda: (s := status(cli, deployment))["protected"] and s
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert reconciled.code == 0, reconciled.out + reconciled.err
    assert reconciled.json()["erased_again"] == [target]
    assert decompressed_hits(replica, MARKER.encode()) == []
    assert [f["generation"] == f["local_generation"] for f in after["files"]] == [True, True]


@pytest.mark.slow(reason="the daemon and Litestream's shipments, an erasure finished late")
def test_an_erasure_a_kill_left_unfinished_is_finished_with_the_replicas(
    make_deployment, tmp_path, cli
):
    import json

    replica = tmp_path / "replica"
    deployment = protected(make_deployment, tmp_path, count=10)
    target = deployment.memory.add(MARKER, user_id="zed", infer=False)["results"][0]["id"]
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    journal = deployment.paths.root / "memsync-state" / "erase-journal.json"
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("the marker shipped", lambda: decompressed_hits(replica, MARKER.encode()))
        # forget --erase killed after its deletes: the memory is gone, its text is not
        assert cli("forget", target, "--yes", "--no-snapshot", config=deployment.config).code == 0
        journal.write_text(json.dumps({"memory_ids": [target], "scope": {}}))
        other = deployment.seeded.live[0]  # the next write finishes the erasure first
        result = cli("forget", other, "--yes", "--no-snapshot", config=deployment.config)
        after = poll(
            "both files replicated", lambda: (s := status(cli, deployment))["protected"] and s
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert result.code == 0, result.out + result.err
    assert not journal.exists()  # finished and verified: Litestream no longer pins the -wal files
    assert decompressed_hits(replica, MARKER.encode()) == []
    assert local_hits(deployment.paths.root, MARKER.encode()) == []
    assert [f["generation"] == f["local_generation"] for f in after["files"]] == [True, True]


@pytest.mark.slow(reason="the daemon and Litestream, an app a maintenance window stops and starts")
def test_an_erasure_in_a_maintenance_window_renews_the_replicas(make_deployment, tmp_path, cli):
    from tests.helpers import window_app

    replica = tmp_path / "replica"
    deployment = protected(make_deployment, tmp_path, count=10)
    target = deployment.memory.add(MARKER, user_id="zed", infer=False)["results"][0]["id"]
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    root = deployment.paths.root
    deployment.config.write_text(deployment.config.read_text() + window_app.commands(root))
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("the marker shipped", lambda: decompressed_hits(replica, MARKER.encode()))
        assert window_app.start(root) == 0
        erased = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)
        window_app.stop(root)
        poll("both files replicated", lambda: status(cli, deployment)["protected"])
    finally:
        window_app.stop(root)
        code, err = stop(daemon)
    assert code == 0, err
    assert erased.code == 0, erased.out + erased.err
    report = erased.json()
    assert report["route"] == "window" and report["replicas"]["renewed"] is True
    assert decompressed_hits(replica, MARKER.encode()) == []
    assert local_hits(root, MARKER.encode()) == []


@pytest.mark.slow(reason="the daemon and Litestream, two queued erasures applied in one run")
def test_two_queued_erasures_applied_in_one_run_each_renew_the_replicas(
    make_deployment, tmp_path, cli
):
    from tests.helpers.holders import app_holding

    replica = tmp_path / "replica"
    deployment = protected(make_deployment, tmp_path, count=10)
    second = "the locker code is ZQ-4408-OMEGA-replica"
    targets = [
        deployment.memory.add(text, user_id="zed", infer=False)["results"][0]["id"]
        for text in (MARKER, second)
    ]
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("the texts shipped", lambda: decompressed_hits(replica, second.encode()))
        with app_holding(deployment.paths.qdrant):  # no route: both erasures are queued
            for target in targets:
                queued = cli("forget", target, "--erase", "--yes", config=deployment.config)
                assert queued.code == 5, queued.out + queued.err
        applied = cli("pending", "apply", "--json", config=deployment.config)
        after = poll(
            "both files replicated", lambda: (s := status(cli, deployment))["protected"] and s
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert applied.code == 0, applied.out + applied.err
    assert [r["status"] for r in applied.json()["requests"]] == ["applied", "applied"]
    for text in (MARKER, second):
        assert decompressed_hits(replica, text.encode()) == []
        assert local_hits(deployment.paths.root, text.encode()) == []
    assert [f["generation"] == f["local_generation"] for f in after["files"]] == [True, True]


def test_a_retry_stops_only_the_litestream_a_killed_erasure_record_proves(
    make_deployment, tmp_path, cli
):
    """A killed erasure's ``protect-erasure.json``: the retry stops the Litestream whose
    environment holds the record's token and whose command line replicates this deployment,
    and no other process: not a ``replicate`` of the same configuration without the token
    (the daemon's, or one of the user's), not the token under another configuration, not a
    recorded pid whose start time differs (a pid reused)."""
    import json
    import os
    import subprocess
    import sys

    deployment = protected(make_deployment, tmp_path, count=10)
    target = deployment.memory.add(MARKER, user_id="zed", infer=False)["results"][0]["id"]
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    config_file = state_dir(deployment) / "litestream.yml"
    record = state_dir(deployment) / "protect-erasure.json"
    token = "5" * 32
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip

    def replicate(config, token=None):  # a process with Litestream's command line
        env = {**os.environ, **({"MEMSYNC_ERASURE_TOKEN": token} if token else {})}
        code = "import time; time.sleep(300)"
        argv = [sys.executable, "-c", code, "replicate", "-no-expand-env", "-config", str(config)]
        return subprocess.Popen(argv, env=env)

    def record_of(pid, started):
        by = {"by": int(gone.stdout), "by_started": 1}  # the erasure was killed
        record.write_text(json.dumps({**by, "token": token, "pid": pid, "started": started}))

    def named():
        return [p for p in status(cli, deployment)["problems"] if p.startswith("Litestream pid ")]

    ours = replicate(config_file, token)
    others = [replicate(config_file), replicate(tmp_path / "other.yml", token)]
    try:
        record_of(ours.pid, 1)  # its pid, another start time: a reused pid is not ours
        assert named() == []
        record_of(None, None)  # killed before the record named its pid: found by its token
        [problem] = named()
        assert problem.startswith(f"Litestream pid {ours.pid} was left running by a memsync ")
        erased = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)
        assert erased.code == 0, erased.out + erased.err
        assert ours.wait(timeout=5) == -signal.SIGTERM
        assert [p.poll() for p in others] == [None, None]
        assert not record.exists()
    finally:
        for process in (ours, *others):
            process.kill()
            process.wait()
