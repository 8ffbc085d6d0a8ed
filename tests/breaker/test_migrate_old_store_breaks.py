"""Breaking what surrounds a switch: the old store kept until ``--cleanup``, erasure, the files.

Real switches (the app stopped: no window), then what operators and failures do around them:
the old directory moved away or the old config put back by hand (``forget --erase`` must not
call a store clean it cannot see, nor skip a copy), a cleanup killed while it removes the old
directory (on a real tmpfs), NEW.toml moving the state directory (config in code), an app
config that is a symlink or YAML kept as ``.yaml.bak``, and a ``.bak`` the operator kept.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memsync import utc
from memsync.migrate import journal
from tests.helpers.migrate import qdrant_points, target_config
from tests.helpers.switching import ROOT, file_deployment, memsync


def test_an_erasure_does_not_call_a_moved_old_store_clean(make_deployment, tmp_path):
    app = file_deployment(make_deployment, window=False)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    assert memsync("migrate", "--to", new, "--switch", config=app.config).returncode == 0
    moved = app.paths.qdrant.with_name("qdrant-moved")
    app.paths.qdrant.rename(moved)
    erased_id = next(iter(qdrant_points(moved)))
    erase = memsync("forget", erased_id, "--erase", "--yes", "--json", config=app.config)
    assert erase.returncode == 0, erase.stderr  # the live deployment is erased
    source = json.loads(erase.stdout)["erased"]["migration_source"]
    assert erased_id in qdrant_points(moved)  # the moved store still holds it: memsync cannot know
    assert source["holds"] == "unknown" and source["erased"] is None
    assert str(app.paths.qdrant) in source["why"] and "not there" in source["why"]
    assert source["remove"]
    assert not app.paths.qdrant.exists()  # the erasure made no empty store in its place


def test_a_config_in_code_switch_refuses_a_new_toml_that_moves_the_state_directory(
    make_deployment, tmp_path, cli
):
    """NEW.toml written over memsync's config would leave the journal and the old config behind."""
    source = make_deployment(count=10)
    source.close()  # the operator stopped the app
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    other = tmp_path / "other-state"
    text = new.read_text(encoding="utf-8")
    new.write_text(text.replace(str(source.paths.state), str(other)), encoding="utf-8")
    before = source.config.read_bytes()
    result = cli("migrate", "--to", str(new), "--switch", config=source.config)
    assert result.code == 10, result.err
    assert "state_dir" in result.err and str(other) in result.err
    assert source.config.read_bytes() == before
    assert not (source.paths.state / "migrate-source.json").exists()
    assert not other.exists()


def test_a_switch_writes_through_an_app_config_that_is_a_symlink(make_deployment, tmp_path):
    """Config management often links the app's config to a file it keeps elsewhere."""
    app = file_deployment(make_deployment, window=False)
    kept = tmp_path / "managed" / "mem0.json"
    kept.parent.mkdir()
    kept.write_bytes(app.app_file.read_bytes())
    before = kept.read_bytes()
    app.app_file.unlink()
    app.app_file.symlink_to(kept)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    switched = memsync("migrate", "--to", new, "--switch", "--json", config=app.config)
    assert switched.returncode == 0, switched.stderr
    assert app.app_file.is_symlink() and app.app_file.resolve() == kept  # still the link
    written = json.loads(kept.read_text())
    assert written["vector_store"]["config"]["path"] == str(tmp_path / "new" / "qdrant")
    backup = json.loads(switched.stdout)["switch"]["app_config_backup"]
    assert open(backup, "rb").read() == before
    assert memsync("check", config=app.config).returncode == 0


def test_the_old_yaml_config_kept_as_bak_restores_the_snapshot_taken_before_the_switch(
    make_deployment, tmp_path
):
    """The how-to: restore a pre-switch snapshot with the old config (the .bak), into a copy."""
    app = file_deployment(make_deployment, window=False, suffix=".yaml")
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    switched = memsync("migrate", "--to", new, "--switch", "--json", config=app.config)
    assert switched.returncode == 0, switched.stderr
    switch = json.loads(switched.stdout)["switch"]
    old = tmp_path / "old.toml"
    text = app.config.read_text(encoding="utf-8")
    old.write_text(text.replace(str(app.app_file), switch["app_config_backup"]), encoding="utf-8")
    restored = memsync("restore", switch["snapshot"], "--to", tmp_path / "copy", config=old)
    assert restored.returncode == 0, restored.stderr


def test_an_erasure_after_the_old_config_was_put_back_by_hand_names_the_target(
    make_deployment, tmp_path
):
    """The operator undid the switch by putting the .bak back: the target is a copy again."""
    app = file_deployment(make_deployment, window=False)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    switched = memsync("migrate", "--to", new, "--switch", "--json", config=app.config)
    assert switched.returncode == 0, switched.stderr
    backup = json.loads(switched.stdout)["switch"]["app_config_backup"]
    app.app_file.write_bytes(open(backup, "rb").read())  # the app is back on the old store
    target = tmp_path / "new" / "qdrant"
    erased_id = next(iter(qdrant_points(target)))
    erase = memsync("forget", erased_id, "--erase", "--yes", "--json", config=app.config)
    assert erase.returncode == 0, erase.stderr
    assert erased_id in qdrant_points(target)  # erase does not write into a copy
    erased = json.loads(erase.stdout)["erased"]
    assert [
        c for c in erased["copies"] if c["kind"] == "migration-target" and c["where"] == str(target)
    ]
    assert "migration_source" not in erased  # the old store is the live one again: erased as such


def test_a_cleanup_killed_while_it_removes_the_old_directory_finishes_when_run_again(
    make_deployment, tmp_path
):
    """On tmpfs a directory lists its newest entry first: ``meta.json``, rewritten last."""
    app = file_deployment(make_deployment, window=False)
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)]).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        _cleanup_killed_and_run_again(app, mount / "qdrant", tmp_path)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _cleanup_killed_and_run_again(app, old: Path, tmp_path: Path) -> None:
    shutil.copytree(app.paths.qdrant, old)  # the old store on the tmpfs; the app's file names it
    shutil.rmtree(app.paths.qdrant)
    app.app_file.write_text(app.app_file.read_text().replace(str(app.paths.qdrant), str(old)))
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    assert memsync("migrate", "--to", new, "--switch", config=app.config).returncode == 0
    document = journal.load(app.paths.state)
    assert document is not None
    document["switched_at"] = utc.iso(datetime.now(UTC) - timedelta(days=8))
    journal.save(app.paths.state, document)
    meta = old / "meta.json"
    rewritten = meta.with_name("meta.json.new")  # as qdrant-client saves it: a new file
    rewritten.write_bytes(meta.read_bytes())
    rewritten.replace(meta)
    killed = subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat", "os:rmdir", "--nth", "1", "--",
         "migrate", "--cleanup", "--yes", "--config", str(app.config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    assert (old / "meta.json").is_file()  # killed in the middle: it still vouches for the rest
    again = memsync("migrate", "--cleanup", "--yes", config=app.config)
    assert again.returncode == 0, again.stderr
    assert not old.exists()
    assert (tmp_path / "new" / "qdrant").is_dir()


def test_a_bak_the_operator_kept_is_not_written_over(make_deployment, tmp_path):
    app = file_deployment(make_deployment, window=False)
    kept = app.app_file.with_name(app.app_file.name + ".bak")
    kept.write_text('{"an": "older config the operator kept"}\n', encoding="utf-8")
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    before = app.app_file.read_bytes()
    refused = memsync("migrate", "--to", new, "--switch", config=app.config)
    assert refused.returncode == 10, refused.stderr
    assert str(kept) in refused.stderr and "aside" in refused.stderr
    assert json.loads(kept.read_text()) == {"an": "older config the operator kept"}
    assert app.app_file.read_bytes() == before
    kept.write_bytes(before)  # a copy of the file as it is: written over with the same bytes
    assert memsync("migrate", "--to", new, "--switch", config=app.config).returncode == 0
    assert kept.read_bytes() == before
