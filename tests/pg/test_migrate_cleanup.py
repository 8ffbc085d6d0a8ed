"""``memsync migrate --cleanup``: the old store a switched migration kept, removed once due.

Each test runs a real ``memsync migrate`` copy of a real deployment, then writes what
``migrate --switch`` leaves (the journal in phase ``switched`` with ``switched_at``, the old
config in ``migrate-source.json`` through ``source_record.record_source``); memsync's own
config is then the new one, as after a switch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memsync import utc
from memsync.migrate import journal, source_record
from tests.helpers.holders import app_holding
from tests.helpers.migrate import target_config


@dataclass
class Switched:
    """A deployment migrated and switched: memsync's config is ``new``; the old store is kept."""

    source: Any  # the tests' Deployment (closed: the app runs on the target now)
    new: Path
    state: Path


def switch_as_migrate_does(source: Any, new: Path, cli: Any, days_ago: float) -> Switched:
    """Run the real copy, then record the switch ``days_ago`` days back (as --switch writes it)."""
    copied = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert copied.code == 0, copied.err
    source.close()  # the app stopped on the old store ...
    state = source.paths.state
    source_record.record_source(source.config, os.environ, state)
    document = journal.load(state)
    assert document is not None and document["phase"] == "verified"
    switched_at = datetime.now(UTC) - timedelta(days=days_ago)
    document.update(phase="switched", switched_at=utc.iso(switched_at))
    journal.save(state, document)
    return Switched(source=source, new=new, state=state)  # ... and runs on the target


@pytest.fixture
def switched(make_deployment, tmp_path, cli) -> Switched:
    """An embedded deployment migrated to a new embedded store and embedder, switched 8 days ago."""
    source = make_deployment(count=30)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    return switch_as_migrate_does(source, new, cli, days_ago=8)


def _sizes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_cleanup_removes_the_old_embedded_store_after_keep_source_days(switched, cli):
    old = switched.source.paths.qdrant
    size = _sizes(old)
    dry = cli("migrate", "--cleanup", "--dry-run", "--json", config=switched.new)
    assert dry.code == 0, dry.err
    planned = dry.json()["cleanup"]
    assert planned["where"] == str(old) and planned["kind"] == "embedded-qdrant"
    assert planned["size_bytes"] == size > 0 and planned["cleaned_at"] is None
    assert old.is_dir() and journal.load(switched.state)["phase"] == "switched"

    unconfirmed = cli("migrate", "--cleanup", config=switched.new)  # no terminal, no --yes
    assert unconfirmed.code == 2 and "--yes" in unconfirmed.err and old.is_dir()

    done = cli("migrate", "--cleanup", "--yes", config=switched.new)
    assert done.code == 0, done.err
    assert f"removed the old store {old}" in done.out
    assert not old.exists()
    recorded = journal.load(switched.state)
    assert recorded["phase"] == "cleaned" and utc.parse(recorded["cleaned_at"])
    assert not source_record.path_of(switched.state).exists()  # it may hold a secret
    assert switched.source.paths.history_db.is_file()  # shared with the new store
    assert cli("check", config=switched.new).code == 0  # the app's new store is whole

    again = cli("migrate", "--cleanup", "--json", config=switched.new)
    assert again.code == 0 and again.json()["cleanup"]["already_cleaned"] is True


def test_cleanup_is_refused_before_keep_source_days_have_passed(make_deployment, tmp_path, cli):
    source = make_deployment(count=10)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    state = switch_as_migrate_does(source, new, cli, days_ago=2).state
    due = utc.parse(journal.load(state)["switched_at"]) + timedelta(days=7)
    refused = cli("migrate", "--cleanup", "--yes", "--json", config=new)
    assert refused.code == 10
    error = json.loads(refused.err.strip().splitlines()[-1])
    assert f"kept until {utc.iso(due)}" in error["message"]
    assert "keep_source_days = 7" in error["message"] and "keep_source_days" in error["hint"]
    assert source.paths.qdrant.is_dir() and journal.load(state)["phase"] == "switched"


@pytest.mark.parametrize(
    ("phase", "expected"),
    [(None, "no migration is recorded"), ("verified", "in phase verified, not switched")],
    ids=["no-journal", "not-switched"],
)
def test_cleanup_is_refused_without_a_switched_migration(
    make_deployment, tmp_path, cli, phase, expected
):
    source = make_deployment(count=5)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    if phase is not None:
        assert cli("migrate", "--to", str(new), config=source.config).code == 0
    refused = cli("migrate", "--cleanup", "--yes", config=new)
    assert refused.code == 10 and expected in refused.err
    assert source.paths.qdrant.is_dir()


def test_cleanup_exits_12_and_removes_nothing_while_a_process_holds_the_old_store(switched, cli):
    old = switched.source.paths.qdrant
    with app_holding(old) as app:
        held = cli("migrate", "--cleanup", "--yes", config=switched.new)
        assert held.code == 12 and f"pid {app.pid}" in held.err
    assert old.is_dir() and journal.load(switched.state)["phase"] == "switched"


def test_cleanup_refuses_a_directory_holding_more_than_the_store(switched, cli):
    old = switched.source.paths.qdrant
    (old / "backup.tar").write_bytes(b"the operator's own file")
    refused = cli("migrate", "--cleanup", "--yes", config=switched.new)
    assert refused.code == 10 and "backup.tar is not an embedded Qdrant file" in refused.err
    assert (old / "meta.json").is_file() and journal.load(switched.state)["phase"] == "switched"


def test_cleanup_drops_the_old_pgvector_tables_in_one_go(make_deployment, tmp_path, cli):
    import psycopg

    source = make_deployment(count=20, pg=True)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    switched = switch_as_migrate_does(source, new, cli, days_ago=8)
    url = str(source.paths.pg_url)
    done = cli("migrate", "--cleanup", "--yes", "--json", config=new)
    assert done.code == 0, done.err
    cleanup = done.json()["cleanup"]
    assert cleanup["kind"] == "pgvector" and "table mem0" in cleanup["where"]
    assert cleanup["size_bytes"] > 0 and "password" not in cleanup["where"]
    with psycopg.connect(url) as connection:
        left = connection.execute(
            "SELECT to_regclass('mem0'), to_regclass('mem0_entities')"
        ).fetchone()
    assert left == (None, None)
    assert journal.load(switched.state)["phase"] == "cleaned"
    assert cli("check", config=new).code == 0


def test_a_new_migration_starts_afresh_after_a_cleanup(switched, tmp_path, cli):
    assert cli("migrate", "--cleanup", "--yes", config=switched.new).code == 0
    cleaned = journal.load(switched.state)
    newer = target_config(
        switched.source.paths, tmp_path / "newer", embedder="memsync_hash", dims=384
    )
    dry = cli("migrate", "--to", str(newer), "--dry-run", config=switched.new)
    assert dry.code == 0, dry.err
    assert journal.load(switched.state) == cleaned  # a dry run moves nothing aside
    done = cli("migrate", "--to", str(newer), "--json", config=switched.new)
    assert done.code == 0, done.err
    assert done.json()["resumed"] is False and done.json()["verified"] is True
    archived = switched.state / f"migrate-{cleaned['cleaned_at']}.json"
    assert json.loads(archived.read_text(encoding="utf-8")) == cleaned
    current = journal.load(switched.state)
    assert current["to"] == str(newer.resolve()) and current["phase"] == "verified"
