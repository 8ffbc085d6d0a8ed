"""``memsync migrate`` from embedded Qdrant to a new embedded Qdrant, with a new embedder.

The source is a real deployment on the demo's MiniLM embedder (384 dimensions) whose app keeps
its Memory open (it holds the store) throughout; the target a new directory under the tests'
``memsync_hash256`` embedder (256 dimensions).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsync.demo import deployment as build
from tests.helpers.migrate import entity_links, qdrant_points, scroll_points, target_config
from tests.process.test_cli import fingerprint

ENTITY_IDS = ["00000000-0000-4000-8000-0000000000e1", "00000000-0000-4000-8000-0000000000e2"]


@pytest.fixture
def minilm_app(tmp_path: Path) -> Any:
    """A seeded MiniLM deployment with two entities; its app's Memory stays open."""
    paths = build.Paths(tmp_path / "dep")
    config = build.write_memsync_config(paths, embedder="memsync_minilm")
    memory = build.open_memory(paths, "memsync_minilm")
    seeded = build.seed(memory, 30, batch=5)
    memory.entity_store.insert(
        vectors=[
            memory.embedding_model.embed("Lisbon", "add"),
            memory.embedding_model.embed("tea", "add"),
        ],
        ids=ENTITY_IDS,
        payloads=[
            {
                "data": "Lisbon",
                "entity_type": "GPE",
                "linked_memory_ids": seeded.live[:2],
                "user_id": "alice",
            },
            {
                "data": "tea",
                "entity_type": "PRODUCT",
                "linked_memory_ids": [seeded.live[2]],
                "user_id": "bob",
            },
        ],
    )
    yield paths, config, memory, seeded
    build.close_memory(memory)


def test_dry_run_plans_the_re_embedding_and_creates_nothing_when_the_embedder_changes(
    minilm_app, tmp_path, cli
):
    paths, config, _memory, seeded = minilm_app
    new = target_config(paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    before = fingerprint(paths.root)
    result = cli("migrate", "--to", str(new), "--dry-run", "--json", config=config)
    assert result.code == 0, result.err
    plan = result.json()["plan"]
    assert (plan["memories"], plan["entities"], plan["re_embed"]) == (len(seeded.live), 2, True)
    assert plan["embedder_calls"] == plan["re_embedded_points"] == len(seeded.live) + 2
    assert plan["source"]["dims"] == 384 and plan["target"]["dims"] == 256
    assert plan["target"]["where"] == str(tmp_path / "new" / "qdrant")
    assert plan["batches"] == 2 and plan["disk_bytes"] > (len(seeded.live) + 2) * 256 * 4
    assert not (tmp_path / "new" / "qdrant").exists()
    assert not (paths.state / "migrate.json").exists()
    assert fingerprint(paths.root) == before


def test_every_memory_is_re_embedded_with_its_id_and_payload_when_the_embedder_changes(
    minilm_app, tmp_path, cli
):
    paths, config, memory, seeded = minilm_app
    new = target_config(paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    before = fingerprint(paths.root)
    result = cli("migrate", "--to", str(new), "--batch-size", "7", "--json", config=config)
    assert result.code == 0, result.err
    assert fingerprint(paths.root) == before  # the source and history.db: not a byte changed
    report = result.json()
    assert report["verified"] is True and report["differences"] == []
    assert report["copied"] == report["re_embedded"] == len(seeded.live) + 2
    assert report["search_sampled"] == 20 and report["not_copied"] == []
    assert report["check_after"]["errors"] == 0
    source = scroll_points(memory.vector_store.client)
    target = qdrant_points(tmp_path / "new" / "qdrant")
    assert set(target) == set(source) == set(seeded.live)
    assert all(target[i][0] == source[i][0] for i in source)  # every payload key
    assert {len(vector) for _payload, vector in target.values()} == {256}
    entities = qdrant_points(tmp_path / "new" / "qdrant", "mem0_entities")
    assert {i: p["linked_memory_ids"] for i, (p, _v) in entities.items()} == entity_links(
        memory, ENTITY_IDS
    )
    journal = json.loads((paths.state / "migrate.json").read_text())
    assert journal["phase"] == "verified" and journal["batches_done"] == 6  # 30/7 + 2/7
    assert cli("check", config=new).code == 0


def test_the_new_store_answers_mem0_searches_with_the_new_embedder(minilm_app, tmp_path, cli):
    paths, config, _memory, seeded = minilm_app
    new = target_config(paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    assert cli("migrate", "--to", str(new), config=config).code == 0
    from mem0 import Memory

    import memsync.demo.providers  # noqa: F401 - registers memsync_hash256

    settings = build.mem0_config(paths, "memsync_hash256", 256)
    settings["vector_store"]["config"]["path"] = str(tmp_path / "new" / "qdrant")
    app = Memory.from_config(settings)  # the app restarted on the new config
    try:
        for memory_id in seeded.live[:5]:
            item = app.get(memory_id)
            found = app.search(
                item["memory"], top_k=1, filters={"user_id": item["user_id"]}, show_expired=True
            )
            assert found["results"][0]["memory"] == item["memory"]
    finally:
        build.close_memory(app)


def test_migrate_is_refused_when_the_target_already_holds_data(minilm_app, tmp_path, cli):
    paths, config, _memory, _seeded = minilm_app
    new = target_config(paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    (tmp_path / "new" / "qdrant").mkdir(parents=True)
    (tmp_path / "new" / "qdrant" / "notes.txt").write_text("someone's")
    result = cli("migrate", "--to", str(new), "--json", config=config)
    assert result.code == 10 and result.out == ""
    error = json.loads(result.err.strip().splitlines()[-1])
    assert (
        "already exists or holds data" in error["message"]
        and str(tmp_path / "new") in error["message"]
    )
    assert (tmp_path / "new" / "qdrant" / "notes.txt").read_text() == "someone's"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("same", "nothing to migrate"),
        ("live-dir", "is the live store"),
        ("history", "history.db"),
    ],
    ids=["nothing-differs", "target-is-the-live-store", "history-differs"],
)
def test_migrate_is_refused_with_one_line_when_the_target_is_not_a_new_store(
    minilm_app, tmp_path, cli, change, expected
):
    paths, config, _memory, _seeded = minilm_app
    if change == "same":
        new = config
    elif change == "live-dir":
        new = target_config(paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
        new.write_text(new.read_text().replace(str(tmp_path / "new" / "qdrant"), str(paths.qdrant)))
    else:
        new = target_config(
            paths,
            tmp_path / "new",
            embedder="memsync_hash256",
            dims=256,
            history=tmp_path / "other-history.db",
        )
    result = cli("migrate", "--to", str(new), config=config)
    assert result.code == 10 and expected in result.err
    assert len(result.err.strip().splitlines()) <= 2  # the message and its hint
    assert not (paths.state / "migrate.json").exists()


def test_a_dry_run_builds_the_new_embedder_and_names_what_mem0_rejects(minilm_app, tmp_path, cli):
    # A new user gave the offline hash embedder a config key: the dry run passed, the real
    # run failed with "cannot be built (ValidationError)" and nothing said why.
    paths, config, _memory, _seeded = minilm_app
    new = target_config(paths, tmp_path / "new", embedder="memsync_hash", dims=256)
    new.write_text(
        new.read_text(encoding="utf-8") + "\n[mem0.embedder.config]\nembedding_dims = 256\n",
        encoding="utf-8",
    )
    for flags in (["--dry-run"], []):
        result = cli("migrate", "--to", str(new), *flags, config=config)
        assert result.code == 10, result.err
        assert "Unsupported embedding provider: memsync_hash" in result.err, result.err
        assert str(new) in result.err
    assert not (tmp_path / "new" / "qdrant").exists()
    assert not (paths.state / "migrate.json").exists()


def test_mem0s_warnings_about_packages_only_the_apps_search_uses_stay_off_stderr(
    minilm_app, tmp_path
):
    # A new user read "fastembed not installed ..." and "Failed to load spaCy ..." on every
    # migrate as failures (mem0ai 2.2.1 logs them when memsync writes through it).
    paths, config, _memory, _seeded = minilm_app
    new = target_config(paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    done = subprocess.run(
        [sys.executable, "-m", "memsync", "migrate", "--to", str(new), "--config", str(config)],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "migrate: verified" in done.stdout
    assert "fastembed" not in done.stderr and "spaCy" not in done.stderr, done.stderr


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_a_pgvector_target_over_hnsws_2000_dimensions_is_refused_before_any_journal(
    deployment, tmp_path, cli, dry_run
):
    # mem0 creates its HNSW index at every start, and pgvector's takes at most 2,000
    # dimensions: the app could never start on this table. Refused before the target's
    # server is touched (this one does not exist) and before any journal.
    new = target_config(
        deployment.paths, tmp_path / "new", embedder="memsync_hash", dims=3072,
        pg_url="postgresql://memsync@127.0.0.1:1/nowhere",
    )  # fmt: skip
    result = cli("migrate", "--to", str(new), *(["--dry-run"] if dry_run else []),
                 config=deployment.config)  # fmt: skip
    assert result.code == 10, result.err
    assert "3072-dimension vectors with an HNSW index" in result.err
    assert "at most 2000" in result.err and "hnsw = false" in result.err
    assert not (deployment.paths.state / "migrate.json").exists()
