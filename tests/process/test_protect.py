"""``memsync protect``: Litestream (the real binary, ``make tools``) run by the daemon.

A real app writing through mem0 with memsync's agent while ``protect`` switches its files to WAL;
the daemon starting Litestream from the configuration ``protect`` wrote; the replica (a local
directory) restored by ``litestream restore`` and checked by ``memsync check``; a Litestream
killed and restarted by the daemon; doctor's ``protection`` check on a stopped one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memsync.demo import deployment as build
from memsync.stores.sqlite_files import header_journal_mode
from tests.conftest import HASH, IN_FLIGHT_MARGIN_S, s3_section
from tests.helpers import litestream
from tests.helpers.app import AppProcess
from tests.process.test_daemon import Notify, start, stop


def protected(make_deployment: Any, tmp_path: Path, extra: str = "", count: int = 40) -> Any:
    """A seeded deployment whose config has ``[protect]`` with a directory replica."""
    binary = litestream.ensure()
    return make_deployment(
        count=count,
        extra_config=f'\n[protect]\nlitestream = "{binary}"\ndirectory = "{tmp_path / "replica"}"\n'
        + extra,
    )


def state_dir(deployment: Any) -> Path:
    return deployment.paths.root / "memsync-state"


def litestream_pid(deployment: Any) -> int | None:
    path = state_dir(deployment) / "protect-state.json"
    return json.loads(path.read_text()).get("pid") if path.exists() else None


def poll(what: str, probe: Any, timeout_s: float = 60.0) -> Any:
    """``probe()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what} never happened; last: {last}")


def status(cli: Any, deployment: Any) -> dict[str, Any]:
    return dict(cli("protect", "--status", "--json", config=deployment.config).json())


def test_protect_dry_run_prints_the_configuration_and_changes_nothing(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    result = cli("protect", "--dry-run", "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["dry_run"] is True and report["route"] == "direct"
    assert len(report["switched"]) == 2
    paths = [db["path"] for db in report["litestream"]["dbs"]]
    assert paths == [
        str(deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"),
        str(deployment.paths.history_db),
    ]
    replica = report["litestream"]["dbs"][1]["replicas"][0]
    assert replica == {
        "type": "file",
        "path": str(tmp_path / "replica" / "history.db"),
        "sync-interval": "1s",
        "retention": "86400s",
    }
    assert header_journal_mode(deployment.paths.history_db) == "rollback"
    assert not (state_dir(deployment) / "litestream.yml").exists()
    said = cli("protect", "--dry-run", config=deployment.config).out
    assert "protect: would switch 2 files to WAL mode (route: direct)" in said
    assert "litestream.yml (would be written):" in said
    assert cli("protect", config=deployment.config).code == 0
    again = cli("protect", "--dry-run", config=deployment.config).out
    assert "every SQLite file is in WAL mode already: nothing to switch" in again
    assert "litestream.yml (unchanged):" in again


def test_protect_refuses_a_missing_or_foreign_binary_before_changing_anything(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    fake = tmp_path / "litestream"  # answers like Litestream 0.5, whose replica layout differs
    fake.write_text("#!/bin/sh\necho v0.5.2\n")
    fake.chmod(0o755)
    deployment = make_deployment(
        extra_config=f'\n[protect]\nlitestream = "{tmp_path / "nowhere"}"\ndirectory = "{tmp_path}/r"\n'
    )
    deployment.close()
    missing = cli("protect", config=deployment.config)
    assert missing.code == 10
    assert missing.err.count("\n") == 1 and "protect.litestream: " in missing.err
    assert "is not an executable file or on PATH" in missing.err
    text = deployment.config.read_text().replace(str(tmp_path / "nowhere"), str(fake))
    deployment.config.write_text(text)
    foreign = cli("protect", "--dry-run", config=deployment.config)
    assert foreign.code == 10
    assert "is not Litestream 0.3 (`version` said 'v0.5.2')" in foreign.err
    assert header_journal_mode(deployment.paths.history_db) == "rollback"
    assert not (state_dir(deployment) / "litestream.yml").exists()


@pytest.mark.slow(
    reason="a real app writing, the daemon and Litestream's first shipments, restores"
)
def test_protected_writes_reach_the_replica_and_it_restores_a_clean_pair(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    sock = tmp_path / "run" / "memsync-agent.sock"
    notify = Notify(tmp_path)
    with AppProcess(deployment.paths.root, agent=sock, interval=0.02) as app:
        result = cli("protect", "--json", config=deployment.config)
        assert result.code == 0, result.err
        daemon = start(deployment.config, notify)
        try:
            daemon.wait_event("litestream_started")
            poll(
                "every file replicated within 5 s of its writes",
                lambda: all(
                    f["replicated"] and f["lag_s"] <= 5 for f in status(cli, deployment)["files"]
                ),
            )
            stats = app.stop()
            settled = poll(  # the app stopped: everything it wrote reaches the replica
                "the replica caught up with the last write",
                lambda: (
                    (s := status(cli, deployment))["protected"]
                    and all(f["lag_s"] == 0 for f in s["files"])
                    and s
                ),
            )
        finally:
            code, err = stop(daemon)
    report = result.json()
    assert report["route"] == "agent" and len(report["switched"]) == 2
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] > 0
    assert code == 0, err
    assert litestream_pid(deployment) is None  # SIGTERM stopped Litestream with the daemon
    for entry in settled["files"]:
        assert entry["position"].startswith(entry["generation"] + "/")
        assert entry["bytes_last_hour"] > 0
    live = cli("check", "--json", config=deployment.config)
    assert live.code == 0, live.out

    restored = tmp_path / "restored"  # the lost disk: only the replica and meta.json remain
    shutil.copytree(
        deployment.paths.qdrant,
        restored / "qdrant",
        ignore=shutil.ignore_patterns("storage.sqlite*", ".lock"),
    )
    config_file = state_dir(deployment) / "litestream.yml"
    collection = Path("collection") / "mem0" / "storage.sqlite"
    pairs = [
        (deployment.paths.qdrant / collection, restored / "qdrant" / collection),
        (deployment.paths.history_db, restored / "mem0" / "history.db"),
    ]
    for live_file, out in pairs:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [str(litestream.ensure()), "restore", "-config", str(config_file), "-o", str(out)]
            + [str(live_file)],
            check=True,
            capture_output=True,
            timeout=60,
        )
    copy = build.write_memsync_config(
        build.Paths(restored), embedder=HASH, in_flight_margin_s=IN_FLIGHT_MARGIN_S
    )
    checked = cli("check", "--json", config=copy)
    assert checked.code == 0, checked.out
    assert checked.json()["counts"] == live.json()["counts"]  # every write, memory by memory


@pytest.mark.slow(reason="the daemon, Litestream started twice, and two doctor runs")
def test_the_daemon_restarts_a_killed_litestream_and_doctor_reports_a_stopped_one(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    textfile = tmp_path / "memsync.prom"
    deployment = protected(  # check_at: a catch-up check as the daemon starts
        make_deployment, tmp_path, f'\n[daemon]\ncheck_at = "00:00"\ntextfile_path = "{textfile}"\n'
    )
    deployment.close()
    protecting = cli("protect", config=deployment.config)
    assert protecting.code == 0 and "no memsync daemon is running: start it" in protecting.out
    notify = Notify(tmp_path)
    daemon = start(deployment.config, notify)
    try:
        daemon.wait_event("litestream_started")
        job = daemon.wait_event("job_finished")  # with the supervisor's thread running
        first = poll("Litestream recorded", lambda: litestream_pid(deployment))
        os.kill(first, signal.SIGKILL)
        exited = daemon.wait_event("litestream_exited")
        daemon.wait_event("litestream_started", count=2)
        second = poll("Litestream recorded again", lambda: litestream_pid(deployment))
        poll("both files replicated", lambda: status(cli, deployment)["protected"])
        running = cli("doctor", "--json", config=deployment.config).json()
        assert cli("job", "check", config=deployment.config).code == 0  # rewrites the textfile
        gauges = textfile.read_text()
        shown = cli("status", "--json", config=deployment.config)
        again = cli("protect", config=deployment.config)
        assert "; the memsync daemon runs Litestream with it" in again.out, again.out
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert exited[0]["exit_code"] == -signal.SIGKILL and exited[0]["restart_in_s"] == 1
    assert second != first
    assert (job[0]["outcome"], job[0]["child"]) == ("ok", "fork")
    mine = [r for r in running["results"] if r["code"] == "protection"]
    assert mine[0]["status"] == "ok" and str(second) in mine[0]["message"]
    assert [r["status"] for r in mine[1:]] == ["ok", "ok"]
    for label in ("history.db", "collection mem0"):
        assert f'memsync_protect_replicated{{file="{label}"}} 1' in gauges
        assert f'memsync_protect_lag_seconds{{file="{label}"}}' in gauges
    assert shown.code == 0, shown.out
    assert shown.json()["protection"]["protected"] is True
    assert [f["replicated"] for f in shown.json()["protection"]["files"]] == [True, True]
    after = cli("status", "--json", config=deployment.config)
    assert after.code == 3
    assert (
        "Litestream is not running: the daemon runs it, and no memsync daemon is running (start "
        "it: memsync daemon, or systemctl start memsync)" in after.json()["protection"]["problems"]
    )
    doctor = cli("doctor", "--json", config=deployment.config)
    assert doctor.code == 3
    stopped = [r for r in doctor.json()["results"] if r["code"] == "protection"]
    assert stopped[0]["status"] == "error"
    assert "Litestream is not running" in stopped[0]["message"]


@pytest.mark.slow(reason="the daemon and Litestream's first shipments to moto's S3 server")
def test_an_s3_replica_gets_every_file_and_status_reads_it_from_the_bucket(
    make_deployment: Any, tmp_path: Path, cli: Any, bucket: str, s3_endpoint: str
) -> None:
    binary = litestream.ensure()
    deployment = make_deployment(
        extra_config=s3_section(s3_endpoint, bucket)
        + f'\n[protect]\nlitestream = "{binary}"\ns3 = true\n'
    )
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))  # AWS_* from the s3_endpoint fixture
    try:
        daemon.wait_event("litestream_started")
        report = poll(  # a generation's snapshot lands a moment before its first WAL segment
            "every file replicated to the bucket, WAL segments included",
            lambda: (
                (s := status(cli, deployment))["protected"]
                and all(f["position"] for f in s["files"])
                and s
            ),
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    prefix = f"s3://{bucket}/memsync/test/litestream/"
    assert [f["replica"] for f in report["files"]] == [
        prefix + "collection/mem0",
        prefix + "history.db",
    ]
    import boto3

    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
    for entry in report["files"]:
        key = entry["replica"].removeprefix(f"s3://{bucket}/")
        assert entry["position"] is not None
        generation, segment = entry["position"].split("/")
        assert f"{key}/generations/{generation}/wal/{segment}.wal.lz4" in keys


NEW_COLLECTION = """
import sys
from qdrant_client import QdrantClient, models
client = QdrantClient(path=sys.argv[1])
client.create_collection("extra", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE))
client.upsert("extra", [models.PointStruct(id=1, vector=[0.1, 0.2, 0.3, 0.4], payload={})])
client.close()
"""


@pytest.mark.slow(reason="the daemon, a collection created by qdrant-client, Litestream restarted")
def test_a_collection_created_later_is_protected_once_protect_runs_again(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        created = subprocess.run(  # the app's qdrant-client adds a collection, in rollback mode
            [sys.executable, "-c", NEW_COLLECTION, str(deployment.paths.qdrant)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert created.returncode == 0, created.stderr
        waiting = daemon.wait_event("protect_files_not_wal")
        again = cli("protect", "--json", config=deployment.config)
        daemon.wait_event("litestream_started", count=2)  # its configuration changed
        report = poll(
            "the new collection replicated",
            lambda: (s := status(cli, deployment))["protected"] and len(s["files"]) == 3 and s,
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    extra = deployment.paths.qdrant / "collection" / "extra" / "storage.sqlite"
    assert waiting[0]["paths"] == [str(extra)]
    assert again.code == 0, again.err
    assert again.json()["switched"] == [str(extra)]
    assert [f["label"] for f in report["files"]] == [
        "collection mem0",
        "collection extra",
        "history.db",
    ]
    assert report["files"][1]["replica"] == str(tmp_path / "replica" / "collection" / "extra")


@pytest.mark.slow(
    reason="the daemon and Litestream, a snapshot and a restore, a write through mem0"
)
def test_after_a_restore_litestream_follows_the_new_files_and_ships_their_writes(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    snapshot = cli("snapshot", "create", "--json", config=deployment.config)
    assert snapshot.code == 0, snapshot.err
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("both files replicated", lambda: status(cli, deployment)["protected"])
        chosen = snapshot.json()["id"]
        restored = cli("restore", chosen, "--force", "--json", config=deployment.config)
        assert restored.code == 0, restored.err
        if cli("protect", config=deployment.config).code != 0:  # the restored files' mode
            raise AssertionError("protect after the restore failed")
        gone = deployment.seeded.live[0]
        forgotten = cli("forget", gone, "--yes", "--no-snapshot", config=deployment.config)
        assert forgotten.code == 0, forgotten.err
        stopped = daemon.wait_event("litestream_stopped")
        poll(  # the new files' writes (the forget) reach the replica: nothing left unshipped
            "the restored files replicated with the forget's writes",
            lambda: (
                (s := status(cli, deployment))["protected"]
                and all(f["lag_s"] == 0 for f in s["files"])
            ),
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert stopped[0]["reason"] in ("a file was replaced", "configuration changed")


@pytest.mark.slow(reason="the daemon, Litestream killed once, a notification over HTTP")
def test_a_litestream_that_exits_is_told_to_notify_once(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    from tests.process.test_notify import TOKEN, Receiver

    receiver = Receiver()
    deployment = protected(make_deployment, tmp_path, f'\n[daemon]\nnotify = ["{receiver.url}"]\n')
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        pid = poll("Litestream recorded", lambda: litestream_pid(deployment))
        os.kill(pid, signal.SIGKILL)
        daemon.wait_event("litestream_started", count=2)
        daemon.wait_event("notify_sent")
    finally:
        code, err = stop(daemon)
        receiver.server.shutdown()
    assert code == 0, err
    [notice] = receiver.received
    assert notice["type"] == "failure"
    assert notice["title"].endswith(": Litestream exited")
    assert f"Litestream (pid {pid}) exited with status -9" in notice["message"]
    assert "starts it again in 1 s" in notice["message"]
    assert TOKEN not in err and TOKEN not in json.dumps(notice)


@pytest.mark.slow(reason="the daemon started twice, Litestream outliving the first one")
def test_a_daemon_started_after_a_killed_one_stops_its_orphan_litestream(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first = start(deployment.config, Notify(tmp_path / "a"))
    try:
        first.wait_event("litestream_started")
        orphan = poll("Litestream recorded", lambda: litestream_pid(deployment))
    finally:
        first.send_signal(signal.SIGKILL)
        first.process.wait(timeout=60)  # its stderr stays open: the orphan inherited it
    os.kill(orphan, 0)  # it outlived the daemon (no systemd here to stop its cgroup)
    second = start(deployment.config, Notify(tmp_path / "b"))
    try:
        stopped = second.wait_event("litestream_orphan_stopped")
        second.wait_event("litestream_started")
        replacement = poll(
            "a new Litestream recorded",
            lambda: (pid := litestream_pid(deployment)) != orphan and pid,
        )
    finally:
        code, err = stop(second)
    assert code == 0, err
    assert stopped[0]["pid"] == orphan and replacement != orphan
    assert not Path(f"/proc/{orphan}").exists() or "Z" in Path(f"/proc/{orphan}/stat").read_text()


@pytest.mark.slow(reason="the daemon, Litestream held by a process, then released by its death")
def test_a_hold_keeps_litestream_stopped_only_while_its_process_lives(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    hold = state_dir(deployment) / "protect-hold.json"
    hold.write_text(json.dumps({"pid": holder.pid, "why": "erasure"}))  # a memsync erasing
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        held = daemon.wait_event("litestream_held")
        assert json.loads((state_dir(deployment) / "protect-state.json").read_text())["pid"] is None
        holder.kill()  # memsync killed mid-erasure: its hold must not keep protection off
        holder.wait(timeout=30)
        daemon.wait_event("litestream_started")
        poll("both files replicated", lambda: status(cli, deployment)["protected"])
    finally:
        holder.kill()
        code, err = stop(daemon)
    assert code == 0, err
    assert held[0]["holder"] == holder.pid
    assert "litestream_started" not in err.split('"litestream_held"')[0]  # held from the start


@pytest.mark.slow(reason="the daemon starting Litestream, a [protect] edited under it")
def test_a_protect_directory_edited_under_a_running_daemon_is_a_problem_naming_the_restart(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    """The daemon wrote Litestream's configuration as it started; a [protect] directory edited
    since (a typo, a move) is not where the running Litestream ships: status says so."""
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("both files replicated", lambda: status(cli, deployment)["protected"])
        text = deployment.config.read_text()
        deployment.config.write_text(
            text.replace(str(tmp_path / "replica"), str(tmp_path / "replcia"))
        )
        edited = status(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert edited["protected"] is False and edited["running"] is True
    (stale,) = [p for p in edited["problems"] if "restart the daemon" in p]
    assert str(tmp_path / "replica" / "history.db") in stale or str(tmp_path / "replica") in stale


def test_doctor_before_litestream_ever_ran_says_nothing_is_replicated_yet(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    """Not "stopped", not "since its last shipment": nothing ever shipped."""
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    doctor = cli("doctor", "--json", config=deployment.config)
    (first, *_) = [r for r in doctor.json()["results"] if r["code"] == "protection"]
    assert first["status"] == "error"
    assert first["message"].startswith("nothing of this deployment has been replicated yet: ")
    assert "no memsync daemon is running" in first["message"]
    assert "last shipment" not in first["message"] and "stopped" not in first["fix"]
