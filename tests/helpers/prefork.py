"""A real prefork app server for the tests and the bench: gunicorn or uvicorn, from PyPI.

``PreforkServer("gunicorn", root, socket, tmp)`` runs ``tests.helpers.prefork_app`` under
gunicorn (``--preload``, sync workers) or uvicorn (``--workers``, spawned), listening on a Unix
socket under ``tmp``; every worker writes through mem0 in a loop and logs each write
(``writes``). SIGTERM stops it (``stop``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


class PreforkServer:
    """One prefork app server process tree; use as a context manager."""

    def __init__(
        self,
        kind: str,
        root: Path,
        socket: Path,
        tmp: Path,
        *,
        workers: int = 2,
        attach: bool = True,
        interval_s: float = 0.01,
    ) -> None:
        self.kind = kind
        self.workers = workers
        self.logs = tmp / f"{kind}-writes"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.output = tmp / f"{kind}.log"
        env = {
            **os.environ,
            "MEMSYNC_TEST_ROOT": str(root),
            "MEMSYNC_AGENT_SOCKET": str(socket),
            "MEMSYNC_TEST_WRITES": str(self.logs),
            "MEMSYNC_TEST_INTERVAL": str(interval_s),
            "MEMSYNC_TEST_ATTACH": "1" if attach else "0",
            "MEM0_TELEMETRY": "False",
            "PYTHONPATH": str(REPO),
        }
        http = tmp / f"{kind}-http.sock"
        if kind == "gunicorn":
            command = [str(BIN / "gunicorn"), "--preload", "--workers", str(workers),
                       "--bind", f"unix:{http}", "--chdir", str(REPO),
                       "tests.helpers.prefork_app:wsgi"]  # fmt: skip
        else:
            command = [str(BIN / "uvicorn"), "--workers", str(workers), "--uds", str(http),
                       "--lifespan", "on", "--app-dir", str(REPO),
                       "tests.helpers.prefork_app:asgi"]  # fmt: skip
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def __enter__(self) -> PreforkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_writing(self, timeout_s: float = 15.0) -> list[int]:
        """The worker pids, once every worker has written at least once."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pids = self.writer_pids()
            if len(pids) >= self.workers and all(self.writes(p) for p in pids):
                return pids
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{self.kind} workers did not all write: {self.log_text()[-2000:]}")

    def writer_pids(self) -> list[int]:
        return sorted(int(p.stem.split("-")[1]) for p in self.logs.glob("writes-*.log"))

    def writes(self, pid: int) -> list[tuple[float, float]]:
        """``(start, end)`` (monotonic) of each write worker ``pid`` completed."""
        lines = (self.logs / f"writes-{pid}.log").read_text().splitlines()
        return [(float(a), float(b)) for a, b in (line.split() for line in lines if line[0] != "e")]

    def errors(self) -> list[str]:
        return [
            line
            for path in self.logs.glob("writes-*.log")
            for line in path.read_text().splitlines()
            if line.startswith("error")
        ]

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM the server (its workers finish their request and exit); wait."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
