"""Breaking ``migrate --switch``: memsync SIGKILLed at each step, then the same switch run again.

A real app (``tests/helpers/window_app.py``) writes through the copy and the switch; memsync is
killed (``tests.breaker.killat``: a real SIGKILL before the named step runs). Afterwards the app
must run on ONE store, the one its config file names, and the switch run again must finish or
refuse in one line, with no memory of the source lost. Also: SIGTERM between the config's write
and the journal's, the roll-back of a failed start killed, the config's disk full or read-only
and the snapshot's disk full (real tmpfs), NEW.toml edited after the copy, the app started by
someone else mid-switch, and a running daemon after a switch killed at the start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import window_app
from tests.helpers.migrate import qdrant_points, target_config
from tests.helpers.switching import ROOT, file_deployment, holder_pid, journal, memsync, start_app


def _killed_at(
    step: str, nth: int, *argv: str | Path, config: Path, env: dict[str, str] | None = None
) -> int:
    """Run ``memsync ARGV`` SIGKILLed before the ``nth`` call of ``step``; its return code."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat", step, "--nth", str(nth), "--",
         *map(str, argv), "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )  # fmt: skip
    return done.returncode


STEPS = [
    ("memsync.snapshot.create:create_snapshot", 1),  # before anything stops
    ("memsync.snapshot.create:build_manifest", 1),  # inside the snapshot: its files copied
    ("memsync.snapshot.pins:pin", 1),  # the snapshot made, not pinned yet
    ("memsync.migrate.source_record:record_source", 1),
    ("memsync.routes.window:run_command", 1),  # stop_command (window.json written)
    ("memsync.migrate.run:run_migrate", 1),  # the app stopped: the final catch-up
    ("memsync.migrate.switch:_record_switched", 1),  # the app's config file just written
    ("memsync.routes.window:run_command", 2),  # start_command (the journal says switched)
]


@pytest.mark.parametrize(("step", "nth"), STEPS, ids=[s.rsplit(":", 1)[1] for s, _ in STEPS])
def test_a_switch_killed_at_any_step_ends_with_the_app_on_one_store_when_run_again(
    make_deployment, tmp_path, step, nth
):
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    start_app(app)
    try:
        assert memsync("migrate", "--to", new, config=app.config).returncode == 0
        code = _killed_at(step, nth, "migrate", "--to", new, "--switch", config=app.config)
        assert code == -9
        again = memsync("migrate", "--to", new, "--switch", "--json", config=app.config)
        pid = window_app.pid_of(app.paths.root)
        assert pid is not None, f"the app is down after the re-run: {again.stderr}"
        named = json.loads(app.app_file.read_text())["vector_store"]["config"]["path"]
        held = holder_pid(app.config)  # the store memsync's config (the app's file) names
        assert held == pid, f"the app does not hold {named}: {again.stderr}"
        assert again.returncode in (0, 10), again.stderr
        errors = [line for line in again.stderr.splitlines() if '"exit_error"' in line]
        assert len(errors) == (again.returncode != 0), again.stderr  # one line when refused
        assert journal(app.paths)["phase"] == "switched"
        assert named == str(tmp_path / "new" / "qdrant")
        assert not (app.paths.state / "window.json").exists()
    finally:
        window_app.stop(app.paths.root)
    source = qdrant_points(app.paths.qdrant)
    target = qdrant_points(tmp_path / "new" / "qdrant")
    assert set(source) <= set(target)
    assert memsync("check", config=app.config).returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    """A real 64 KiB tmpfs (root only), unmounted after the test."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)])
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _app_file_on(app, directory: Path) -> None:
    """Move the app's mem0 config file into ``directory``; memsync's config and the app follow."""
    moved = directory / app.app_file.name
    moved.write_bytes(app.app_file.read_bytes())
    moved.chmod(0o640)
    text = app.config.read_text(encoding="utf-8").replace(str(app.app_file), str(moved))
    app.config.write_text(text, encoding="utf-8")
    app.app_file.unlink()
    app.app_file = moved


@pytest.mark.parametrize("how", ["full", "read-only"])
def test_a_config_file_that_cannot_be_written_leaves_the_app_on_the_old_store(
    make_deployment, tmp_path, small_disk, how
):
    app = file_deployment(make_deployment)
    _app_file_on(app, small_disk)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    before = app.app_file.read_bytes()
    start_app(app)
    try:
        assert memsync("migrate", "--to", new, config=app.config).returncode == 0
        if how == "full":
            filler = small_disk / "filler"
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1k", "count=1000"],
                           capture_output=True)  # fmt: skip
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        switched = memsync("migrate", "--to", new, "--switch", config=app.config)
        pid = window_app.pid_of(app.paths.root)
        assert pid is not None and holder_pid(app.config) == pid  # up, on the old store
    finally:
        window_app.stop(app.paths.root)
    assert switched.returncode in (11, 75), switched.stderr
    assert "Traceback" not in switched.stderr
    errors = [line for line in switched.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and str(app.app_file.parent) in errors[0], switched.stderr
    assert app.app_file.read_bytes() == before
    assert journal(app.paths)["phase"] == "verified"
    assert not (app.paths.state / "migrate-source.json").exists()


@pytest.mark.slow(
    reason="a copy, a switch whose start fails, SIGKILLed while it rolls back, then a full switch"
)
def test_a_switch_killed_while_it_rolls_back_a_failed_start_can_be_switched_again(
    make_deployment, tmp_path
):
    """The app did not start on the target; memsync put the .bak back and was killed then."""
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    before = app.app_file.read_bytes()
    start_app(app)
    try:
        assert memsync("migrate", "--to", new, config=app.config).returncode == 0
        code = _killed_at(
            "memsync.migrate.switch:_record_verified", 1, "migrate", "--to", new, "--switch",
            config=app.config, env={"WINDOW_APP_FAIL_START": "1"},
        )  # fmt: skip
        assert code == -9
        assert app.app_file.read_bytes() == before  # the .bak was put back
        assert journal(app.paths)["phase"] == "switched"  # but the journal did not follow
        again = memsync("migrate", "--to", new, "--switch", config=app.config)
        assert again.returncode == 0, again.stderr
        pid = window_app.pid_of(app.paths.root)
        assert pid is not None and holder_pid(app.config) == pid
        assert holder_pid(new) == pid  # on the target now
    finally:
        window_app.stop(app.paths.root)
    assert journal(app.paths)["phase"] == "switched"


def test_a_switch_stopped_by_sigterm_right_after_the_config_is_written_stays_consistent(
    make_deployment, tmp_path
):
    """SIGTERM (systemd stopping memsync) lands between the config's write and the journal's."""
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    start_app(app)
    flag = tmp_path / "paused"
    try:
        assert memsync("migrate", "--to", new, config=app.config).returncode == 0
        paused = subprocess.Popen(
            [sys.executable, "-m", "tests.breaker.pauseat", "memsync.migrate.switch:_record_switched",
             "--nth", "1", "--flag", str(flag), "--", "migrate", "--to", str(new), "--switch",
             "--config", str(app.config)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert paused.poll() is None and time.monotonic() < deadline, paused.communicate()
            time.sleep(0.05)
        paused.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        flag.unlink()  # let it go on (if the signal has not ended it already)
        _out, err = paused.communicate(timeout=120)
        assert paused.returncode == 130, err  # interrupted, the app started again
        pid = window_app.pid_of(app.paths.root)
        assert pid is not None and holder_pid(app.config) == pid  # up, on what its file names
        again = memsync("migrate", "--to", new, "--switch", config=app.config)
        assert again.returncode in (0, 10), again.stderr
        assert journal(app.paths)["phase"] == "switched", again.stderr
        assert holder_pid(new) == window_app.pid_of(app.paths.root)
        assert (app.paths.state / "migrate-source.json").is_file()  # cleanup and erase need it
    finally:
        window_app.stop(app.paths.root)


def test_a_new_toml_whose_embedder_was_edited_after_the_copy_is_not_switched_to(
    make_deployment, tmp_path
):
    """NEW.toml names another embedder (another size) than the one the target was copied with."""
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    before = app.app_file.read_bytes()
    pid = start_app(app)
    try:
        assert memsync("migrate", "--to", new, config=app.config).returncode == 0
        edited = new.read_text(encoding="utf-8").replace("memsync_hash256", "memsync_hash")
        new.write_text(edited.replace("= 256", "= 384"), encoding="utf-8")
        switched = memsync("migrate", "--to", new, "--switch", config=app.config)
        assert switched.returncode == 10, switched.stderr
        assert len(switched.stderr.strip().splitlines()) == 1, switched.stderr
        running = window_app.pid_of(app.paths.root)
        assert running is not None and holder_pid(app.config) == running
    finally:
        window_app.stop(app.paths.root)
    assert app.app_file.read_bytes() == before
    assert journal(app.paths)["phase"] == "verified"
    assert running == pid  # refused before the app was stopped
    assert not (app.paths.root / "snapshots").exists()  # and before the snapshot


def test_a_snapshot_directory_on_a_full_disk_stops_the_switch_before_the_app_is_stopped(
    make_deployment, tmp_path, small_disk
):
    app = file_deployment(make_deployment)
    text = app.config.read_text(encoding="utf-8")
    app.config.write_text(text.replace(str(app.paths.root / "snapshots"), str(small_disk)))
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    before = app.app_file.read_bytes()
    pid = start_app(app)
    try:
        assert memsync("migrate", "--to", new, config=app.config).returncode == 0
        switched = memsync("migrate", "--to", new, "--switch", config=app.config)
        assert window_app.pid_of(app.paths.root) == pid  # never stopped
    finally:
        window_app.stop(app.paths.root)
    assert switched.returncode == 75, switched.stderr
    assert len(switched.stderr.strip().splitlines()) == 1, switched.stderr
    assert app.app_file.read_bytes() == before
    assert journal(app.paths)["phase"] == "verified"
    assert not (app.paths.state / "migrate-source.json").exists()
    assert not [entry for entry in small_disk.iterdir() if entry.name != "lost+found"]


def test_an_app_started_during_a_switch_it_did_not_stop_is_not_switched_under(
    make_deployment, tmp_path
):
    """The app was not running at the start (no window needed), then something started it."""
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    before = app.app_file.read_bytes()
    flag = tmp_path / "paused"
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    paused = subprocess.Popen(
        [sys.executable, "-m", "tests.breaker.pauseat", "memsync.migrate.run:run_migrate",
         "--nth", "1", "--flag", str(flag), "--", "migrate", "--to", str(new), "--switch",
         "--config", str(app.config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert paused.poll() is None and time.monotonic() < deadline, paused.communicate()
            time.sleep(0.05)
        pid = start_app(app)  # a supervisor restarts the app
        flag.unlink()
        _out, err = paused.communicate(timeout=120)
        assert window_app.pid_of(app.paths.root) == pid
        assert holder_pid(app.config) == pid  # the app and its config name the same store
    finally:
        window_app.stop(app.paths.root)
    assert paused.returncode == 12, err
    assert app.app_file.read_bytes() == before
    assert journal(app.paths)["phase"] == "verified"


def test_a_switch_killed_during_the_start_still_gets_the_daemon_to_reload(
    make_deployment, tmp_path
):
    """The journal said switched before the start; the daemon's SIGHUP comes after it."""
    from tests.process.test_daemon import Notify, stop
    from tests.process.test_daemon import start as start_daemon

    app = file_deployment(make_deployment)
    app.config.write_text(
        app.config.read_text().replace("\n[app]", '\n[daemon]\ncheck_every = "2s"\n\n[app]', 1)
    )
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    start_app(app)
    daemon = start_daemon(app.config, Notify(tmp_path))
    try:
        daemon.wait_event("job_finished")
        assert memsync("migrate", "--to", new, config=app.config).returncode == 0
        code = _killed_at(
            "memsync.routes.window:run_command", 2, "migrate", "--to", new, "--switch",
            config=app.config,
        )  # fmt: skip
        assert code == -9
        again = memsync("migrate", "--to", new, "--switch", config=app.config)
        assert again.returncode == 10 and "switched already" in again.stderr, again.stderr
        daemon.wait_event("config_reloaded", timeout_s=30)  # it now works on the new store
    finally:
        window_app.stop(app.paths.root)
        stop(daemon)
