"""The daemon as a real subprocess against a real deployment, with a NOTIFY_SOCKET we listen on."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import s3_section

ROOT = Path(__file__).resolve().parents[2]


class Notify:
    def __init__(self, directory: Path) -> None:
        self.path = directory / "notify.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.2)
        self.messages: list[str] = []

    def wait_for(self, text: str, timeout_s: float = 60, daemon: Daemon | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(text in m for m in self.messages):
                return
            if daemon is not None and daemon.poll() is not None:
                raise AssertionError(
                    f"the daemon exited ({daemon.poll()}) before {text!r}: {''.join(daemon.lines)[-2000:]}"
                )
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                pass
        raise AssertionError(f"{text!r} never arrived; got {self.messages}")


class Daemon:
    """``memsync daemon`` as a subprocess whose stderr (JSON log lines) is read as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def send_signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def poll(self) -> int | None:
        return self.process.poll()

    def communicate(self, timeout: float) -> tuple[str, str]:
        self.process.wait(timeout=timeout)
        self.reader.join(timeout=timeout)
        return "", "".join(self.lines)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def wait_event(self, name: str, count: int = 1, timeout_s: float = 60) -> list[dict]:
        """Wait until the daemon has logged ``name`` at least ``count`` times; return those events."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = [e for e in events("".join(self.lines)) if e.get("event") == name]
            if len(found) >= count:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(
            f"{name!r} x{count} never logged; stderr so far:\n{''.join(self.lines)[-3000:]}"
        )


def start(config: Path, notify: Notify, extra_env: dict[str, str] | None = None) -> Daemon:
    env = {
        **os.environ,
        "NOTIFY_SOCKET": str(notify.path),
        "WATCHDOG_USEC": "1000000",
        **(extra_env or {}),
    }
    return Daemon(
        subprocess.Popen(
            [sys.executable, "-m", "memsync", "daemon", "--config", str(config)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    )


def state(deployment_root: Path) -> dict:
    path = deployment_root / "memsync-state" / "daemon-state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def wait_state(root: Path, predicate, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            current = state(root)
        except ValueError:
            current = {}
        if current and predicate(current):
            return current
        time.sleep(0.1)
    raise AssertionError(f"state never matched: {state(root)}")


def stop(process: Daemon) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    return process.returncode, err


def events(stderr: str) -> list[dict]:
    found = []
    for line in stderr.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def with_daemon(deployment, section: str) -> None:
    deployment.config.write_text(deployment.config.read_text() + "\n[daemon]\n" + section)


class Pings:
    """A tiny HTTP server on 127.0.0.1 recording the paths the daemon pings."""

    def __init__(self) -> None:
        import http.server
        import threading

        paths: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                paths.append(self.path)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.paths = paths
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ping/{{job}}"


def test_ready_jobs_run_status_and_sigterm(deployment, cli, tmp_path):
    deployment.close()
    pings = Pings()
    with_daemon(
        deployment, f'check_every = "2s"\nsnapshot_every = "1d"\nping_url = "{pings.url}"\n'
    )
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)
    try:
        notify.wait_for("READY=1", daemon=process)
        notify.wait_for("WATCHDOG=1")
        current = wait_state(
            deployment.paths.root,
            lambda s: (
                s["jobs"].get("check", {}).get("last_outcome") == "ok"
                and s["jobs"].get("snapshot", {}).get("last_outcome") == "ok"
            ),
        )
        assert current["jobs"]["snapshot"]["summary"]["snapshot_id"]
        status = cli("status", "--json", config=deployment.config)
        assert status.code == 0, status.out
        document = status.json()
        assert document["daemon"]["running"] is True and document["daemon"]["pid"] == process.pid
        assert {j["job"] for j in document["jobs"]} == {"check", "snapshot"}
        second = subprocess.run(
            [sys.executable, "-m", "memsync", "daemon", "--config", str(deployment.config)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 12 and f"pid {process.pid}" in second.stderr
    finally:
        code, err = stop(process)
    assert code == 0
    finished = [e for e in events(err) if e.get("event") == "job_finished"]
    assert finished and all({"outcome", "duration_s", "job"} <= set(e) for e in finished)
    stopped = cli("status", "--json", config=deployment.config)
    assert stopped.json()["daemon"]["running"] is False
    assert {"/ping/check/start", "/ping/check", "/ping/snapshot/start", "/ping/snapshot"} <= set(
        pings.paths
    )
    pings.server.shutdown()


def test_restart_does_not_rerun_a_job_done_for_its_slot(deployment, tmp_path):
    deployment.close()
    with_daemon(deployment, 'snapshot_every = "1d"\ncheck_every = "1d"\n')
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)
    wait_state(
        deployment.paths.root,
        lambda s: (
            s["jobs"].get("snapshot", {}).get("last_outcome") == "ok"
            and s["jobs"].get("check", {}).get("last_outcome") == "ok"
        ),
    )
    assert stop(process)[0] == 0
    first = state(deployment.paths.root)["jobs"]["snapshot"]["last_success_at"]
    snapshots_before = sorted((deployment.paths.root / "snapshots").iterdir())
    (tmp_path / "notify.sock").unlink()
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)
    notify.wait_for("READY=1", daemon=process)
    assert (
        process.wait_event("catch_up_planned")[0]["jobs"] == []
    )  # both jobs are done for their slot
    assert stop(process)[0] == 0
    assert state(deployment.paths.root)["jobs"]["snapshot"]["last_success_at"] == first
    assert sorted((deployment.paths.root / "snapshots").iterdir()) == snapshots_before


def test_sigterm_during_a_job_lets_it_finish(cli, tmp_path):
    from memsync.demo.bulk import generate

    config = generate(tmp_path, 20_000)
    config.write_text(
        config.read_text()
        + f'\n[snapshot]\ndirectory = "{tmp_path / "snapshots"}"\nkeep_last = 2\n'
        '\n[daemon]\nsnapshot_every = "1d"\n'
    )
    notify = Notify(tmp_path)
    process = start(config, notify)
    notify.wait_for("STATUS=running snapshot")
    process.send_signal(signal.SIGTERM)
    notify.wait_for("STOPPING=1")
    stopping_seen = datetime.now(UTC)
    _, err = process.communicate(timeout=120)  # no second SIGTERM: the job must finish
    code = process.returncode
    assert code == 0
    taken = list((tmp_path / "snapshots").iterdir())
    assert len(taken) == 1 and (taken[0] / "manifest.json").is_file()  # finished, not a .partial
    assert cli("snapshot", "verify", taken[0].name, config=config).code == 0
    finished = [e for e in events(err) if e.get("event") == "job_finished"]
    assert any(e.get("outcome") == "ok" for e in finished)
    # systemd hears STOPPING=1 when SIGTERM arrives, while the job is still finishing
    assert stopping_seen < datetime.fromisoformat(finished[0]["timestamp"].replace("Z", "+00:00"))


def test_sighup_with_a_broken_config_keeps_the_old_one(deployment, tmp_path):
    deployment.close()
    with_daemon(deployment, 'check_every = "1s"\n')
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)
    try:
        notify.wait_for("READY=1", daemon=process)
        good = deployment.config.read_text()
        deployment.config.write_text(good + "\n[daemon\nbroken = ")
        process.send_signal(signal.SIGHUP)
        process.wait_event("config_reload_failed")
        runs = state(deployment.paths.root)["jobs"]["check"]["last_run_at"]
        current = wait_state(
            deployment.paths.root,
            lambda s: (
                s["jobs"]["check"]["last_run_at"] != runs
                and s["jobs"]["check"].get("last_outcome") == "ok"
            ),
        )["jobs"]["check"]
        assert (
            current["last_run_at"] != runs and current["last_outcome"] == "ok"
        )  # the old config still runs
        assert process.poll() is None
    finally:
        deployment.config.write_text(good)
        code, err = stop(process)
    assert code == 0
    assert any(e.get("event") == "config_reload_failed" for e in events(err))


def test_failing_job_is_retried_and_the_loop_lives(make_deployment, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    deployment = make_deployment(
        count=10, extra_config=s3_section(f"http://127.0.0.1:{dead_port}", "gone-bucket")
    )
    deployment.close()
    with_daemon(deployment, 'snapshot_every = "12s"\ncheck_every = "2s"\n')
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)
    try:
        current = wait_state(
            deployment.paths.root,
            lambda s: s["jobs"].get("snapshot", {}).get("consecutive_failures", 0) >= 2,
            timeout_s=90,
        )
        assert current["jobs"]["snapshot"]["last_outcome"] == "failed"
        assert current["jobs"]["check"]["last_outcome"] == "ok"
        assert process.poll() is None
    finally:
        code, err = stop(process)
    assert code == 0
    assert any(e.get("event") == "job_retry" for e in events(err))


def test_status_exits_3_when_a_job_is_failing_and_writes_a_textfile(make_deployment, cli, tmp_path):
    textfile = tmp_path / "memsync.prom"
    deployment = make_deployment(count=10)
    deployment.close()
    with_daemon(deployment, f'check_every = "1s"\ntextfile_path = "{textfile}"\n')
    build_damage = deployment.paths.history_db
    import sqlite3

    with sqlite3.connect(build_damage) as connection:  # an orphan point: check finds an error
        connection.execute(
            "DELETE FROM history WHERE rowid = (SELECT max(rowid) FROM history WHERE event = 'ADD')"
        )
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)
    try:
        wait_state(
            deployment.paths.root,
            lambda s: s["jobs"].get("check", {}).get("last_outcome") == "problems",
        )
        status = cli("status", "--json", config=deployment.config)
        assert status.code == 3
        text = textfile.read_text()
        assert (
            'memsync_job_failing{memsync_job="check"} 1' in text
            and 'memsync_findings{code="orphan-point",severity="error"} 1' in text
        )
    finally:
        assert stop(process)[0] == 0


@pytest.mark.parametrize(
    "unit",
    [
        "memsync.service",
        "memsync@.service",
        "memsync-oneshot@.service",
        "memsync-check.timer",
        "memsync-prune.timer",
        "memsync-snapshot.timer",
        "memsync-verify.timer",
        "memsync-retention.timer",
        "memsync-replica.timer",
    ],
)
def test_systemd_units_verify_cleanly(unit, tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed to verify the units (Debian package systemd)"
    memsync = Path(sys.executable).with_name("memsync")
    for source in (ROOT / "systemd").iterdir():
        text = source.read_text().replace("/usr/local/bin/memsync", str(memsync))
        name = (
            source.name.replace("@.service", "@test.service")
            if "@." in source.name
            else source.name
        )
        (tmp_path / name).write_text(text)
    target = unit.replace("@.service", "@test.service")
    if target.endswith(".timer"):  # a timer's unit must be there under its instance name
        (tmp_path / f"memsync-oneshot@{target.split('-')[1].split('.')[0]}.service").write_text(
            (tmp_path / "memsync-oneshot@test.service").read_text()
        )
    result = subprocess.run(
        [analyze, "verify", str(tmp_path / target)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_sighup_that_moves_state_dir_or_drops_every_job_is_rejected(deployment, tmp_path):
    deployment.close()
    with_daemon(deployment, 'check_every = "1s"\n')
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)
    good = deployment.config.read_text()
    try:
        notify.wait_for("READY=1", daemon=process)
        moved = tmp_path / "elsewhere"
        moved.mkdir()
        deployment.config.write_text(
            good.replace(f'state_dir = "{deployment.paths.state}"', f'state_dir = "{moved}"')
        )
        process.send_signal(signal.SIGHUP)
        process.wait_event("config_reload_failed", count=1)
        deployment.config.write_text(good.replace('check_every = "1s"', ""))
        process.send_signal(signal.SIGHUP)
        process.wait_event("config_reload_failed", count=2)
        assert process.poll() is None
    finally:
        deployment.config.write_text(good)
        code, err = stop(process)
    assert code == 0
    failures = [e for e in events(err) if e.get("event") == "config_reload_failed"]
    assert (
        len(failures) == 2
        and "state_dir" in failures[0]["error"]
        and "no job" in failures[1]["error"]
    )
