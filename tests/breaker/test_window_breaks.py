"""Breaker findings on the maintenance window with a real app: each test fails today.

The app is tests/helpers/window_app.py (a real process holding one mem0 ``Memory``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memsync.state import WINDOW_FILE
from tests.helpers import window_app

ROOT = Path(__file__).resolve().parents[2]
WINDOW_APP = str(ROOT / "tests" / "helpers" / "window_app.py")


def _an_id(cli: Any, config: Path) -> str:
    for user in ("alice", "bob", "chandra", "dmitri", "eun-ji"):
        found = cli("forget", "--user", user, "--dry-run", "--json", config=config)
        if found.json()["targets"]:
            return str(found.json()["targets"][0])
    raise AssertionError("no seeded memory with a point")


def test_a_stop_command_killed_at_the_timeout_does_not_stop_the_app_afterwards(
    make_deployment: Any, cli: Any, tmp_path: Path
) -> None:
    """stop_command is a wrapper whose real stop runs in a child (4 s); max_downtime_s = 2.

    Promise (window.py run_command): a command that times out is killed, "never left running
    behind memsync (a stop racing the start)", and the app is started again. Today only the
    wrapper is killed; its child stops the app 2 s after memsync "restarted" it: the app is
    down, no window.json marks it, doctor is healthy.
    """
    deployment = make_deployment(count=20)
    memory_id = _an_id(cli, deployment.config)
    deployment.close()
    root = deployment.paths.root
    slow_stop = tmp_path / "slow_stop.py"  # the real stop: a child of the wrapper, 4 s
    slow_stop.write_text(
        "import subprocess, sys, time\n"
        "time.sleep(4)\n"
        f"subprocess.run([sys.executable, {WINDOW_APP!r}, 'stop', {str(root)!r}])\n"
    )
    wrapper = tmp_path / "stop_wrapper.py"  # what stop_command runs: waits for its child
    wrapper.write_text(
        f"import subprocess, sys\nsubprocess.run([sys.executable, {str(slow_stop)!r}])\n"
    )
    stop = [sys.executable, str(wrapper)]
    start = [sys.executable, WINDOW_APP, "start", str(root)]
    deployment.config.write_text(
        deployment.config.read_text()
        + f"\n[app]\nstop_command = {json.dumps(stop)}\nstart_command = {json.dumps(start)}\n"
        + "max_downtime_s = 2\n"
    )
    assert window_app.start(root) == 0
    try:
        app = window_app.pid_of(root)
        result = cli("forget", memory_id, "--yes", "--no-snapshot", config=deployment.config)
        assert result.code == 12, result.err
        time.sleep(5)  # the stop's child finishes 4 s after it started

        assert window_app.pid_of(root) == app, (
            "the app was stopped after memsync's window closed (stop_command's child outlived "
            "the kill); nothing marks it: window.json "
            f"{'exists' if (deployment.paths.state / WINDOW_FILE).exists() else 'is absent'}"
        )
    finally:
        window_app.stop(root)


def test_pending_apply_with_an_empty_queue_closes_a_window_left_open(
    make_deployment: Any, cli: Any
) -> None:
    """memsync SIGKILLed inside a window (app stopped); then ``memsync pending apply``.

    Promise (pending.md, Routes): "if memsync is killed inside one (SIGKILL), the next write
    runs start_command first". Today ``pending apply`` (and ``job apply-pending``) with an
    empty queue returns at once: the app stays down and window.json stays.
    """
    deployment = make_deployment(count=20)
    memory_id = _an_id(cli, deployment.config)
    deployment.close()
    root = deployment.paths.root
    deployment.config.write_text(deployment.config.read_text() + window_app.commands(root))
    assert window_app.start(root) == 0
    try:
        killed = subprocess.run(
            [sys.executable, "-m", "tests.breaker.killat", "memsync.routes.window:_wait_until_free",
             "--", "forget", memory_id, "--yes", "--no-snapshot", "--config",
             str(deployment.config)],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert killed.returncode == -9, killed.stderr[-2000:]
        assert window_app.pid_of(root) is None  # stopped by the window, not started again

        applied = cli("pending", "apply", "--json", config=deployment.config)

        assert applied.code == 0, applied.err
        assert window_app.pid_of(root) is not None, (
            "pending apply left the app down; window.json "
            f"{'still there' if (deployment.paths.state / WINDOW_FILE).exists() else 'gone'}"
        )
    finally:
        window_app.stop(root)


def test_status_and_the_textfile_say_when_a_window_was_left_open(deployment, cli, tmp_path):
    """A memsync killed inside a window leaves the app down: status and the textfile say so."""
    import json
    import os

    from memsync.state import WINDOW_FILE

    deployment.close()
    textfile = tmp_path / "memsync.prom"
    deployment.config.write_text(
        deployment.config.read_text() + f'\n[daemon]\ntextfile_path = "{textfile}"\n'
    )
    state_dir = deployment.paths.root / "memsync-state"
    state_dir.mkdir(exist_ok=True)
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)  # a pid that no longer runs: the killed memsync's
    (state_dir / WINDOW_FILE).write_text(
        json.dumps({"pid": dead, "what": "prune", "opened_at": "2026-12-01T00:00:00Z"})
    )
    status = cli("status", "--json", config=deployment.config)
    assert status.code == 3 and status.json()["ok"] is False
    assert status.json()["window_left_open"]["what"] == "prune"
    assert cli("job", "check", "--json", config=deployment.config).code == 0
    assert "memsync_window_left_open 1" in textfile.read_text()


def test_apply_pending_as_the_apps_exec_start_pre_drops_the_marker_without_starting_it(
    deployment, tmp_path
):
    """In the app unit's ExecStartPre= the app is starting: start_command would wait for itself."""
    import json
    import os
    import subprocess
    import sys

    from memsync.state import WINDOW_FILE

    deployment.close()
    started = tmp_path / "start-ran"
    start = [sys.executable, "-c", f"open({str(started)!r}, 'w').close()"]
    deployment.config.write_text(
        deployment.config.read_text()
        + f'\n[app]\nstop_command = ["true"]\nstart_command = {json.dumps(start)}\n'
    )
    state_dir = deployment.paths.root / "memsync-state"
    state_dir.mkdir(exist_ok=True)
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    marker = state_dir / WINDOW_FILE
    marker.write_text(
        json.dumps({"pid": dead, "what": "prune", "opened_at": "2026-12-01T00:00:00Z"})
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memsync",
            "pending",
            "apply",
            "--json",
            "--config",
            str(deployment.config),
        ],
        env={**os.environ, "MEMSYNC_APP_STARTING": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert not marker.exists() and not started.exists()
