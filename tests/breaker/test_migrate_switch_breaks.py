"""Breaking ``migrate --switch``: memsync SIGKILLed at each step, then the same switch run again.

A real app (``tests/helpers/window_app.py``) writes through the copy and the switch; memsync is
killed (``tests.breaker.killat``: a real SIGKILL before the named step runs). Afterwards the app
must run on ONE store, the one its config file names, and the switch run again must finish or
refuse in one line, with no memory of the source lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import window_app
from tests.migrate.helpers import qdrant_points, target_config
from tests.migrate.switching import ROOT, file_deployment, holder_pid, journal, memsync, start_app


def _killed_at(step: str, nth: int, *argv: str | Path, config: Path) -> int:
    """Run ``memsync ARGV`` SIGKILLed before the ``nth`` call of ``step``; its return code."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat", step, "--nth", str(nth), "--",
         *map(str, argv), "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done.returncode


STEPS = [
    ("memsync.snapshot.create:create_snapshot", 1),  # before anything stops
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
