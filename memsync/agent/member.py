"""A process of the app that joins the deployment's write gate while another process serves.

One socket per deployment: the first process to ``attach`` serves it (``server.Agent``); every
later one whose socket is already served by a process of the same deployment (history.db) joins
the gate only (``GateMember``): its Memory's writes pass the shared gate, so the serving process's
pauses hold them, and ``hello`` lists it among the covered pids.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from .gate import WriteGate, wrap_memory
from .protocol import PROTOCOL


def serving(path: Path, timeout_s: float = 5.0) -> tuple[str, int] | None:
    """``(history_db_path, pid)`` of the agent answering on ``path``; None when none answers."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout_s)
    try:
        probe.connect(str(path))
        probe.sendall(json.dumps({"v": PROTOCOL, "id": 0, "op": "hello", "args": {}}).encode())
        probe.sendall(b"\n")
        reply = json.loads(probe.makefile("rb").readline(1 << 20) or b"null")
        hello = reply.get("result") or {}
        return str(hello.get("history_db_path")), int(hello["pid"])
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    finally:
        probe.close()


class GateMember:
    """A process whose Memory's writes pass the deployment's gate; another process serves."""

    serving = False
    problem: str | None = None  # why it serves nothing when it should have (attach twice)

    def __init__(self, memory: Any, path: Path, gate: WriteGate, server_pid: int | None) -> None:
        self.memory = memory
        self.path = path
        self.gate = gate
        self.server_pid = server_pid
        self._pid = os.getpid()
        wrap_memory(memory, gate)

    def close(self) -> None:
        """Leave the gate (idempotent; nothing in a forked child)."""
        if self.gate.shared is not None and os.getpid() == self._pid:
            with contextlib.suppress(OSError):
                self.gate.shared.close()
