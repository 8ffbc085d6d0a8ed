"""``forget --erase`` after a migration's switch: the old store, kept until cleanup, is erased too.

The switched state is written as in test_migrate_cleanup (a real copy, then the journal and
the source record as ``migrate --switch`` leaves them); memsync's config is the new one.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.holders import app_holding
from tests.helpers.migrate import qdrant_points, target_config
from tests.pg.test_migrate_cleanup import switch_as_migrate_does


def _file_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _switched(make_deployment, tmp_path, cli):
    source = make_deployment(count=20)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    switched = switch_as_migrate_does(source, new, cli, days_ago=1)
    old = source.paths.qdrant
    memory_id = source.seeded.live[0]
    text = qdrant_points(old)[memory_id][0]["data"]
    assert text.encode() in _file_bytes(old)
    return switched, old, memory_id, text


def test_erase_after_a_switch_removes_the_points_from_the_old_store_too(
    make_deployment, tmp_path, cli
):
    switched, old, memory_id, text = _switched(make_deployment, tmp_path, cli)
    before = set(qdrant_points(old))
    result = cli("forget", memory_id, "--erase", "--yes", "--json", config=switched.new)
    assert result.code == 0, result.err
    erased = result.json()["erased"]
    assert erased["migration_source"]["where"] == str(old)
    assert erased["migration_source"]["erased"] >= 1 and erased["migration_source"]["holds"] == "no"
    assert memory_id not in qdrant_points(old)
    assert text.encode() not in _file_bytes(old)  # rewritten: no free page keeps it
    assert set(qdrant_points(old)) == before - {memory_id}  # the others stay until the cleanup
    # the journal's target is the live store now: not listed as a copy left behind
    assert not [c for c in erased["copies"] if c["kind"] == "migration-target"]
    text_report = cli("forget", memory_id, "--erase", "--yes", config=switched.new)
    assert f"migration-source {old}: 0 stored points erased" in text_report.out  # idempotent


def test_erase_after_a_switch_reports_a_held_old_store_as_not_erased(
    make_deployment, tmp_path, cli
):
    switched, old, memory_id, _text = _switched(make_deployment, tmp_path, cli)
    with app_holding(old) as app:
        result = cli("forget", memory_id, "--erase", "--yes", "--json", config=switched.new)
    assert result.code == 0, result.err  # the live deployment's erasure is done
    left = result.json()["erased"]["migration_source"]
    assert left["erased"] is None and left["holds"] == "yes"
    assert f"pid {app.pid}" in left["why"] and "stop that process" in left["remove"]
    assert memory_id in qdrant_points(old)
