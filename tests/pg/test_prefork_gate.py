"""The agent's write gate across a real prefork app server's processes (pgvector).

gunicorn with ``--preload`` builds the Memory and attaches the agent in the master, then forks
2 workers that write through that Memory (tests/helpers/prefork_app.py); uvicorn with
``--workers 2`` spawns 2 interpreters that each build a Memory and attach (the first serves the
socket, the second joins the gate). Every worker adds a memory every 10 ms and logs each
write's start and end. A pause through the agent must hold every worker: 0 writes start and end
inside it; a quiesced snapshot taken while they write restores to a clean check.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from memsync.stores.agent_client import AgentClient
from tests.conftest import error_findings
from tests.helpers.prefork import PreforkServer

HOLD_S = 1.0


def _deployment(make_deployment: Any, tmp_path: Path) -> tuple[Any, Path]:
    sock = tmp_path / "run" / "memsync-agent.sock"
    deployment = make_deployment(pg=True, extra_config=f'\n[app]\nagent_socket = "{sock}"\n')
    deployment.close()
    return deployment, sock


def _connect(sock: Path, timeout_s: float = 15.0) -> AgentClient:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return AgentClient.connect(sock, timeout_s=10.0)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _writes_inside_a_pause(server: PreforkServer, sock: Path) -> dict[int, int]:
    """Pause through the agent for ``HOLD_S``; per worker, the writes that ran inside it."""
    with _connect(sock) as client, client.paused(lease_s=10.0) as pause:
        paused_at = time.monotonic()
        assert set(server.writer_pids()) <= set(pause["covered"]), pause
        while time.monotonic() - paused_at < HOLD_S:  # the measured window, watched as it runs
            time.sleep(0.05)
        resumed_at = time.monotonic()
    assert pause["lease_ran_out"] is False, pause
    return {
        pid: sum(1 for start, end in server.writes(pid) if paused_at < start and end < resumed_at)
        for pid in server.writer_pids()
    }


def _writes_after(server: PreforkServer, pid: int, after: float, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(start > after for start, _ in server.writes(pid)):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("kind", ["gunicorn", "uvicorn"])
def test_a_pause_holds_every_worker_of_a_prefork_server(
    kind: str, make_deployment: Any, tmp_path: Path
) -> None:
    deployment, sock = _deployment(make_deployment, tmp_path)
    with PreforkServer(kind, deployment.paths.root, sock, tmp_path) as server:
        workers = server.wait_writing()
        with _connect(sock) as client:
            hello = client.hello
        covered = set(hello["gate"]["covered"])
        assert set(workers) <= covered, (workers, hello["gate"])
        if kind == "gunicorn":  # the master attached before the fork, and serves
            assert hello["pid"] not in workers and hello["pid"] in covered
        before = {pid: len(server.writes(pid)) for pid in workers}
        inside = _writes_inside_a_pause(server, sock)
        resumed = time.monotonic()
        assert all(_writes_after(server, pid, resumed) for pid in workers), server.log_text()
        assert server.errors() == []
    assert inside == dict.fromkeys(workers, 0), inside
    assert all(n > 0 for n in before.values()), before


@pytest.mark.parametrize("kind", ["gunicorn", "uvicorn"])
def test_a_quiesced_snapshot_of_prefork_workers_restores_to_a_clean_check(
    kind: str, make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, sock = _deployment(make_deployment, tmp_path)
    with PreforkServer(kind, deployment.paths.root, sock, tmp_path) as server:
        workers = server.wait_writing()
        created = cli("snapshot", "create", "--json", config=deployment.config)
        assert created.code == 0, created.err
        report = created.json()
        writing_after = time.monotonic()
        assert all(_writes_after(server, pid, writing_after) for pid in workers)
        assert server.errors() == []
    assert report["quiesced"] is True and report["not_quiesced"] is None, report
    assert report["check"]["errors"] == 0 and report["check"]["unsettled"] == []
    manifest = json.loads((Path(report["path"]) / "manifest.json").read_text())
    assert manifest["capture"]["quiesced"] is True and "not_quiesced" not in manifest["capture"]
    restored = cli("restore", report["id"], "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.err
    checked = cli("check", "--json", config=deployment.config)
    assert checked.code == 0 and error_findings(checked.json()) == {}, checked.out
