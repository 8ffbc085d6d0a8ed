"""``memsync migrate`` into pgvector keeping the embedder, and while the app writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from memsync.demo import deployment as build
from tests.helpers import migrate_plugin as plugin
from tests.helpers.migrate import qdrant_points, scroll_points, target_config

ROOT = Path(__file__).resolve().parents[2]
ENTITY_ID = "00000000-0000-4000-8000-0000000000e1"


def _pg_rows(url: str, table: str) -> dict[str, tuple[dict, list[float]]]:
    import psycopg

    with psycopg.connect(url) as connection:
        rows = connection.execute(f"SELECT id::text, vector::text, payload FROM {table}").fetchall()
    return {i: (payload, json.loads(vector)) for i, vector, payload in rows}


def test_vectors_are_copied_as_they_are_into_pgvector_when_the_embedder_stays(
    make_deployment, pg_url, tmp_path, cli
):
    source = make_deployment(count=40)
    live_ids = source.seeded.live
    source.memory.entity_store.insert(
        vectors=[source.memory.embedding_model.embed("Lisbon", "add")],
        ids=[ENTITY_ID],
        payloads=[{"data": "Lisbon", "entity_type": "GPE", "linked_memory_ids": live_ids[:2],
                   "user_id": "alice"}],
    )  # fmt: skip
    new = target_config(
        source.paths, tmp_path / "new", embedder="memsync_hash", dims=384, pg_url=pg_url
    )
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    plan = report["plan"]
    assert plan["target"]["kind"] == "pgvector" and "table mem0" in plan["target"]["where"]
    assert plan["re_embed"] is False and plan["embedder_calls"] == 0
    assert report["copied"] == len(live_ids) + 1 and report["re_embedded"] == 0
    assert report["verified"] is True and report["check_after"]["errors"] == 0
    live = scroll_points(source.memory.vector_store.client)
    target = _pg_rows(pg_url, "mem0")
    assert set(target) == set(live) == set(live_ids)
    for memory_id, (payload, vector) in live.items():
        assert target[memory_id][0] == payload
        # qdrant-client's scroll returns the vectors it renormalised in memory (Cosine): equal
        # to the stored ones (which were copied) within a float32 ulp
        assert np.allclose(target[memory_id][1], vector, rtol=0, atol=1e-7)
    entities = _pg_rows(pg_url, "mem0_entities")
    assert entities[ENTITY_ID][0]["linked_memory_ids"] == live_ids[:2]
    assert cli("check", config=new).code == 0
    restarted = build.open_memory(build.Paths(tmp_path / "app", pg_url=pg_url), "memsync_hash")
    try:  # the app on the new store: its own text finds each memory first
        for memory_id in live_ids[:5]:
            item = restarted.get(memory_id)
            found = restarted.search(
                item["memory"], top_k=1, filters={"user_id": item["user_id"]}, show_expired=True
            )
            assert found["results"][0]["id"] == memory_id
    finally:
        build.close_memory(restarted)


def test_the_app_writing_during_the_copy_never_fails_and_what_it_wrote_is_reported(
    make_deployment, tmp_path
):
    source = make_deployment(count=40)
    source.close()  # the app (another process) owns the store from here on
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.live_writer", str(source.paths.root), "4"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert writer.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # some writes before the capture
    new = target_config(source.paths, tmp_path / "new", embedder="migrate_gated", dims=256)
    gate = tmp_path / "gate"
    migrate = subprocess.Popen(
        [sys.executable, "-m", "memsync", "migrate", "--to", str(new), "--json",
         "--config", str(source.config)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, plugin.GATE_ENV: str(gate)},
    )  # fmt: skip
    out, _ = writer.communicate(timeout=120)  # the app writes on while migrate copies
    stats = json.loads(out.strip().splitlines()[-1])
    assert migrate.poll() is None  # still copying: its first embedding waits for the gate
    gate.touch()
    result, errors = migrate.communicate(timeout=300)
    assert stats["failures"] == 0, stats["errors"][:5]
    assert stats["writes"] > 20
    assert migrate.returncode == 0, errors
    report = json.loads(result)
    assert report["verified"] is True
    not_copied = set(report["not_copied"])
    assert not_copied  # the app wrote during the copy
    live = qdrant_points(source.paths.qdrant)  # the writer has stopped: the store is free
    target = qdrant_points(tmp_path / "new" / "qdrant")
    assert set(live) - set(target) <= not_copied  # added since: reported, never lost silently
    assert set(target) - set(live) <= not_copied  # deleted since
    changed = {i for i in set(live) & set(target) if live[i][0] != target[i][0]}
    assert changed <= not_copied  # updated since
    assert set(target) - not_copied  # and the rest was copied as it is


def test_a_re_run_into_pgvector_after_the_app_deleted_and_updated_catches_the_table_up(
    make_deployment, pg_url, tmp_path, cli
):
    """mem0's pgvector insert fails on an id already there: a changed point is deleted first."""
    source = make_deployment(count=10)
    new = target_config(
        source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256, pg_url=pg_url
    )
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    deleted, updated = source.seeded.live[0], source.seeded.live[1]
    source.memory.delete(deleted)
    source.memory.update(updated, "moved to Porto last spring")
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["verified"] is True
    assert report["removed"] == [deleted] and report["replaced"] == [updated]  # nothing else
    target = _pg_rows(pg_url, "mem0")
    assert set(target) == set(scroll_points(source.memory.vector_store.client))
    assert target[updated][0]["data"] == "moved to Porto last spring"


def _index_definitions(url: str, table: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", (table,)
        ).fetchall()
    return dict(rows)


def _migrate(config: Path, new: Path, kill_at: str | None = None) -> subprocess.CompletedProcess:
    """``memsync migrate --to NEW --json`` in a subprocess; ``kill_at``: SIGKILLed at that step."""
    head = ["-m", "tests.breaker.killat", kill_at, "--"] if kill_at else ["-m", "memsync"]
    return subprocess.run(
        [sys.executable, *head, "migrate", "--to", str(new), "--json", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_rows_load_into_an_unindexed_table_and_mem0s_indexes_are_built_after(
    make_deployment, pg_url, tmp_path, cli
):
    source = make_deployment(count=40)
    new = target_config(
        source.paths, tmp_path / "new", embedder="memsync_hash", dims=384, pg_url=pg_url
    )
    result = cli("migrate", "--to", str(new), "--json", config=source.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["verified"] is True and report["copied"] == len(source.seeded.live)
    assert report["indexes_built_after"] == ["mem0_hnsw_idx", "mem0_text_lemmatized_idx"]
    found = _index_definitions(pg_url, "mem0")
    assert set(found) == {"mem0_pkey", "mem0_hnsw_idx", "mem0_text_lemmatized_idx"}
    assert "USING hnsw (vector vector_cosine_ops)" in found["mem0_hnsw_idx"]
    assert "USING gin" in found["mem0_text_lemmatized_idx"]


@pytest.mark.slow(reason="two migrate runs, each starting mem0 in the app's interpreter")
def test_a_load_killed_before_its_indexes_were_built_gets_them_when_run_again(
    make_deployment, pg_url, tmp_path
):
    source = make_deployment(count=40)
    source.close()
    new = target_config(
        source.paths, tmp_path / "new", embedder="memsync_hash", dims=384, pg_url=pg_url
    )
    killed = _migrate(source.config, new, kill_at="memsync.migrate.copy:_build_indexes")
    assert killed.returncode == -9, killed.stderr
    assert set(_index_definitions(pg_url, "mem0")) == {"mem0_pkey"}  # every row, no index yet
    again = _migrate(source.config, new)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["resumed"] is True and report["verified"] is True
    assert report["skipped"] == len(source.seeded.live) and report["indexes_built_after"] == []
    assert set(_index_definitions(pg_url, "mem0")) == {
        "mem0_pkey", "mem0_hnsw_idx", "mem0_text_lemmatized_idx"
    }  # fmt: skip
