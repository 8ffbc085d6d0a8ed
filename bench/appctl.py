"""Start and stop the benchmark app as a service manager would (``[app] start/stop_command``).

Usage::

    python bench/appctl.py start ROOT [--agent SOCKET] [--interval 0.05]
    python bench/appctl.py stop ROOT

``start`` spawns ``app_process.py`` in its own session (it outlives this command, as a service
does), records its pid in ``ROOT/app.pid`` and returns once the app has built its Memory and
holds the store (``ROOT/records/ready-<pid>.json``), like ``systemctl start`` of a
``Type=notify`` unit; exit 1 when the app dies first or is not ready within 600 s.
``stop`` sends SIGTERM and returns once the process has exited (it writes its records first),
like ``systemctl stop``; exit 0 when no app runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
READY_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 120.0


def start(root: Path, agent: Path | None, interval: float) -> int:
    """Spawn the app detached; wait until it is ready. Returns an exit code."""
    argv = [sys.executable, str(HERE / "app_process.py"), str(root), "--interval", str(interval)]
    if agent is not None:
        argv += ["--agent", str(agent)]
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    (root / "records").mkdir(exist_ok=True)
    log = (root / "records" / "app.log").open("a", encoding="utf-8")
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=env,
        cwd=HERE.parent,
        start_new_session=True,
    )
    (root / "app.pid").write_text(f"{process.pid}\n")
    ready = root / "records" / f"ready-{process.pid}.json"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready.exists():
            return 0
        if process.poll() is not None:
            print(f"app exited {process.returncode} before ready; see {log.name}", file=sys.stderr)
            return 1
        time.sleep(0.05)
    print(f"app {process.pid} not ready after {READY_TIMEOUT_S} s", file=sys.stderr)
    return 1


def stop(root: Path) -> int:
    """SIGTERM the app of ``root/app.pid``; wait until it has exited. Returns an exit code."""
    pidfile = root / "app.pid"
    if not pidfile.exists():
        return 0
    pid = int(pidfile.read_text())
    try:
        process = psutil.Process(pid)
        os.kill(pid, signal.SIGTERM)
    except (psutil.NoSuchProcess, ProcessLookupError):
        pidfile.unlink()
        return 0
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    else:
        print(f"app {pid} still running {STOP_TIMEOUT_S} s after SIGTERM", file=sys.stderr)
        return 1
    pidfile.unlink()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("root", type=Path)
    parser.add_argument("--agent", type=Path, default=None)
    parser.add_argument("--interval", type=float, default=0.05)
    args = parser.parse_args()
    root = args.root.resolve()
    if args.action == "start":
        return start(root, args.agent, args.interval)
    return stop(root)


if __name__ == "__main__":
    raise SystemExit(main())
