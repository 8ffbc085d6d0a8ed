"""memsync.agent inside a real app process: its writes, its gate, and the faults around it.

The app is a real Python process (tests/helpers/app.py) with one ``mem0.Memory`` open for its
whole life, writing and searching every 50 ms, with ``memsync.agent.attach(memory)``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from memsync import config as memsync_config
from memsync.errors import UnavailableError
from memsync.stores.agent_client import (
    AgentClient,
    AgentWriter,
    find_agent,
    require_same_deployment,
)
from memsync.stores.backends import vector_store_for
from tests.helpers.app import AppProcess


def _history_rows(history_db: Path) -> int:
    with sqlite3.connect(f"file:{history_db}?mode=ro", uri=True) as connection:
        return int(connection.execute("SELECT count(*) FROM history").fetchone()[0])


def _events(history_db: Path, memory_id: str) -> list[str]:
    with sqlite3.connect(f"file:{history_db}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT event FROM history WHERE memory_id = ? ORDER BY created_at, rowid",
            (memory_id,),
        ).fetchall()
    return [row[0] for row in rows]


def _wait_for_more_rows(history_db: Path, than: int, timeout_s: float) -> float:
    """Seconds until history.db has more rows than ``than`` (the app wrote again)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if _history_rows(history_db) > than:
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"the app wrote nothing for {timeout_s} s")


def _live(app: Any) -> list[str]:
    seeded = app.deployment.seeded
    return [m for m in seeded.live if m not in seeded.expired]


@pytest.fixture
def app_with_agent(deployment: Any, tmp_path: Path) -> Any:
    deployment.close()  # the app holds the store from now on
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock) as app:
        app.socket = sock
        app.deployment = deployment
        app.config = memsync_config.load(deployment.config, os.environ)
        yield app


def _raw(sock: Path, payload: bytes, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """Send raw bytes; return every reply line until the agent closes or goes quiet."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout_s)
    client.connect(str(sock))
    try:
        client.sendall(payload)
        client.shutdown(socket.SHUT_WR)
    except BrokenPipeError:
        pass  # the agent stopped reading an oversized request; its reply is still there
    data = b""
    while chunk := client.recv(65536):
        data += chunk
    client.close()
    return [json.loads(line) for line in data.splitlines()]


def test_deletes_through_the_app_reach_its_own_search_at_once(app_with_agent: Any) -> None:
    app = app_with_agent
    target = _live(app)[0]
    assert target in app.view()
    with find_agent(
        vector_store_for(app.config), app.config
    ) as client:  # discovered from the holder's listening socket
        writer = AgentWriter(client, vector_store_for(app.config), app.config)
        assert writer.delete(target) is True
        assert writer.delete(target) is False  # idempotent
        assert target not in app.view()  # the app's in-memory store, not only the files
    assert _events(app.deployment.paths.history_db, target)[-1] == "DELETE"
    stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] > 0


def test_hello_names_the_deployment_and_another_deployment_is_refused(
    app_with_agent: Any, make_deployment: Any
) -> None:
    app = app_with_agent
    with AgentClient.connect(app.socket) as client:
        assert client.hello["pid"] == app.pid
        assert client.hello["vector_store"]["path"] == str(app.config.qdrant_path.resolve())
        other = make_deployment(count=0, name="other")
        other.close()
        theirs = memsync_config.load(other.config, os.environ)
        with pytest.raises(UnavailableError, match="serves another deployment"):
            require_same_deployment(client, vector_store_for(theirs), theirs)
    assert stat.S_IMODE(os.stat(app.socket).st_mode) == 0o600
    app.stop()
    assert not app.socket.exists()  # removed at exit


def test_a_killed_memsync_never_leaves_the_app_paused(app_with_agent: Any) -> None:
    app = app_with_agent
    history_db = app.deployment.paths.history_db
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from memsync.stores.agent_client import AgentClient\n"
            f"c = AgentClient.connect(Path({str(app.socket)!r}))\n"
            "c.call('pause', lease_s=30)\n"
            "print('paused', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "paused"
    rows = _history_rows(history_db)
    time.sleep(0.5)  # the clock: app writes come every 50 ms; none may land while paused
    assert _history_rows(history_db) == rows
    holder.kill()  # SIGKILL: no resume is ever sent
    holder.wait()
    assert _wait_for_more_rows(history_db, rows, timeout_s=5.0) < 5.0
    assert app.stop()["failures"] == 0


def test_a_stalled_memsync_is_outlived_by_the_lease(app_with_agent: Any) -> None:
    app = app_with_agent
    history_db = app.deployment.paths.history_db
    with AgentClient.connect(app.socket) as client:
        client.call("pause", lease_s=1.0)  # connection stays open; memsync "hangs"
        rows = _history_rows(history_db)
        waited = _wait_for_more_rows(history_db, rows, timeout_s=10.0)
        assert 0.5 < waited < 5.0
    stats = app.stop()
    assert stats["failures"] == 0
    assert "pause lease ran out" in app.log_text()


def test_bad_requests_get_error_replies_and_the_app_keeps_serving(app_with_agent: Any) -> None:
    app = app_with_agent
    replies = _raw(
        app.socket,
        b"not json\n"
        + b'{"v": 1, "id": 2, "op": "rm_rf"}\n'
        + b'{"v": 9, "id": 3, "op": "hello"}\n'
        + b'{"v": 1, "id": 4, "op": "put_back", "args": {"point_id": "x", "vector": "no",'
        + b' "payload": {}}}\n'
        + b'{"v": 1, "id": 5, "op": "delete", "args": {"nope": 1}}\n'
        + b'{"v": 1, "id": 6, "op": "hello"}\n',
    )
    assert [r["ok"] for r in replies] == [False, False, False, False, False, True]
    assert {r["error"]["type"] for r in replies[:5]} == {"bad-request"}
    oversized = _raw(app.socket, b'{"v": 1, "op": "hello", "pad": "' + b"x" * 5_000_000)
    assert oversized[0]["ok"] is False and "bytes" in oversized[0]["error"]["message"]
    with AgentClient.connect(app.socket) as client:  # still serving
        assert client.call("get", memory_id=_live(app)[1]) is not None
    assert app.stop()["failures"] == 0


def test_a_peer_with_another_uid_is_refused(deployment: Any, tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to run a peer as another uid")
    deployment.close()
    run_dir = Path(tempfile.mkdtemp(prefix="memsync-agent-"))  # reachable by uid 65534
    os.chmod(run_dir, 0o755)
    sock = run_dir / "memsync-agent.sock"
    target = deployment.seeded.live[2]
    with AppProcess(deployment.paths.root, agent=sock) as app:
        os.chmod(sock, 0o666)  # an operator's mistake: the file mode no longer protects it
        peer = subprocess.run(
            [
                "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable,
                "-I",
                "-c",
                "import socket, sys\n"
                "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
                "try:\n"
                "    s.sendall(sys.argv[2].encode() + b'\\n')\n"
                "except BrokenPipeError:\n"
                "    pass  # refused at once: the reply is already there to read\n"
                "print(s.makefile().readline())",
                str(sock),
                json.dumps({"v": 1, "id": 1, "op": "delete", "args": {"memory_id": target}}),
            ],
            capture_output=True,
            text=True,
            user=65534,
            group=65534,
            extra_groups=[],
            timeout=30,
            cwd=run_dir,
        )
        reply = json.loads(peer.stdout or "null")
        assert reply and reply["ok"] is False, peer.stderr
        assert reply["error"]["type"] == "refused"
        assert target in app.view()  # nothing was deleted
        assert "refused peer" in app.log_text()
        assert app.stop()["failures"] == 0


def test_an_app_killed_mid_request_leaves_nothing_half_done(app_with_agent: Any) -> None:
    app = app_with_agent
    target = _live(app)[3]
    client = AgentClient.connect(app.socket)
    os.kill(app.pid, signal.SIGSTOP)  # the request reaches the socket, never the Memory
    try:
        client._socket.settimeout(2.0)
        with pytest.raises(UnavailableError, match="stopped answering|no valid reply"):
            client.call("delete", memory_id=target)
    finally:
        os.kill(app.pid, signal.SIGKILL)
        os.kill(app.pid, signal.SIGCONT)
        app.process.wait()
        client.close()
    assert "DELETE" not in _events(app.deployment.paths.history_db, target)
    with AppProcess(app.deployment.paths.root, agent=app.socket) as again:  # stale socket replaced
        assert target in again.view()
        with AgentClient.connect(app.socket) as retry:
            assert (
                AgentWriter(retry, vector_store_for(app.config), app.config).delete(target) is True
            )
        assert target not in again.view()
        assert again.stop()["failures"] == 0


def test_connections_are_served_side_by_side_and_only_the_pauser_resumes(
    app_with_agent: Any,
) -> None:
    app = app_with_agent
    history_db = app.deployment.paths.history_db
    with AgentClient.connect(app.socket) as pauser:
        pauser.call("pause", lease_s=30)
        rows = _history_rows(history_db)
        with AgentClient.connect(app.socket, timeout_s=5.0) as other:  # not stuck behind it
            assert other.call("get", memory_id=_live(app)[4]) is not None
        time.sleep(0.3)  # the clock: app writes come every 50 ms; none may land while paused
        assert _history_rows(history_db) == rows  # the other connection's close resumed nothing
        assert pauser.call("resume")["lease_ran_out"] is False
    _wait_for_more_rows(history_db, rows, timeout_s=5.0)
    assert app.stop()["failures"] == 0


def test_arguments_of_the_wrong_type_are_refused_not_coerced(app_with_agent: Any) -> None:
    app = app_with_agent
    target = _live(app)[5]
    replies = _raw(
        app.socket,
        b'{"v": 1, "id": 1, "op": "delete", "args": {"memory_id": ["' + target.encode() + b'"]}}\n'
        b'{"v": 1, "id": 2, "op": "pause", "args": {"lease_s": NaN}}\n'
        b'{"v": 1, "id": 3, "op": "pause", "args": {"lease_s": true}}\n'
        b'{"v": 1, "id": 4, "op": "update", "args": {"memory_id": "'
        + target.encode()
        + b'", "text": {"a": 1}}}\n'
        b'{"v": 1, "id": 5, "op": "hello"}\n',
    )
    assert [(r["id"], r["ok"]) for r in replies] == [
        (1, False), (2, False), (3, False), (4, False), (5, True),
    ]  # fmt: skip
    assert {r["error"]["type"] for r in replies[:4]} == {"bad-request"}
    assert replies[4]["result"]["paused"] is False
    assert target in app.view()
    assert app.stop()["failures"] == 0
