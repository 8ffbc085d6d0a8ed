"""Snapshots taken before a switch to the other backend: nothing pretends to handle them.

After ``migrate --switch`` from embedded Qdrant to pgvector, the snapshots of the embedded
store (the one the switch pinned among them) cannot be read or rewritten by the pgvector
config. ``restore --to DIR`` refuses them (exit 10; it crashed with exit 1), and an erasure's
``snapshot purge-memory`` says they were not rewritten (exit 11; it said it rewrote them and
left the erased text in their files). With the config as it was before the switch, both work.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.migrate import target_config
from tests.helpers.switching import file_deployment, memsync


def _files_hold(root: Path, text: str) -> bool:
    return any(text.encode() in p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_embedded_snapshots_after_a_switch_to_pgvector(make_deployment, pg_url, tmp_path):
    app = file_deployment(make_deployment, window=False)
    new = target_config(
        app.paths, tmp_path / "new", embedder="memsync_hash", dims=384, pg_url=pg_url
    )
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    switched = memsync("migrate", "--to", new, "--switch", "--json", config=app.config)
    assert switched.returncode == 0, switched.stderr
    snapshot = json.loads(switched.stdout)["switch"]["snapshot"]
    old = tmp_path / "old.toml"  # memsync's config as it was: the app's .bak
    backup = json.loads(switched.stdout)["switch"]["app_config_backup"]
    old.write_text(app.config.read_text().replace(str(app.app_file), backup), "utf-8")

    copy = tmp_path / "copy"
    refused = memsync("restore", snapshot, "--to", copy, config=app.config)
    assert refused.returncode == 10, refused.stderr
    assert "embedded Qdrant" in refused.stderr and "--config OLD.toml" in refused.stderr
    assert not copy.exists()
    copied = memsync("restore", snapshot, "--to", copy, config=old)
    assert copied.returncode == 0, copied.stderr

    snapshot_dir = app.paths.root / "snapshots" / snapshot
    source = json.loads(app.app_file.with_name(app.app_file.name + ".bak").read_text())
    assert source["vector_store"]["provider"] == "qdrant"
    memory_id, text = _one_memory(snapshot_dir)
    erased = memsync("forget", memory_id, "--erase", "--yes", "--json", config=app.config)
    assert erased.returncode == 0, erased.stderr
    listed = [c for c in json.loads(erased.stdout)["erased"]["copies"] if c.get("snapshot_id")]
    assert any("--config OLD.toml" in c["remove"] for c in listed)
    purge = memsync("snapshot", "purge-memory", memory_id, "--yes", config=app.config)
    assert purge.returncode == 11, purge.stderr
    assert snapshot in purge.stderr and "not rewritten" in purge.stderr
    assert _files_hold(snapshot_dir / "qdrant", text)  # nothing pretended
    purged = memsync("snapshot", "purge-memory", memory_id, "--yes", config=old)
    assert purged.returncode == 0, purged.stderr
    assert not _files_hold(snapshot_dir, text)


def _one_memory(snapshot_dir: Path) -> tuple[str, str]:
    """A memory id and its text from the snapshot's embedded Qdrant points."""
    from tests.helpers.migrate import qdrant_points

    points = qdrant_points(snapshot_dir / "qdrant")
    memory_id = sorted(points)[0]
    return memory_id, points[memory_id][0]["data"]
