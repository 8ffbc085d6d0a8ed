"""The maintenance window with a real app: stopped and started by the configured commands.

The app (``tests/helpers/window_app.py``) is a separate process holding one mem0 ``Memory`` on
the deployment; ``[app] stop_command`` and ``start_command`` stop and start it. Each test
proves the app runs again afterwards, whatever happened inside the window.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memsync import config as memsync_config
from memsync.stores import capture as stores
from memsync.stores.backends import vector_store_for
from tests.helpers import window_app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def windowed(make_deployment):
    """A deployment with 3 expired memories, its app running, a window configured."""

    def build(count: int = 12):
        deployment = make_deployment(count=count)
        today = datetime.now(UTC).date()
        expired = [
            deployment.memory.add(
                f"expired {i}", user_id="ana", infer=False,
                expiration_date=(today - timedelta(days=i + 1)).isoformat(),
            )["results"][0]["id"]
            for i in range(3)
        ]  # fmt: skip
        expired += deployment.seeded.expired
        deployment.close()
        root = deployment.paths.root
        deployment.config.write_text(deployment.config.read_text() + window_app.commands(root))
        assert window_app.start(root) == 0
        started.append(root)
        return deployment, expired

    started: list[Path] = []
    yield build
    for root in started:
        window_app.stop(root)


def app_state(deployment) -> tuple[int | None, int | None, int, int]:
    """(running app pid, store holder pid, starts, stops)."""
    root = deployment.paths.root
    loaded = memsync_config.load(deployment.config, os.environ)
    holder = vector_store_for(loaded).holder()
    starts = (root / "app-starts.log").read_text().split()
    stops = (
        (root / "app-stops.log").read_text().split() if (root / "app-stops.log").exists() else []
    )
    return window_app.pid_of(root), holder.pid if holder else None, len(starts), len(stops)


def with_gate(deployment, extra: str = "") -> None:
    """Add the gate plugin (``tests/helpers/gate.py``): memsync imports it inside the window."""
    text = deployment.config.read_text().replace(
        'plugins = ["memsync.demo.providers"]',
        'plugins = ["memsync.demo.providers", "tests.helpers.gate"]',
    )
    assert text.rstrip().splitlines()[-1] != "" and "[app]" in text  # the window's table is last
    root = Path(__file__).resolve().parents[2]
    deployment.config.write_text(text + f'python_path = ["{root}"]\n' + extra)


def live_ids(deployment) -> set[str]:
    """The live memory ids, but for the app's own traffic (it adds and deletes its own)."""
    loaded = memsync_config.load(deployment.config, os.environ)
    with stores.temporary_capture(vector_store_for(loaded), loaded) as captured:
        points = vector_store_for(loaded).read_points(captured.vectors)
    return {i for i, p in points.items() if p.payload.get("user_id") != window_app.TRAFFIC_USER}


def test_prune_through_a_window_removes_exactly_the_expired_and_the_app_runs_again(windowed, cli):
    deployment, expired = windowed()
    before = live_ids(deployment)
    first_pid = window_app.pid_of(deployment.paths.root)
    result = cli("prune", "--json", config=deployment.config)
    outcome = result.json()
    assert result.code == 0, result.err
    assert outcome["route"] == "window" and set(outcome["deleted"]) == set(expired)
    assert outcome["unproven"] == [] and 0 < outcome["downtime_s"] < 60
    pid, holder, starts, stops = app_state(deployment)
    assert pid is not None and pid != first_pid and holder == pid and (starts, stops) == (2, 1)
    assert live_ids(deployment) == before - set(expired)


def test_a_dry_run_names_the_window_and_never_stops_the_app(windowed, cli):
    deployment, expired = windowed()
    result = cli("prune", "--dry-run", "--json", config=deployment.config)
    assert result.code == 0 and result.json()["route"] == "window"
    assert set(result.json()["targets"]) == set(expired)
    assert app_state(deployment)[2:] == (1, 0)


def test_nothing_to_prune_never_opens_a_window(windowed, cli):
    deployment, _ = windowed()
    assert cli("prune", "--json", config=deployment.config).code == 0
    result = cli("prune", "--json", config=deployment.config)
    assert result.code == 0 and result.json()["deleted"] == [] and result.json()["route"] is None
    assert app_state(deployment)[2:] == (2, 1)  # the first prune's window only


def test_the_app_is_started_again_when_the_job_fails_inside_the_window(windowed, cli, monkeypatch):
    deployment, expired = windowed()
    with_gate(deployment)
    monkeypatch.setenv("MEMSYNC_TEST_GATE", "fail")
    result = cli("prune", "--json", config=deployment.config)
    assert result.code == 10 and "gate" in json.loads(result.err)["message"]
    pid, holder, starts, stops = app_state(deployment)
    assert pid is not None and holder == pid and (starts, stops) == (2, 1)
    assert set(expired) <= live_ids(deployment)  # nothing was deleted
    assert not (deployment.paths.state / "window.json").exists()


def test_work_overrunning_max_downtime_is_interrupted_and_the_app_started_again(
    windowed, cli, monkeypatch
):
    deployment, expired = windowed()
    with_gate(deployment, "max_downtime_s = 6\n")  # the gate blocks 60 s; the start fits in 6
    monkeypatch.setenv("MEMSYNC_TEST_GATE", "block")
    handler = signal.getsignal(signal.SIGALRM)
    clock = time.monotonic()
    result = cli("prune", "--json", config=deployment.config)
    assert result.code == 75, result.err
    assert "max_downtime_s" in json.loads(result.err)["message"]
    assert time.monotonic() - clock < 20 and signal.getsignal(signal.SIGALRM) is handler
    pid, holder, starts, stops = app_state(deployment)
    assert pid is not None and holder == pid and (starts, stops) == (2, 1)
    assert set(expired) <= live_ids(deployment)


def test_sigterm_inside_the_window_starts_the_app_again_and_exits_130(windowed, tmp_path):
    deployment, expired = windowed()
    with_gate(deployment)
    cue = tmp_path / "inside-the-window"
    memsync = subprocess.Popen(
        [sys.executable, "-m", "memsync", "prune", "--json", "--config", str(deployment.config)],
        cwd=ROOT,
        env={**os.environ, "MEMSYNC_TEST_GATE": "block", "MEMSYNC_TEST_GATE_FILE": str(cue)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not cue.exists() and memsync.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cue.exists(), memsync.stderr.read() if memsync.poll() is not None else "no cue"
    assert window_app.pid_of(deployment.paths.root) is None  # the app is stopped right now
    memsync.send_signal(signal.SIGTERM)
    _, err = memsync.communicate(timeout=60)
    assert memsync.returncode == 130, err
    pid, holder, starts, stops = app_state(deployment)
    assert pid is not None and holder == pid and (starts, stops) == (2, 1)
    assert set(expired) <= live_ids(deployment)


def test_a_window_left_open_by_a_killed_memsync_is_closed_by_the_next_write(
    windowed, tmp_path, cli
):
    deployment, expired = windowed()
    with_gate(deployment)
    cue = tmp_path / "inside-the-window"
    memsync = subprocess.Popen(
        [sys.executable, "-m", "memsync", "prune", "--config", str(deployment.config)],
        cwd=ROOT,
        env={**os.environ, "MEMSYNC_TEST_GATE": "block", "MEMSYNC_TEST_GATE_FILE": str(cue)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not cue.exists() and memsync.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    memsync.kill()  # SIGKILL: no finally runs, the app stays stopped
    memsync.wait()
    assert window_app.pid_of(deployment.paths.root) is None
    assert (deployment.paths.state / "window.json").exists()
    result = cli("prune", "--json", config=deployment.config)  # the gate lets this one through
    assert result.code == 0 and set(result.json()["deleted"]) == set(expired)
    pid, holder, starts, stops = app_state(deployment)
    assert pid is not None and holder == pid and (starts, stops) == (3, 2)
    assert not (deployment.paths.state / "window.json").exists()


def test_an_erasure_through_a_window_rewrites_the_files_while_the_app_runs_again(windowed, cli):
    deployment, _ = windowed()
    window_app.stop(deployment.paths.root)
    secret = "my passport number is X9988776 and my PIN is 4471"
    memory = deployment.reopen()
    target = memory.add(secret, user_id="erin", infer=False)["results"][0]["id"]
    deployment.close()
    assert window_app.start(deployment.paths.root) == 0
    result = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)
    outcome = result.json()
    assert result.code == 0 and outcome["route"] == "window" and outcome["deleted"] == [target]
    assert outcome["erased"]["history_rows_blanked"] >= 1
    pid, holder, _, _ = app_state(deployment)
    assert pid is not None and holder == pid  # the rewrite ran with the app holding the store
    stored = [deployment.paths.history_db, *deployment.paths.qdrant.rglob("storage.sqlite")]
    assert not [path for path in stored if secret.encode() in path.read_bytes()]


def test_a_failing_start_command_exits_11_and_the_next_write_starts_the_app(
    windowed, cli, monkeypatch
):
    deployment, expired = windowed()
    monkeypatch.setenv("WINDOW_APP_FAIL_START", "1")  # start_command inherits memsync's env
    result = cli("prune", "--json", config=deployment.config)
    error = json.loads(result.err.splitlines()[-1])
    assert result.code == 11 and "[app] start_command" in error["message"]
    assert window_app.pid_of(deployment.paths.root) is None  # the app is down, and says so:
    doctor = cli("doctor", "--json", config=deployment.config)
    left = [r for r in doctor.json()["results"] if r["code"] == "window-left-open"]
    assert doctor.code == 3 and left and left[0]["status"] == "error"
    monkeypatch.delenv("WINDOW_APP_FAIL_START")
    result = cli("prune", "--json", config=deployment.config)  # nothing left to prune
    assert result.code == 0 and result.json()["deleted"] == [] and result.json()["route"] is None
    pid, holder, starts, stops = app_state(deployment)
    assert pid is not None and holder == pid and (starts, stops) == (2, 1)
    assert not (deployment.paths.state / "window.json").exists()
    assert not set(expired) & live_ids(deployment)  # the first prune's deletes were done
