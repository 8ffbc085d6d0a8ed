"""``migrate --switch``: refusals, ``--dry-run``, the config in code, and an app that will not start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import window_app
from tests.helpers.migrate import target_config
from tests.helpers.switching import (
    file_deployment,
    holder_pid,
    journal,
    memsync,
    start_app,
)


def _untouched(app, before: bytes) -> None:
    """Nothing the switch writes is there: the app's config as it was, no .bak, no snapshot."""
    assert app.app_file.read_bytes() == before
    assert not app.app_file.with_name(app.app_file.name + ".bak").exists()
    assert not (app.paths.root / "snapshots").exists()
    assert not (app.paths.state / "migrate-source.json").exists()


@pytest.mark.parametrize("phase", [None, "copy", "differs"])
def test_the_switch_is_refused_before_anything_stops_without_a_verified_copy(
    make_deployment, tmp_path, cli, phase
):
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    if phase is not None:
        assert cli("migrate", "--to", str(new), config=app.config).code == 0
        recorded = journal(app.paths)
        recorded["phase"] = phase
        (app.paths.state / "migrate.json").write_text(json.dumps(recorded))
    before = app.app_file.read_bytes()
    pid = start_app(app)
    try:
        result = cli("migrate", "--to", str(new), "--switch", config=app.config)
        assert result.code == 10, result.err
        expected = "no migration is recorded" if phase is None else f"(phase {phase})"
        assert expected in result.err and "memsync migrate --to" in result.err
        assert window_app.pid_of(app.paths.root) == pid
        assert not (app.paths.root / "app-stops.log").exists()  # never stopped
    finally:
        window_app.stop(app.paths.root)
    _untouched(app, before)


def test_a_dry_run_names_each_step_and_changes_nothing(make_deployment, tmp_path, cli):
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=app.config).code == 0
    recorded = (app.paths.state / "migrate.json").read_bytes()
    before = app.app_file.read_bytes()
    pid = start_app(app)
    try:
        result = cli(
            "migrate", "--to", str(new), "--switch", "--dry-run", "--json", config=app.config
        )
        assert result.code == 0, result.err
        assert window_app.pid_of(app.paths.root) == pid == holder_pid(app.config)
        assert not (app.paths.root / "app-stops.log").exists()  # never stopped
    finally:
        window_app.stop(app.paths.root)
    switch = result.json()["switch"]
    assert result.json()["dry_run"] is True and switch["switched"] is False
    assert switch["route"] == "window" and switch["snapshot"] is None
    assert switch["app_config"] == str(app.app_file) and switch["printed_config"] is None
    assert any(str(app.app_file) in step for step in switch["steps"])
    assert (app.paths.state / "migrate.json").read_bytes() == recorded
    _untouched(app, before)


def test_an_app_config_moved_by_hand_is_refused(make_deployment, tmp_path, cli):
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=app.config).code == 0
    moved = json.loads(app.app_file.read_text())
    moved["vector_store"]["config"]["path"] = str(tmp_path / "elsewhere")
    app.app_file.write_text(json.dumps(moved))
    before = app.app_file.read_bytes()
    result = cli("migrate", "--to", str(new), "--switch", config=app.config)
    assert result.code == 10, result.err
    assert f"the app's mem0 config {app.app_file} names {tmp_path / 'elsewhere'}" in result.err
    assert "not the migration's source" in result.err
    _untouched(app, before)
    assert journal(app.paths)["phase"] == "verified"


def test_the_app_holding_the_store_without_a_window_is_refused_with_exit_12(
    make_deployment, tmp_path, cli
):
    app = file_deployment(make_deployment, window=False)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=app.config).code == 0
    before = app.app_file.read_bytes()
    pid = start_app(app)
    try:
        result = cli("migrate", "--to", str(new), "--switch", config=app.config)
        assert result.code == 12, result.err
        assert f"pid {pid}" in result.err and "stop_command" in result.err
        assert window_app.pid_of(app.paths.root) == pid
        assert not (app.paths.root / "app-stops.log").exists()  # never stopped
    finally:
        window_app.stop(app.paths.root)
    _untouched(app, before)


def test_the_config_in_code_with_the_app_running_is_refused_with_exit_12(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=10)  # [mem0] inline; its Memory (the app) holds the store
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    before = source.config.read_bytes()
    result = cli("migrate", "--to", str(new), "--switch", config=source.config)
    assert result.code == 12, result.err
    assert "in code" in result.err and "put the printed mem0 config" in result.err
    assert source.config.read_bytes() == before
    assert journal(source.paths)["phase"] == "verified"


def test_the_config_in_code_is_printed_with_secret_references_and_memsync_follows(
    make_deployment, tmp_path, cli, pg_url
):
    source = make_deployment(count=20)
    source.close()  # the operator stopped the app
    new = target_config(
        source.paths, tmp_path / "new", embedder="memsync_hash", dims=384, pg_url=pg_url
    )
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    before = source.config.read_bytes()
    result = cli("migrate", "--to", str(new), "--switch", "--json", config=source.config)
    assert result.code == 0, result.err
    switch = result.json()["switch"]
    assert switch["switched"] is True and switch["route"] is None and switch["app_config"] is None
    store = switch["printed_config"]["vector_store"]
    assert store["provider"] == "pgvector"
    assert store["config"]["connection_string"] == {"file": str(tmp_path / "new" / "pg-url")}
    assert pg_url not in result.out  # the reference, never the value
    assert Path(switch["memsync_config_backup"]).read_bytes() == before
    assert source.config.read_bytes() == new.read_bytes()  # memsync now reads the target
    assert switch["check_after"]["errors"] == 0
    assert journal(source.paths)["phase"] == "switched"
    text = cli("migrate", "--to", str(new), "--switch", config=source.config)
    assert text.code == 10 and "(phase switched)" in text.err
    assert cli("check", config=source.config).code == 0


def test_an_app_that_does_not_start_on_the_target_gets_its_old_config_back(
    make_deployment, tmp_path
):
    # migrate_slow is registered by the tests' plugin, which memsync imports and the app does
    # not: mem0 in the app refuses the new embedder, as an app lacking the new model's package.
    app = file_deployment(make_deployment)
    new = target_config(app.paths, tmp_path / "new", embedder="migrate_slow", dims=256)
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    before = app.app_file.read_bytes()
    old_pid = start_app(app)
    try:
        result = memsync("migrate", "--to", new, "--switch", config=app.config)
        assert result.returncode == 11, result.stderr
        assert "did not start on the new store" in result.stderr
        assert f"old config {app.app_file} is back" in result.stderr
        pid = window_app.pid_of(app.paths.root)
        assert pid is not None and pid != old_pid
        assert holder_pid(app.config) == pid  # the app runs again, on the old store
    finally:
        window_app.stop(app.paths.root)
    assert app.app_file.read_bytes() == before
    assert json.loads(app.app_file.with_name(app.app_file.name + ".bak").read_text())  # kept
    assert journal(app.paths)["phase"] == "verified"
    assert not (app.paths.state / "migrate-source.json").exists()
    assert not (app.paths.state / "window.json").exists()


def test_a_new_config_whose_relative_paths_would_move_is_refused_for_the_config_in_code(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=10)
    source.close()
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    text = new.read_text().replace(f'state_dir = "{source.paths.state}"', 'state_dir = "state"')
    new.write_text(text)  # tmp/new/state here, tmp/dep/state once written over memsync.toml
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    before = source.config.read_bytes()
    result = cli("migrate", "--to", str(new), "--switch", config=source.config)
    assert result.code == 10, result.err
    assert "relative paths" in result.err and "absolute" in result.err
    assert source.config.read_bytes() == before
    assert not (source.paths.root / "snapshots").exists()


def test_a_target_that_differs_at_the_final_verify_is_not_switched_to(
    make_deployment, tmp_path, pg_url
):
    import psycopg

    app = file_deployment(make_deployment)
    new = target_config(
        app.paths, tmp_path / "new", embedder="memsync_hash", dims=384, pg_url=pg_url
    )
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    with psycopg.connect(pg_url) as connection:  # changed behind memsync: the payload stays
        victim, other = [row[0] for row in connection.execute("SELECT id FROM mem0 LIMIT 2")]
        connection.execute(
            "UPDATE mem0 SET vector = (SELECT vector FROM mem0 WHERE id = %s) WHERE id = %s",
            (other, victim),
        )
    before = app.app_file.read_bytes()
    old_pid = start_app(app)
    try:
        result = memsync("migrate", "--to", new, "--switch", "--json", config=app.config)
        assert result.returncode == 3, result.stderr
        pid = window_app.pid_of(app.paths.root)
        assert pid is not None and pid != old_pid  # stopped, then started again ...
        assert holder_pid(app.config) == pid  # ... on the old store
    finally:
        window_app.stop(app.paths.root)
    report = json.loads(result.stdout)
    found = {(d["point_id"], d["what"]) for d in report["differences"]}
    assert (str(victim), "vector") in found and {i for i, _what in found} == {str(victim)}
    assert report["switch"]["switched"] is False and report["switch"]["snapshot"]
    assert app.app_file.read_bytes() == before
    assert not app.app_file.with_name(app.app_file.name + ".bak").exists()
    assert journal(app.paths)["phase"] == "differs"
    assert not (app.paths.state / "migrate-source.json").exists()
