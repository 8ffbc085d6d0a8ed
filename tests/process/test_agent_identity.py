"""Who may talk to the agent, and where it listens: groups, read-only peers, the socket's path.

Peers are real processes of other uids and groups; the apps are real (tests/helpers/app.py),
or the test's own mem0 ``Memory`` with ``attach`` when only the socket's path is at stake.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsync.agent import attach
from tests.helpers.app import AppProcess

PEER_UID = 12345
GROUP = 4242
READ_GROUP = 4243
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
PEER = (
    "import json, socket, sys\n"
    "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
    "replies = s.makefile('rb')\n"
    "for request in sys.argv[2:]:\n"
    "    try:\n"
    "        s.sendall(request.encode() + b'\\n')\n"
    "    except BrokenPipeError:\n"
    "        pass  # refused at once: the reply is already there to read\n"
    "    line = replies.readline()\n"
    "    print(line.decode().strip() or 'null', flush=True)\n"
    "    if not line: break\n"
)

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="peers of other uids need root")


def _sockets_of(pid: int) -> int:
    """How many sockets process ``pid`` has open (the agent's listener and connections)."""
    found = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            found += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
    return found


def _peer(sock: Path, *requests: dict[str, Any], groups: list[int]) -> list[Any]:
    """Send ``requests`` as uid 12345 (primary group 12345, supplementary ``groups``)."""
    done = subprocess.run(
        [PYTHON, "-I", "-c", PEER, str(sock), *(json.dumps(r) for r in requests)],
        capture_output=True, text=True, timeout=30, user=PEER_UID, group=PEER_UID,
        extra_groups=groups, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A directory uid 12345 can reach (pytest's tmp_path is root's, mode 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="memsync-identity-", dir="/tmp"))
    os.chmod(directory, 0o755)
    yield directory
    for path in sorted(directory.rglob("*"), reverse=True):
        path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
    directory.rmdir()


def test_a_supplementary_group_is_allowed_and_read_only_peers_only_read(
    deployment: Any, run_dir: Path
) -> None:
    deployment.close()
    sock = run_dir / "run" / "memsync-agent.sock"
    target = deployment.seeded.live[2]
    options = {"allow_gids": [GROUP]}
    hello = {"v": 1, "id": 1, "op": "hello"}
    get = {"v": 1, "id": "g", "op": "get", "args": {"memory_id": target}}
    delete = {"v": 1, "id": "d", "op": "delete", "args": {"memory_id": target}}
    with AppProcess(deployment.paths.root, agent=sock, agent_options=options) as app:
        assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o750
        assert os.stat(sock.parent).st_gid == GROUP
        assert (stat.S_IMODE(os.stat(sock).st_mode), os.stat(sock).st_gid) == (0o660, GROUP)
        # a member through a supplementary group (usermod -aG), not its primary one
        allowed = _peer(sock, hello, groups=[GROUP])
        assert allowed[0]["ok"] is True and allowed[0]["result"]["pid"] == app.pid
        assert app.stop()["failures"] == 0

    sock = run_dir / "run2" / "memsync-agent.sock"
    options = {"allow_gids": [GROUP], "allow_read_gids": [READ_GROUP]}
    with AppProcess(deployment.paths.root, agent=sock, agent_options=options) as app:
        assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o711  # reachable; creds decide
        reader = _peer(sock, hello, get, delete, groups=[READ_GROUP])
        assert [r["ok"] for r in reader] == [True, True, False]
        assert reader[2]["id"] == "d" and reader[2]["error"]["type"] == "refused"
        assert "read-only" in reader[2]["error"]["message"]

        (refused,) = _peer(sock, delete, groups=[])
        assert refused["error"]["type"] == "refused"
        assert refused["error"]["peer"] == {"uid": PEER_UID, "gids": [PEER_UID]}
        assert refused["error"]["allowed"]["gids"] == [GROUP]
        assert refused["error"]["allowed"]["read_gids"] == [READ_GROUP]
        assert f"uid {PEER_UID}" in refused["error"]["message"]
        assert target in app.view()  # nothing was deleted
        assert app.stop()["failures"] == 0


@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_directories_attach_creates_are_the_apps_alone_whatever_the_umask(
    deployment: Any, tmp_path: Path, umask: int
) -> None:
    sock = tmp_path / "a" / "b" / "memsync-agent.sock"
    previous = os.umask(umask)
    try:
        agent = attach(deployment.memory, sock)
    finally:
        os.umask(previous)
    try:
        assert agent.serving, agent.problem
        for directory in (sock.parent, sock.parent.parent):
            assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    finally:
        agent.close()
    assert not sock.exists()


def test_a_directory_others_may_write_is_refused_and_the_app_runs_on(
    deployment: Any, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # no sticky bit: anyone could put their own socket in its place
    agent = attach(deployment.memory, shared / "memsync-agent.sock")
    try:
        assert not agent.serving
        assert "without the sticky bit" in str(agent.problem)
        assert not (shared / "memsync-agent.sock").exists()
        deployment.memory.add("still writing", user_id="alice", infer=False)  # the app runs on
    finally:
        agent.close()


def test_a_stray_file_at_the_path_is_left_alone_and_the_app_runs_on(
    deployment: Any, tmp_path: Path
) -> None:
    stray = tmp_path / "memsync-agent.sock"
    stray.write_text("an operator's notes\n")
    agent = attach(deployment.memory, stray)
    try:
        assert not agent.serving
        assert "is not a socket" in str(agent.problem)
        assert stray.read_text() == "an operator's notes\n"
        deployment.memory.add("still writing", user_id="alice", infer=False)
    finally:
        agent.close()
    assert stray.read_text() == "an operator's notes\n"  # close never removes what is not ours


def test_another_users_live_socket_is_never_removed(deployment: Any, run_dir: Path) -> None:
    os.chmod(run_dir, 0o1777)  # a shared directory done right: sticky, as /tmp
    sock = run_dir / "memsync-agent.sock"
    listener = subprocess.Popen(
        [PYTHON, "-I", "-c",
         "import socket, sys, time\n"
         "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)\n"
         "print('listening', flush=True); time.sleep(60)\n",
         str(sock)],
        stdout=subprocess.PIPE, text=True, user=PEER_UID, group=PEER_UID, extra_groups=[],
    )  # fmt: skip
    try:
        assert listener.stdout is not None and listener.stdout.readline() == "listening\n"
        inode = os.stat(sock).st_ino
        agent = attach(deployment.memory, sock)
        try:
            assert not agent.serving
            assert "another live process serves" in str(agent.problem)
        finally:
            agent.close()
        assert os.stat(sock).st_ino == inode  # still theirs, still there
        probe = socket.socket(socket.AF_UNIX)
        probe.connect(str(sock))
        probe.close()
    finally:
        listener.kill()
        listener.wait()


def test_an_app_whose_socket_path_holds_a_stray_file_starts_and_doctor_says_why(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    stray = tmp_path / "run" / "memsync-agent.sock"
    deployment = make_deployment(extra_config=f'\n[app]\nagent_socket = "{stray}"\n')
    deployment.close()
    stray.parent.mkdir(mode=0o700)
    stray.write_text("an operator's notes\n")
    with AppProcess(deployment.paths.root, agent=stray) as app:  # it starts, serving nothing
        assert "serving nothing" in app.log_text() and "is not a socket" in app.log_text()
        doctor = cli("doctor", "--json", config=deployment.config)
        results = {r["code"]: r for r in doctor.json()["results"]}
        route = results["write-route"]
        assert route["status"] == "warning", route
        assert f"{stray} is not a socket" in route["message"], route
        assert "logger memsync.agent" in route["fix"]
        assert app.stop()["failures"] == 0
    assert stray.read_text() == "an operator's notes\n"


def test_a_directory_above_the_socket_that_others_may_write_is_refused(
    deployment: Any, tmp_path: Path
) -> None:
    above = tmp_path / "shared"
    (above / "run").mkdir(parents=True)
    os.chmod(above, 0o777)  # whoever may rename "run" may put another directory in its place
    os.chmod(above / "run", 0o700)
    agent = attach(deployment.memory, above / "run" / "memsync-agent.sock")
    try:
        assert not agent.serving
        assert f"{above} (mode 777) may be written by others" in str(agent.problem)
    finally:
        agent.close()


def test_other_uids_cannot_take_the_slots_kept_for_root_and_the_apps_user(
    deployment: Any, run_dir: Path
) -> None:
    deployment.close()
    sock = run_dir / "run" / "memsync-agent.sock"
    readers = [PEER_UID, PEER_UID + 1]
    holders = []
    with AppProcess(deployment.paths.root, agent=sock, quiet_writes=True,
                    agent_options={"allow_read_uids": readers}) as app:  # fmt: skip
        for uid in readers:  # each takes every slot it may: 4 connections per uid
            holders.append(subprocess.Popen(
                [PYTHON, "-I", "-c",
                 "import socket, sys, time\n"
                 "held = []\n"
                 "for _ in range(4):\n"
                 "    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); held.append(s)\n"
                 "print('holding', flush=True)\n"
                 "time.sleep(30)\n",
                 str(sock)],
                stdout=subprocess.PIPE, text=True, user=uid, group=uid, extra_groups=[],
                cwd="/",
            ))  # fmt: skip
        try:
            for holder in holders:
                assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
            deadline = time.monotonic() + 5  # the agent serves 6 of their 8 (2 kept), or all 8
            while _sockets_of(app.pid) < 1 + 6:
                assert time.monotonic() < deadline, _sockets_of(app.pid)
                time.sleep(0.02)
            from memsync.stores.agent_client import AgentClient

            with AgentClient.connect(sock, timeout_s=5.0) as client:  # root: a kept slot
                assert client.hello["pid"] == app.pid
        finally:
            for holder in holders:
                holder.kill()
                holder.wait()
        assert app.stop()["failures"] == 0
