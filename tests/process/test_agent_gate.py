"""The agent's write gate across an app's processes (embedded Qdrant, os.fork, no app server).

tests/helpers/fork_app.py attaches the agent and forks a child that attaches again (it joins
the gate, the parent keeps serving); the child makes one gated write each time the test asks.
The prefork servers (gunicorn, uvicorn) on pgvector are in tests/pg/test_prefork_gate.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memsync.stores.agent_client import AgentClient
from tests.helpers.app import AppProcess

REPO = Path(__file__).resolve().parents[2]


class Forked:
    """The fork_app parent and its child; ``write()`` asks the child for one gated write."""

    def __init__(self, root: Path, sock: Path, out: Path, hammer: int = 0) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.fork_app", str(root), str(sock), str(out)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "MEMSYNC_TEST_HAMMER": str(hammer)},
        )
        assert self.process.stdout is not None
        _, parent, child = self.process.stdout.readline().split()
        self.parent, self.child = int(parent), int(child)

    def joined(self, timeout_s: float = 10.0) -> dict[str, Any]:
        found = _poll(lambda: (self.out / "child.json").exists(), timeout_s)
        assert found, "the forked child did not attach"
        return dict(json.loads((self.out / "child.json").read_text()))

    def write(self) -> None:
        (self.out / "go").touch()

    def count(self, after: float = 0.0) -> int:
        """How many writes the hammering threads had completed, by a report made after ``after``
        (monotonic); -1 while there is none."""
        path = self.out / "count"
        count, at = path.read_text().split() if path.exists() else ("-1", "0")
        return int(count) if float(at) > after else -1

    def writes(self) -> list[tuple[float, float]]:
        log = self.out / "writes.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [(float(a), float(b)) for a, b in (line.split() for line in lines)]

    def close(self) -> None:
        for pid in (self.parent, self.child):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        self.process.wait(10)


def _poll(ready: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(0.01)
    return False


@contextmanager
def forked(deployment: Any, tmp_path: Path, hammer: int = 0) -> Iterator[tuple[Forked, Path]]:
    deployment.close()
    sock = tmp_path / "run" / "memsync-agent.sock"
    app = Forked(deployment.paths.root, sock, tmp_path / "fork", hammer)
    try:
        yield app, sock
    finally:
        app.close()


def test_a_child_forked_after_attach_joins_the_gate_and_a_pause_holds_its_writes(
    deployment: Any, tmp_path: Path
) -> None:
    with forked(deployment, tmp_path) as (app, sock):
        assert app.joined() == {"pid": app.child, "type": "GateMember"}
        app.write()
        assert _poll(lambda: len(app.writes()) == 1, 10.0), "the child's gated write never ran"
        with AgentClient.connect(sock) as client, client.paused(lease_s=10.0) as pause:
            assert client.hello["pid"] == app.parent
            assert {app.parent, app.child} <= set(client.hello["gate"]["covered"])
            assert {app.parent, app.child} <= set(pause["covered"])
            app.write()
            assert not _poll(lambda: len(app.writes()) == 2, 0.5), "a write ran inside the pause"
            resumed_at = time.monotonic()
        assert _poll(lambda: len(app.writes()) == 2, 10.0), "the held write never ran"
        started, ended = app.writes()[1]
    assert started < resumed_at < ended
    assert pause["lease_ran_out"] is False


def test_writers_whose_calls_always_overlap_do_not_starve_a_pause(
    deployment: Any, tmp_path: Path
) -> None:
    """4 threads in the child write back to back, so it always holds the gate shared.

    ``flock`` lets new shared holders pass a waiting exclusive one: without the turnstile the
    pause would wait for a moment with no write in flight, which never comes.
    """
    with forked(deployment, tmp_path, hammer=4) as (app, sock):
        app.joined()
        assert _poll(lambda: app.count() > 100, 10.0), "the hammering threads never wrote"
        with AgentClient.connect(sock) as client, client.paused(lease_s=10.0) as pause:
            paused_at = time.monotonic()
            assert _poll(lambda: app.count(paused_at) >= 0, 5.0)
            held_at = app.count(paused_at)  # every write completed before the pause
            assert not _poll(lambda: app.count() > held_at, 0.5), "writes ran inside the pause"
        resumed = app.count()
        assert _poll(lambda: app.count() > resumed, 10.0), "writes did not go on after resume"
    assert pause["waited_s"] < 1.0, pause
    assert pause["lease_ran_out"] is False


def test_the_lease_ends_a_stalled_pause_and_a_dead_pauser_frees_the_gate(
    deployment: Any, tmp_path: Path
) -> None:
    with forked(deployment, tmp_path) as (app, sock):
        app.joined()
        client = AgentClient.connect(sock)  # pauses, then stalls: never resumes, never closes
        paused_at = time.monotonic()
        client.call("pause", lease_s=0.5)
        app.write()
        assert _poll(lambda: len(app.writes()) == 1, 10.0), "the lease did not end the pause"
        assert app.writes()[0][1] - paused_at >= 0.5
        client.call("pause", lease_s=30.0)
        app.write()
        os.kill(app.parent, signal.SIGKILL)  # the pauser dies holding the gate
        assert _poll(lambda: len(app.writes()) == 2, 10.0), "a dead pauser kept the gate shut"
        client.close()
    assert app.writes()[1][1] - paused_at < 30.0


def test_a_process_writing_outside_the_gate_makes_the_capture_not_quiesced(
    deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment.close()
    sock = tmp_path / "run" / "memsync-agent.sock"
    history = deployment.paths.history_db
    script = (
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); "
        "c.execute('SELECT count(*) FROM history').fetchone(); print('ready', flush=True); "
        "time.sleep(60)"
    )
    with AppProcess(deployment.paths.root, agent=sock, interval=0.02) as app:
        other = subprocess.Popen(
            [sys.executable, "-c", script, str(history)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert other.stdout is not None and other.stdout.readline().strip() == "ready"
            created = cli("snapshot", "create", "--json", config=deployment.config)
            text = cli("snapshot", "create", config=deployment.config)
        finally:
            other.kill()
            other.wait()
        app.stop()
    assert created.code == 0, created.err
    report = created.json()
    assert report["quiesced"] is False and report["route"] == "agent"
    assert f"pid {other.pid} " in report["not_quiesced"]
    assert "outside the agent's write gate" in report["not_quiesced"]
    manifest = json.loads((Path(report["path"]) / "manifest.json").read_text())
    assert manifest["capture"]["quiesced"] is False
    assert manifest["capture"]["not_quiesced"] == report["not_quiesced"]
    assert text.code == 0 and f"; not quiesced: pid {other.pid} (" in text.out, text.out
