"""Who answers on the agent socket, and who the agent lets in, as memsync sees it (issue 23).

memsync checks the process answering (``SO_PEERCRED``) before it sends anything, and a refusal
by the app's agent is an error naming the fix (exit 11), never a silent fallback to the queue.
Real processes: the app (``AppProcess``, root), a forged server and memsync as uid 65534.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsync.demo import deployment as build
from memsync.stores.agent_client import AgentClient, AgentRefusedError
from tests.conftest import HASH
from tests.helpers.app import AppProcess

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

# A process of another user that took the socket's path: it answers hello at once (with the
# real app's pid and this deployment's paths) and counts every byte memsync sends it.
FORGED_SERVER = r"""
import json, os, socket, sys
path, hello = sys.argv[1], json.loads(sys.argv[2])
try:
    os.unlink(path)  # the app's socket, in a directory others can write
except FileNotFoundError:
    pass
server = socket.socket(socket.AF_UNIX)
server.bind(path)
os.chmod(path, 0o666)
server.listen(1)
server.settimeout(30)
print("listening", flush=True)
connection, _ = server.accept()
connection.settimeout(30)
received = b""
try:
    connection.sendall(json.dumps({"v": 1, "id": 1, "ok": True, "result": hello}).encode() + b"\n")
    while chunk := connection.recv(65536):
        received += chunk
        for _ in range(chunk.count(b"\n")):  # a fake erasure: every request "succeeds"
            connection.sendall(b'{"v": 1, "id": null, "ok": true, "result": {"deleted": true}}\n')
except OSError as error:  # memsync hung up
    print(type(error).__name__, file=sys.stderr)
print(json.dumps({"received": received.decode(errors="replace")}), flush=True)
"""

# A forwarding proxy of the store's own user: it passes the uid check, and hello (the app's,
# forwarded) names another pid than the process answering. It logs every byte memsync sends.
PROXY = r"""
import json, os, socket, sys, threading
listen_path, upstream_path = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX)
server.bind(listen_path)
server.listen(1)
server.settimeout(30)
print("listening", flush=True)
client, _ = server.accept()
upstream = socket.socket(socket.AF_UNIX)
upstream.connect(upstream_path)
def back():
    try:
        while data := upstream.recv(65536):
            client.sendall(data)
    except OSError:
        pass
threading.Thread(target=back, daemon=True).start()
sent = b""
try:
    while data := client.recv(65536):
        sent += data
        upstream.sendall(data)
except OSError:
    pass
print(json.dumps({"sent": sent.decode(errors="replace")}), flush=True)
"""


@pytest.fixture
def shared_deployment() -> Iterator[build.Paths]:
    """A seeded deployment (root's) in a directory uid 65534 can reach, its Memory closed."""
    if os.getuid() != 0:
        pytest.skip("needs root to run a process as another uid")
    root = Path(tempfile.mkdtemp(prefix="memsync-trust-"))
    os.chmod(root, 0o755)
    paths = build.Paths(root / "dep")
    run = root / "run"  # the app's socket directory: everyone's, sticky (as /tmp)
    run.mkdir()
    os.chmod(run, 0o1777)
    build.write_memsync_config(
        paths,
        embedder=HASH,
        extra=f'\n[app]\nagent_socket = "{run / "memsync-agent.sock"}"\n',
        in_flight_margin_s=0.5,
    )
    memory = build.open_memory(paths, embedder=HASH)
    try:
        build.seed(memory, 10, batch=5)
    finally:
        build.close_memory(memory)
    try:
        yield paths
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _socket(paths: build.Paths) -> Path:
    return paths.root.parent / "run" / "memsync-agent.sock"


def _memsync_as_nobody(paths: build.Paths, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run memsync's real CLI as uid 65534 (no supplementary groups).

    With the distribution's Python 3.11 and this environment's site-packages: the venv's own
    interpreter may live where uid 65534 cannot reach (pyenv under /root).
    """
    boot = (
        f"import site, sys; site.addsitedir({sysconfig.get_paths()['purelib']!r}); "
        "from memsync.cli import main; raise SystemExit(main(sys.argv[1:]))"
    )
    return subprocess.run(
        [SYSTEM_PYTHON, "-I", "-c", boot, *argv, "--config", str(paths.config)],
        capture_output=True,
        text=True,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        timeout=60,
        cwd="/",
        env={**os.environ, "MEM0_DIR": str(paths.mem0_dir), "HOME": "/"},
    )


def _live_id(paths: build.Paths, app: AppProcess) -> str:
    return sorted(app.view())[0]


def test_a_forged_server_on_the_socket_gets_nothing_and_is_named(
    shared_deployment: build.Paths, cli: Any
) -> None:
    paths = shared_deployment
    sock = _socket(paths)
    with AppProcess(paths.root, agent=sock, quiet_writes=True) as app:
        target = _live_id(paths, app)
        # the mistake, made after the app started (attach refuses such a directory): writable
        # by everyone without the sticky bit, so another user can replace the app's socket
        os.chmod(sock.parent, 0o777)
        hello = {
            "protocol": 1, "pid": app.pid, "uid": 0,
            "vector_store": {"provider": "qdrant", "path": str(paths.qdrant.resolve()),
                             "collection": "mem0"},
            "history_db_path": str(paths.history_db.resolve()), "paused": False,
        }  # fmt: skip
        forged = subprocess.Popen(
            [SYSTEM_PYTHON, "-I", "-c", FORGED_SERVER, str(sock), json.dumps(hello)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            cwd="/",
        )
        try:
            assert forged.stdout is not None
            assert forged.stdout.readline().strip() == "listening", forged.stderr
            result = cli("forget", target, "--yes", "--no-snapshot", config=paths.config)
            out, err = forged.communicate(timeout=30)
        finally:
            if forged.poll() is None:
                forged.kill()
                forged.communicate(timeout=10)
        assert out, (err, result)
        assert json.loads(out)["received"] == "", err  # not even hello: no memory text
        assert result.code == 11, result.err
        message = result.err.strip()
        assert len(message.splitlines()) == 1
        assert f"the process answering on {sock} is pid {forged.pid} uid 65534" in message
        assert "(user nobody)" in message
        assert "this deployment's store belongs to uid 0 (user root: owns " in message
        assert f"runs pid {app.pid}, the store's holder" in message
        assert "memsync sent it nothing" in message
        assert target in app.view()  # the app never heard of it
        assert app.stop()["failures"] == 0


def test_a_refused_memsync_exits_11_naming_its_uid_and_the_fix_never_queues(
    shared_deployment: build.Paths,
) -> None:
    paths = shared_deployment
    sock = _socket(paths)
    paths.state.mkdir(parents=True, exist_ok=True)
    (paths.root / "snapshots").mkdir(exist_ok=True)
    for own in (paths.state, paths.root / "snapshots"):  # memsync's own directories: its user's
        os.chown(own, NOBODY, NOBODY)
    with AppProcess(paths.root, agent=sock, quiet_writes=True) as app:
        target = _live_id(paths, app)

        # the socket's directory is closed to memsync: not "no agent" either
        sock.parent.chmod(0o700)
        closed = _memsync_as_nobody(paths, "forget", target, "--yes", "--no-snapshot")
        sock.parent.chmod(0o1777)
        assert closed.returncode == 11, (closed.stdout, closed.stderr)
        assert f"{sock.parent} cannot be entered (permission denied)" in closed.stderr
        assert "allow_gids=[65534]" in closed.stderr

        # the socket's mode (0600, the app's user) lets memsync not even connect
        denied = _memsync_as_nobody(paths, "forget", target, "--yes", "--no-snapshot")
        assert denied.returncode == 11, (denied.stdout, denied.stderr)
        assert f"the memsync agent at {sock} refused memsync (uid 65534 (nobody)" in denied.stderr
        assert "the socket is uid 0 (root), gid 0 (root), mode 0600" in denied.stderr
        assert "allow_gids=[65534]" in denied.stderr
        assert "run memsync as uid 0 (root)" in denied.stderr

        # the mode lets it connect: the agent's own peer check refuses, and says why
        os.chmod(sock, 0o666)
        refused = _memsync_as_nobody(paths, "forget", target, "--yes", "--no-snapshot")
        assert refused.returncode == 11, (refused.stdout, refused.stderr)
        line = refused.stderr.strip()
        assert len(line.splitlines()) == 1
        assert f"agent at {sock} refused memsync (uid 65534 (nobody), groups [gid 65534" in line
        assert "it allows uids [0] and gids []" in line
        assert "allow_gids=[65534]" in line
        assert "queued" not in refused.stdout + line
        assert not (paths.state / "pending.json").exists()

        snapshot = _memsync_as_nobody(paths, "snapshot", "create")  # not an unquiesced one
        assert snapshot.returncode == 11, (snapshot.stdout, snapshot.stderr)
        assert f"agent at {sock} refused memsync (uid 65534 (nobody)" in snapshot.stderr
        assert not list((paths.root / "snapshots").glob("*/manifest.json"))

        doctor = _memsync_as_nobody(paths, "doctor", "--json")
        results = {r["code"]: r for r in json.loads(doctor.stdout)["results"]}
        assert doctor.returncode == 3
        assert results["agent-refused"]["status"] == "error"
        assert "refused memsync (uid 65534 (nobody)" in results["agent-refused"]["message"]
        assert "allow_gids=[65534]" in results["agent-refused"]["fix"]
        assert "write-route" not in results

        assert target in app.view()
        refusals = [line for line in app.log_text().splitlines() if "refused peer pid" in line]
        assert refusals and all("uid 65534 groups [65534]" in line for line in refusals)
        assert app.stop()["failures"] == 0


def test_a_proxy_whose_hello_names_another_pid_is_refused(
    shared_deployment: build.Paths, cli: Any
) -> None:
    paths = shared_deployment
    sock = _socket(paths)
    app_sock = sock.with_name("app-agent.sock")
    with AppProcess(paths.root, agent=app_sock, quiet_writes=True) as app:
        target = _live_id(paths, app)
        proxy = subprocess.Popen(
            [SYSTEM_PYTHON, "-I", "-c", PROXY, str(sock), str(app_sock)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proxy.stdout is not None
            assert proxy.stdout.readline().strip() == "listening", proxy.stderr
            result = cli("forget", target, "--yes", "--no-snapshot", config=paths.config)
            out, err = proxy.communicate(timeout=30)
        finally:
            if proxy.poll() is None:
                proxy.kill()
                proxy.communicate(timeout=10)
        sent = [json.loads(line) for line in json.loads(out)["sent"].splitlines()]
        assert [request["op"] for request in sent] == ["hello"], err
        assert result.code == 11, result.err
        assert (
            f"the process answering on {sock} is pid {proxy.pid} uid 0 (user root), but its "
            f"hello claims pid {app.pid}"
        ) in result.err
        assert target in app.view()
        assert app.stop()["failures"] == 0


# An agent that refuses at once and closes before memsync says anything.
REFUSING = r"""
import json, socket, sys
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen(1)
server.settimeout(30)
print("listening", flush=True)
connection, _ = server.accept()
problem = {"type": "refused", "message": "uid 0 (groups [0]) is not allowed by this agent",
           "peer": {"uid": 0, "gids": [0]}, "allowed": {"uids": [999], "gids": [7]}}
connection.sendall(json.dumps({"v": 1, "id": None, "ok": False, "error": problem}).encode() + b"\n")
connection.close()
print("closed", flush=True)
"""


def test_a_refusal_sent_before_hello_is_read_after_the_broken_pipe(tmp_path: Path) -> None:
    path = tmp_path / "memsync-agent.sock"
    server = subprocess.Popen(
        [SYSTEM_PYTHON, "-I", "-c", REFUSING, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "listening"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(str(path))
        assert server.stdout.readline().strip() == "closed"  # hello will meet a broken pipe
        with pytest.raises(AgentRefusedError) as refused:
            AgentClient(path, sock)
    finally:
        server.communicate(timeout=10)
    assert refused.value.exit_code == 11
    assert f"agent at {path} refused memsync (uid 0 (root)" in refused.value.message
    assert refused.value.message.endswith(": it allows uids [999] and gids [7]")
    assert "allow_gids=[0]" in (refused.value.hint or "")


def test_memsync_as_another_user_is_told_to_name_the_socket_it_cannot_see(
    shared_deployment: build.Paths,
) -> None:
    paths = shared_deployment
    sock = _socket(paths)
    text = paths.config.read_text()
    paths.config.write_text(text.replace(f'agent_socket = "{sock}"', ""))  # found by /proc only
    with AppProcess(paths.root, agent=sock, quiet_writes=True) as app:
        doctor = _memsync_as_nobody(paths, "doctor", "--json")
        results = {r["code"]: r for r in json.loads(doctor.stdout)["results"]}
        route = results["write-route"]
        assert "memsync (uid 65534) cannot see which sockets" in route["message"], route
        assert "set [app] agent_socket" in route["message"]
        assert app.stop()["failures"] == 0
