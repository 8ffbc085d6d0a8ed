"""restore on pgvector while the app runs memsync's agent: history.db swapped under the running app.

A real app process (memsync.demo.app, its own ``mem0.Memory``, the agent attached) adds a
memory every 20 ms through the whole restore. The agent pauses its writes, closes mem0's history
connection, memsync swaps the tables and history.db, the agent opens the new history.db, writes
go on: 0 failed app writes, /proc shows the app holding the new file, its later history rows
land there. A memsync SIGKILLed between the release and the reopen leaves the app with history
open again (the agent reopens when the connection closes) and the next command finishes or rolls
back the restore.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from tests.conftest import error_findings
from tests.helpers.app import AppProcess
from tests.pg.test_restore_pgvector import add_after_snapshot, ids, memsync, snapshot

APP_USERS = ("alice", "bob")
WRITE_S = 1.0


def held_inodes(pid: int) -> set[int]:
    """The inodes of every file process ``pid`` has open (/proc/PID/fd)."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.add(os.stat(f"/proc/{pid}/fd/{fd}").st_ino)
        except OSError:
            continue
    return found


def history_rows(path: Path) -> int:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(connection.execute("SELECT count(*) FROM history").fetchone()[0])
    finally:
        connection.close()


def added_in(path: Path, memory_ids: list[str]) -> set[str]:
    """Which of ``memory_ids`` have an ADD history row in the history.db at ``path``."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT memory_id FROM history WHERE event = 'ADD'").fetchall()
    finally:
        connection.close()
    return {row[0] for row in rows} & set(memory_ids)


def test_restore_under_a_writing_app_takes_the_agent_route(make_deployment, cli, tmp_path):
    socket = tmp_path / "run" / "memsync-agent.sock"
    deployment = make_deployment(pg=True)  # no [app] agent_socket: found on history.db's holder
    snapshot_id = snapshot(cli, deployment)
    newer = add_after_snapshot(deployment)
    history = deployment.paths.history_db
    with AppProcess(
        deployment.paths.root, agent=socket, interval=0.02, users=APP_USERS, adds_only=True
    ) as app:
        time.sleep(WRITE_S)
        old_inode = history.stat().st_ino
        assert old_inode in held_inodes(app.pid)
        dry = cli("restore", "--dry-run", "--json", snapshot_id, config=deployment.config)
        assert dry.code == 0 and dry.json()["route"] == "agent", dry.err
        result = cli("restore", "--force", "--json", snapshot_id, config=deployment.config)
        assert result.code == 0, result.err
        report = result.json()
        assert report["route"] == "agent"
        assert report["check_after"]["errors"] == 0
        aside = Path(f"{history}.pre-restore-{snapshot_id}")
        assert aside.stat().st_ino == old_inode  # the app's old file, moved aside
        held = held_inodes(app.pid)
        assert history.stat().st_ino in held and old_inode not in held
        view = app.view()
        assert set(deployment.seeded.live) <= view and not set(newer) & view
        rows_after_swap, aside_rows = history_rows(history), history_rows(aside)
        time.sleep(WRITE_S)
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] >= 20, stats
    assert history_rows(history) > rows_after_swap  # the app writes the restored history.db
    assert history_rows(aside) == aside_rows
    later = [m for m in stats["added"] if m in ids(deployment.paths.pg_url, "mem0")]
    assert later and added_in(history, later) == set(later)
    assert "history connection reopened" in app.log_text()
    check = cli("check", "--json", config=deployment.config)
    assert check.code == 0 and check.json()["counts"]["errors"] == 0, error_findings(check.json())
    memory = deployment.reopen()
    kept = deployment.seeded.live[0]
    text = memory.get(kept)["memory"]
    hits = memory.search(text, filters={"user_id": memory.get(kept)["user_id"]}, top_k=5)
    assert kept in {hit["id"] for hit in hits["results"]}


KILLS = {  # killed between history_release and history_reopen -> what the next command does
    "memsync.stores.pgvector.load:swap": "rolled back",  # history released, nothing swapped
    "memsync.restore.pgvector:_swap_history": "finished",  # tables swapped, history.db not
}


def test_sigkill_between_release_and_reopen_leaves_the_app_its_history(
    make_deployment, cli, tmp_path
):
    socket = tmp_path / "run" / "memsync-agent.sock"
    deployment = make_deployment(pg=True, extra_config=f'\n[app]\nagent_socket = "{socket}"\n')
    snapshot_id = snapshot(cli, deployment)
    add_after_snapshot(deployment)
    history, journal = deployment.paths.history_db, deployment.paths.state / "restore-journal.json"
    with AppProcess(
        deployment.paths.root, agent=socket, interval=0.02, users=APP_USERS, adds_only=True
    ) as app:
        time.sleep(WRITE_S)
        for step, outcome in KILLS.items():
            killed = memsync(deployment, "restore", "--force", snapshot_id, kill_at=step)
            assert killed.returncode == -9, (step, killed.stderr)
            assert journal.is_file(), step
            deadline = time.monotonic() + 10
            while history.stat().st_ino not in held_inodes(app.pid):
                assert time.monotonic() < deadline, f"{step}: the app did not reopen history.db"
                time.sleep(0.05)
            rows = history_rows(history)
            time.sleep(WRITE_S)
            assert history_rows(history) > rows, step  # the app writes history again
            resumed = memsync(deployment, "restore", "--resume", "--json")
            assert resumed.returncode == 0, (step, resumed.stderr)
            assert json.loads(resumed.stdout)["recovered"].startswith(outcome), step
            assert not journal.exists(), step
            assert history.stat().st_ino in held_inodes(app.pid), step
        rows = history_rows(history)
        time.sleep(WRITE_S)
        assert history_rows(history) > rows
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert "history reopened because the connection" in app.log_text()
    check = cli("check", "--json", config=deployment.config)
    assert check.code == 0 and check.json()["counts"]["errors"] == 0, error_findings(check.json())


def history_fds(path: Path) -> set[str]:
    """This process's descriptors on history.db, its -wal or -shm."""
    names = {str(path), f"{path}-wal", f"{path}-shm", f"{path}-journal"}
    return {
        target
        for fd in os.listdir("/proc/self/fd")
        if (target := os.path.realpath(f"/proc/self/fd/{fd}")) in names
    }


def test_history_release_closes_mem0s_connection_and_history_calls_wait(pg_deployment, tmp_path):
    import threading

    from memsync.agent import attach
    from memsync.stores.agent_client import AgentClient, AgentError

    memory, history = pg_deployment.memory, pg_deployment.paths.history_db.resolve()
    memory.db.connection.execute("PRAGMA journal_mode=wal")
    memory_id = pg_deployment.seeded.live[0]
    agent = attach(memory, tmp_path / "memsync-agent.sock")
    try:
        with AgentClient.connect(agent.path) as client:
            try:
                client.call("history_release")
                raise AssertionError("history_release without a pause was accepted")
            except AgentError as error:
                assert error.kind == "bad-request"
            client.call("pause", lease_s=30)
            released = client.call("history_release")
            assert released == {"released": True, "path": str(history), "journal_mode": "wal"}
            assert history_fds(history) == set()  # checkpointed, -wal and -shm closed
            assert not Path(f"{history}-wal").exists()
            answers: list[Any] = []
            waiting = threading.Thread(target=lambda: answers.append(memory.history(memory_id)))
            waiting.start()
            time.sleep(0.5)
            assert waiting.is_alive() and not answers  # waits on mem0's history lock
            text = memory.get(memory_id)["memory"]
            filters = {"user_id": memory.get(memory_id)["user_id"]}
            assert memory.search(text, filters=filters, top_k=3)["results"]  # reads go on
            reopened = client.call("history_reopen")
            assert reopened["reopened"] and reopened["journal_mode"] == "wal"
            waiting.join(timeout=10)
            assert answers and answers[0][0]["memory_id"] == memory_id
            assert client.call("resume")["lease_ran_out"] is False
            assert str(history) in history_fds(history)
            mode = memory.db.connection.execute("PRAGMA journal_mode").fetchone()[0]
            assert mode == "wal"
        with AgentClient.connect(agent.path) as killed:  # memsync dies after the release
            killed.call("pause", lease_s=30)
            killed.call("history_release")
        deadline = time.monotonic() + 5
        while memory.db.connection is None:
            assert time.monotonic() < deadline, "the agent did not reopen history"
            time.sleep(0.05)
        assert memory.history(memory_id)
        assert memory.add("after the reopen", user_id="ana", infer=False)["results"]
    finally:
        agent.close()
