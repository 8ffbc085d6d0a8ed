"""A snapshot records its vectors' embedder; restore refuses, and latest skips, another one.

Two real deployments of the same vector size (384) and different embedders (the tests'
``memsync_hash`` and the demo's MiniLM) share one snapshot directory, as one deployment's
snapshots from before and after ``memsync migrate`` changed its embedder do.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import timedelta

import pytest

from memsync.demo import deployment as build
from memsync.stores.snapshots import id_time
from tests.conftest import HASH


def _snapshot(cli, config) -> str:
    made = cli("snapshot", "create", "--json", config=config)
    assert made.code == 0, made.err
    snapshot_id = made.json()["id"]
    assert cli("snapshot", "verify", snapshot_id, config=config).code == 0
    time.sleep(1.1)  # snapshot ids have one-second resolution
    return snapshot_id


@pytest.fixture
def shared(make_deployment, tmp_path, cli):
    """(deployment, its snapshot id, the MiniLM deployment's newer snapshot id in the same directory)."""
    own = make_deployment(count=10)
    own.close()
    own_id = _snapshot(cli, own.config)
    paths = build.Paths(tmp_path / "minilm")
    config = build.write_memsync_config(paths, embedder="memsync_minilm")
    memory = build.open_memory(paths, "memsync_minilm")
    build.seed(memory, 5, batch=5)
    build.close_memory(memory)
    other_id = _snapshot(cli, config)
    shutil.copytree(paths.root / "snapshots" / other_id, own.paths.root / "snapshots" / other_id)
    return own, own_id, other_id


def test_a_new_snapshot_records_the_embedder_of_its_vectors(shared):
    own, own_id, other_id = shared
    directory = own.paths.root / "snapshots"
    recorded = {
        snapshot_id: json.loads((directory / snapshot_id / "manifest.json").read_text())
        for snapshot_id in (own_id, other_id)
    }
    assert recorded[own_id]["embedder"] == {"provider": HASH, "dims": 384, "model": None}
    assert recorded[other_id]["embedder"]["provider"] == "memsync_minilm"


def test_restore_refuses_a_snapshot_of_another_embedder_naming_both(shared, cli):
    own, _own_id, other_id = shared
    refused = cli("restore", other_id, "--force", "--dry-run", "--json", config=own.config)
    assert refused.code == 10
    error = json.loads(refused.err.strip().splitlines()[-1])
    assert (
        f"embedder memsync_minilm (384 dims) in the snapshot, {HASH} (384 dims) in the config"
        in error["message"]
    )
    assert (
        "--config OLD.toml restore ID --to DIR" in error["hint"]
        and "after the switch" in error["hint"]
    )


def test_restore_latest_skips_the_newer_snapshot_of_another_embedder(shared, cli):
    own, own_id, other_id = shared
    assert id_time(other_id) > id_time(own_id)
    latest = cli("restore", "latest", "--force", "--dry-run", "--json", config=own.config)
    assert latest.code == 0, latest.err
    assert latest.json()["snapshot_id"] == own_id


def test_restore_before_counts_the_snapshots_of_another_embedder_when_none_fits(shared, cli):
    own, own_id, other_id = shared
    shutil.rmtree(own.paths.root / "snapshots" / own_id)
    after = (id_time(other_id) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    chose = cli("restore", "--before", after, "--dry-run", config=own.config)
    assert chose.code == 11 and "1 of them of another embedder" in chose.err


def test_a_manifest_without_an_embedder_still_restores(shared, cli):
    own, own_id, _other_id = shared
    path = own.paths.root / "snapshots" / own_id / "manifest.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    del document["embedder"]  # as memsync before issue 14 wrote it
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    restored = cli("restore", own_id, "--force", "--dry-run", "--json", config=own.config)
    assert restored.code == 0, restored.err
    assert restored.json()["snapshot_id"] == own_id


def test_verify_judges_a_snapshot_of_another_vector_size_by_its_own(make_deployment, tmp_path, cli):
    """A snapshot from before a migration to 256 dimensions verifies ok under the new config.

    Judged by the config's size it was FAILED with dimension-mismatch, and its verified.json
    said so (``snapshot list``: verified "no"), though nothing in it is damaged.
    """
    from memsync.demo.providers import HASH256_DIMS, HASH256_EMBEDDER_PROVIDER

    own = make_deployment(count=5)
    own.close()
    paths = build.Paths(tmp_path / "hash256")
    config = build.write_memsync_config(
        paths, embedder=HASH256_EMBEDDER_PROVIDER, dims=HASH256_DIMS
    )
    memory = build.open_memory(paths, HASH256_EMBEDDER_PROVIDER, HASH256_DIMS)
    build.seed(memory, 5, batch=5)
    build.close_memory(memory)
    other_id = _snapshot(cli, config)
    shutil.copytree(paths.root / "snapshots" / other_id, own.paths.root / "snapshots" / other_id)
    verified = cli("snapshot", "verify", other_id, "--json", config=own.config)
    assert verified.code == 0, verified.out
    report = verified.json()
    assert report["ok"] and report["findings"] == []
    assert "256 dims" in report["other_embedder"] and "384 dims" in report["other_embedder"]
    recorded = json.loads((own.paths.root / "snapshots" / other_id / "verified.json").read_text())
    assert recorded["ok"] is True
    text = cli("snapshot", "verify", other_id, config=own.config)
    assert "restore refuses it here" in text.out
    refused = cli("restore", other_id, "--force", "--dry-run", "--json", config=own.config)
    assert refused.code == 10  # verified sound, still not this deployment's to restore
