"""A migration's whole life through the real commands: copy, switch, erase, restore, cleanup.

The app is stopped (nothing holds the store, so the switch needs no window); its mem0 config
lives in a JSON file memsync's config names. After the real ``--switch`` the only thing made
up is time: the journal's ``switched_at`` is moved 8 days back, as if the week had passed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from memsync import utc
from memsync.migrate import journal
from tests.helpers.migrate import qdrant_points, target_config
from tests.helpers.switching import file_deployment, memsync


@pytest.mark.slow(
    reason="a migration's whole life: copy, switch (app stopped and started), erase, restore guard, cleanup"
)
def test_switch_then_erase_then_restore_guard_then_cleanup(make_deployment, tmp_path):
    app = file_deployment(make_deployment, window=False)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    old_store, new_store = app.paths.qdrant, tmp_path / "new" / "qdrant"
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    switched = memsync("migrate", "--to", new, "--switch", "--json", config=app.config)
    assert switched.returncode == 0, switched.stderr
    switch = json.loads(switched.stdout)["switch"]
    assert switch["switched"] is True and switch["route"] is None  # the app was not running
    written = json.loads(app.app_file.read_text())
    assert written["vector_store"]["config"]["path"] == str(new_store)
    assert memsync("check", config=app.config).returncode == 0  # memsync follows the file

    # An erasure after the switch reaches the old store, kept until the cleanup.
    erased_id = next(iter(qdrant_points(old_store)))
    erase = memsync("forget", erased_id, "--erase", "--yes", "--json", config=app.config)
    assert erase.returncode == 0, erase.stderr
    assert json.loads(erase.stdout)["erased"]["migration_source"]["where"] == str(old_store)
    assert erased_id not in qdrant_points(old_store)
    assert erased_id not in qdrant_points(new_store)

    # The snapshot taken before the switch holds 384-d memsync_hash vectors: refused for 256-d.
    refused = memsync("restore", switch["snapshot"], "--dry-run", config=app.config)
    assert refused.returncode == 10, refused.stderr
    assert "memsync_hash" in refused.stderr and "memsync_hash256" in refused.stderr

    # Another migration waits for the cleanup, and says so.
    other = target_config(app.paths, tmp_path / "other", embedder="memsync_hash", dims=384)
    waiting = memsync("migrate", "--to", other, "--dry-run", config=app.config)
    assert waiting.returncode == 10 and "memsync migrate --cleanup" in waiting.stderr

    # Not due yet; then a week later the old store goes, the new one stays clean.
    early = memsync("migrate", "--cleanup", "--yes", config=app.config)
    assert early.returncode == 10 and "kept until" in early.stderr and old_store.is_dir()
    document = journal.load(app.paths.state)
    assert document is not None and document["phase"] == "switched"
    document["switched_at"] = utc.iso(datetime.now(UTC) - timedelta(days=8))
    journal.save(app.paths.state, document)
    cleaned = memsync("migrate", "--cleanup", "--yes", "--json", config=app.config)
    assert cleaned.returncode == 0, cleaned.stderr
    assert json.loads(cleaned.stdout)["cleanup"]["where"] == str(old_store)
    assert not old_store.exists() and new_store.is_dir()
    kept = json.loads(cleaned.stdout)["cleanup"]["app_config_backup"]  # out of a later switch's way
    assert kept.startswith(str(app.app_file) + ".bak-") and json.loads(open(kept).read())
    assert not app.app_file.with_name(app.app_file.name + ".bak").exists()
    assert not (app.paths.state / "migrate-source.json").exists()
    assert memsync("check", config=app.config).returncode == 0
    # A switch to another config is told to copy first (the cleaned journal is no obstacle).
    again = memsync("migrate", "--to", other, "--switch", "--dry-run", config=app.config)
    assert again.returncode == 10 and f"run memsync migrate --to {other} first" in again.stderr
    assert memsync("migrate", "--to", other, "--dry-run", config=app.config).returncode == 0
