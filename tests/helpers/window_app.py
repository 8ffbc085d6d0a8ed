"""An app a maintenance window stops and starts: a real process holding one mem0 ``Memory``.

Usage (the argv lists of ``[app] stop_command`` / ``start_command`` in tests)::

    python tests/helpers/window_app.py start ROOT   # spawn the app detached; return once it holds the store
    python tests/helpers/window_app.py stop ROOT    # SIGTERM it (pidfile); return once it is gone
    python tests/helpers/window_app.py serve ROOT   # the app itself (start runs it)

Each takes ``--mem0-config FILE`` after ROOT: the app builds its Memory from that mem0 dict
(``memsync.demo.app --mem0-config``), as an app reading its config from a file does.

``ROOT`` is a ``memsync.demo.deployment.Paths`` root (hash embedder). The app is
``memsync.demo.app`` (no agent), writing and searching for its own user ``TRAFFIC_USER`` only.
``start`` is idempotent (a running app is left alone) and appends its pid to
``ROOT/app-starts.log``; ``stop`` appends to ``ROOT/app-stops.log``. The app writes
``ROOT/app.pid`` and prints ``ready PID`` to ``ROOT/app.log`` once its ``Memory`` holds the
store; on SIGTERM it finishes its current operation, closes it and exits 0.
With ``WINDOW_APP_FAIL_START=1`` in its environment, ``start`` exits 1 without starting; with
``WINDOW_APP_ADDS_ONLY=1`` the app it starts only adds memories (``--adds-only``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

DEADLINE_S = 30.0
REPOSITORY = Path(__file__).resolve().parents[2]
TRAFFIC_USER = "window-app-traffic"  # the app adds, updates and deletes only its own memories


def commands(root: Path, mem0_config: Path | None = None) -> str:
    """The ``[app]`` table of a memsync config whose window stops and starts this app."""
    script = str(Path(__file__).resolve())
    more = ["--mem0-config", str(mem0_config)] if mem0_config is not None else []
    stop = [sys.executable, script, "stop", str(root)]
    start = [sys.executable, script, "start", str(root), *more]
    return f"\n[app]\nstop_command = {json.dumps(stop)}\nstart_command = {json.dumps(start)}\n"


def pid_of(root: Path) -> int | None:
    """The running app's pid, or None."""
    try:
        pid = int((root / "app.pid").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if alive(pid) else None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def start(root: Path, more: Sequence[str] = ()) -> int:
    if os.environ.get("WINDOW_APP_FAIL_START") == "1":
        print("refusing to start (WINDOW_APP_FAIL_START=1)", file=sys.stderr)
        return 1
    if pid_of(root) is not None:
        return 0
    log = root / "app.log"
    log.write_text("")
    paths = [str(REPOSITORY), *filter(None, [os.environ.get("PYTHONPATH")])]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}  # this checkout's memsync
    with log.open("a") as output:
        app = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "serve", str(root), *more],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
            env=environ,
        )
    deadline = time.monotonic() + DEADLINE_S
    while not any(line.startswith("ready ") for line in log.read_text().splitlines()):
        if app.poll() is not None or time.monotonic() > deadline:
            print(f"app did not start: {log.read_text()[-500:]}", file=sys.stderr)
            return 1
        time.sleep(0.02)
    with (root / "app-starts.log").open("a") as starts:
        starts.write(f"{app.pid}\n")
    return 0


def stop(root: Path, more: Sequence[str] = ()) -> int:
    pid = pid_of(root)
    if pid is None:
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + DEADLINE_S
    while alive(pid):
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.02)
    with (root / "app-stops.log").open("a") as stops:
        stops.write(f"{pid}\n")
    return 0


def serve(root: Path, more: Sequence[str] = ()) -> int:
    """The app: ``memsync.demo.app`` (real traffic for a user of its own, no agent)."""
    if os.environ.get("WINDOW_APP_ADDS_ONLY") == "1":
        more = [*more, "--adds-only"]
    os.execv(  # noqa: S606 - the test's own interpreter
        sys.executable,
        [
            sys.executable, "-m", "memsync.demo.app", str(root), "--pidfile",
            str(root / "app.pid"), "--users", TRAFFIC_USER, *more,
        ],
    )  # fmt: skip


def main() -> int:
    action, root, more = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    return {"start": start, "stop": stop, "serve": serve}[action](root, more)


if __name__ == "__main__":
    sys.exit(main())
