"""An app on a pgvector deployment that a maintenance window stops and starts (a real process).

Usage (``[app] stop_command`` / ``start_command`` argv lists in tests)::

    python tests/pgvector/pg_app.py start ROOT   # spawn it detached; return once its Memory is open
    python tests/pgvector/pg_app.py stop ROOT    # SIGTERM it; return once it is gone
    python tests/pgvector/pg_app.py serve ROOT   # the app itself: one mem0 Memory, history.db open

``ROOT`` is a ``memsync.demo.deployment.Paths`` root whose ``pg-url`` file names the database.
``start`` appends the pid to ``ROOT/app-starts.log``, ``stop`` to ``ROOT/app-stops.log``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DEADLINE_S = 60.0
REPOSITORY = Path(__file__).resolve().parents[2]


def commands(root: Path) -> str:
    """The ``[app]`` table of a memsync config whose window stops and starts this app."""
    script = str(Path(__file__).resolve())
    stop = [sys.executable, script, "stop", str(root)]
    start = [sys.executable, script, "start", str(root)]
    return f"\n[app]\nstop_command = {json.dumps(stop)}\nstart_command = {json.dumps(start)}\n"


def pid_of(root: Path) -> int | None:
    """The running app's pid, or None."""
    try:
        pid = int((root / "app.pid").read_text())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def start(root: Path) -> int:
    (root / "app.pid").unlink(missing_ok=True)
    environ = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    app = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "serve", str(root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env=environ,
    )  # fmt: skip
    deadline = time.monotonic() + DEADLINE_S
    while not (root / "app.pid").exists():
        if app.poll() is not None or time.monotonic() > deadline:
            return 1
        time.sleep(0.05)
    with (root / "app-starts.log").open("a") as log:
        log.write(f"{app.pid}\n")
    return 0


def stop(root: Path) -> int:
    pid = pid_of(root)
    if pid is None:
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + DEADLINE_S
    while pid_of(root) == pid and time.monotonic() < deadline:
        time.sleep(0.05)
    with (root / "app-stops.log").open("a") as log:
        log.write(f"{pid}\n")
    return 0 if pid_of(root) is None else 1


def serve(root: Path) -> int:
    from memsync.demo import deployment as build

    paths = build.Paths(root, pg_url=(root / "pg-url").read_text().strip())
    memory = build.open_memory(paths, embedder="memsync_hash")
    memory.get_all(filters={"user_id": "ana"})  # a real read, as an app serving would do
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    (root / "app.pid.tmp").write_text(str(os.getpid()))
    (root / "app.pid.tmp").rename(root / "app.pid")
    while not stopping:
        time.sleep(0.05)
    build.close_memory(memory)
    (root / "app.pid").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    action, where = sys.argv[1], Path(sys.argv[2])
    sys.exit({"start": start, "stop": stop, "serve": serve}[action](where))
