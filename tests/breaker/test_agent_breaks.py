"""Breaker findings on memsync.agent in a real app process: each test fails today."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from tests.helpers.app import AppProcess


def _ask(sock: Path, payload: bytes, timeout_s: float) -> bytes:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout_s)
    try:
        client.connect(str(sock))
        client.sendall(payload)
        return client.makefile("rb").readline()
    except OSError:
        return b""
    finally:
        client.close()


def test_one_deeply_nested_request_does_not_stop_the_agent(deployment: Any, tmp_path: Path) -> None:
    """A request line ``{"v":1,"id":[[[...]]]...}`` (100,000 levels, 200 KB: under the limit).

    Promise (agent-protocol.md): "No request can stop or crash the app"; a bad request gets a
    ``bad-request`` reply. Today json.loads raises RecursionError, the handler for it refers
    to ``op`` before assignment (UnboundLocalError), the serving thread dies ("stopped
    serving"), and the socket keeps accepting connections nobody answers: every later memsync
    write waits 30 s for ``hello`` and then queues (exit 5) until the app restarts.
    """
    deployment.close()
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock, quiet_writes=True):
        depth = 100_000
        hostile = b'{"v":1,"id":' + b"[" * depth + b"]" * depth + b',"op":"hello","args":{}}\n'
        _ask(sock, hostile, timeout_s=10.0)

        reply = _ask(sock, b'{"v":1,"id":1,"op":"hello","args":{}}\n', timeout_s=5.0)

    assert reply, "the agent stopped answering after one deeply nested request"
    assert json.loads(reply)["ok"] is True
