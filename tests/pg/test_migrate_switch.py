"""``memsync migrate --switch``: the writing app moved onto the target through the window.

The app (a real process, ``tests/helpers/window_app.py``) builds its Memory from a JSON mem0
config file and writes throughout the copy; memsync stops it, catches the target up, writes the
file and starts it again. Embedded Qdrant to a new embedded directory with a new embedder
(``memsync_hash256``; the app's config in JSON), and embedded Qdrant to pgvector keeping the
embedder (in YAML).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import window_app
from tests.helpers.migrate import qdrant_points, target_config
from tests.helpers.switching import (
    app_stats,
    file_deployment,
    holder_pid,
    journal,
    memsync,
    start_app,
)
from tests.pg.test_migrate_targets import _pg_rows


@pytest.mark.parametrize("kind", ["embedded", "pgvector"])
def test_the_switch_moves_the_writing_app_onto_the_target_and_loses_no_memory(
    make_deployment, tmp_path, request, kind
):
    pg_url = request.getfixturevalue("pg_url") if kind == "pgvector" else None
    app = file_deployment(make_deployment, suffix=".json" if pg_url is None else ".yaml")
    embedder, dims = ("memsync_hash256", 256) if pg_url is None else ("memsync_hash", 384)
    new = target_config(app.paths, tmp_path / "new", embedder=embedder, dims=dims, pg_url=pg_url)
    old_pid = start_app(app)
    try:
        copied = memsync("migrate", "--to", new, "--json", config=app.config)
        assert copied.returncode == 0, copied.stderr
        assert json.loads(copied.stdout)["not_copied"]  # the app wrote during the copy
        before = app.app_file.read_bytes()
        switched = memsync(
            "migrate", "--to", new, "--switch", "--json", config=app.config,
            env={"WINDOW_APP_ADDS_ONLY": "1"},  # the restarted app only adds: nothing it had goes
        )  # fmt: skip
        assert switched.returncode == 0, switched.stderr
        report = json.loads(switched.stdout)
        new_pid = window_app.pid_of(app.paths.root)
        assert new_pid is not None and new_pid != old_pid
        if pg_url is None:
            assert holder_pid(new) == new_pid  # the new directory is the new app's
        source = qdrant_points(app.paths.qdrant)  # free: the app left it; as it was at the stop
        time.sleep(1.5)  # the app writes on, into the target
    finally:
        window_app.stop(app.paths.root)
    assert app_stats(app.paths.root)["failures"] == 0
    target = _target_points(tmp_path / "new", pg_url)
    assert set(source) <= set(target)  # every memory the source held, incl. the copy's writes
    assert all(target[i][0] == source[i][0] for i in source)
    assert set(target) - set(source)  # the app's writes after the switch landed in the target
    assert {len(vector) for _payload, vector in target.values()} == {dims}
    _assert_report(report, app, new, before, pg_url)
    assert memsync("check", config=app.config).returncode == 0


def _target_points(root: Path, pg_url: str | None) -> dict:
    if pg_url is None:
        return qdrant_points(root / "qdrant")
    return _pg_rows(pg_url, "mem0")


def _load(path: Path, data: bytes) -> dict:
    """The app's mem0 config: JSON, or YAML by its suffix (as the app reads it)."""
    return yaml.safe_load(data) if path.suffix == ".yaml" else json.loads(data)


def _assert_report(report: dict, app, new: Path, before: bytes, pg_url: str | None) -> None:
    switch = report["switch"]
    assert report["verified"] is True and switch["switched"] is True
    assert switch["route"] == "window" and switch["downtime_s"] > 0
    assert switch["check_after"]["errors"] == 0 and switch["printed_config"] is None
    assert switch["app_config"] == str(app.app_file)
    backup = Path(switch["app_config_backup"])
    assert backup == app.app_file.with_name(app.app_file.name + ".bak")
    assert backup.read_bytes() == before  # the old file, byte for byte
    assert app.app_file.stat().st_mode & 0o777 == 0o640
    written, old = _load(app.app_file, app.app_file.read_bytes()), _load(app.app_file, before)
    assert {k: v for k, v in written.items() if k not in ("vector_store", "embedder")} == {
        k: v for k, v in old.items() if k not in ("vector_store", "embedder")
    }
    store = written["vector_store"]
    if pg_url is None:
        assert store["config"]["path"] == str(new.parent / "qdrant")
        assert written["embedder"] == {"provider": "memsync_hash256"}
    else:  # the literal connection string: mem0 reads no {file = ...}
        assert store["provider"] == "pgvector" and store["config"]["connection_string"] == pg_url
    snapshot = app.paths.root / "snapshots" / switch["snapshot"]
    assert (snapshot / "manifest.json").is_file()
    assert json.loads((snapshot / "pinned.json").read_text())["pinned"] is True  # kept by prune
    recorded = journal(app.paths)
    assert recorded["phase"] == "switched" and recorded["source_snapshot"] == switch["snapshot"]
    assert recorded["app_config"] == str(app.app_file) and recorded["switched_at"]
    kept = json.loads((app.paths.state / "migrate-source.json").read_text())
    assert kept["document"]["mem0"]["vector_store"]["config"]["path"] == str(app.paths.qdrant)
