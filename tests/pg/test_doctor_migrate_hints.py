"""check and doctor point the way to ``memsync migrate`` on a real deployment whose embedder changed.

A real mem0 deployment written by one embedder (384 dimensions), then the app switched to
another (64) with the same collection: mem0 accepts the old collection at start and its next
write fails. ``memsync check`` and ``memsync doctor`` (in process, ``--json``) must say the
embedder changed and name ``memsync migrate --to NEW.toml``, dry-run first; an empty collection
of the wrong size must not. Doctor's ``store-size`` counts the embedded store's points.
"""

from __future__ import annotations

from typing import Any

import pytest

from memsync.demo import deployment as build
from memsync.demo import pg_faults
from tests.conftest import HASH

MIGRATE = "memsync migrate --to NEW.toml --dry-run"
KEY = "mem0.vector_store.config.embedding_model_dims"


def switch_embedder(deployment: Any, dims: int) -> None:
    """The app's embedder changed to one of ``dims`` dimensions; memsync's config follows it."""
    deployment.close()
    build.write_memsync_config(deployment.paths, embedder=HASH, dims=dims)


def by_code(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for result in report["results"]:
        found.setdefault(result["code"], []).append(result)
    return found


def test_a_switched_embedder_fails_the_apps_writes_and_check_names_migrate(make_deployment, cli):
    deployment = make_deployment(count=12)
    stored = len(deployment.seeded.live)
    deployment.close()
    switched = pg_faults.memory_with_dims(deployment.paths, 64)  # the app on its new embedder
    try:
        with pytest.raises(ValueError, match="expected dim: 384, got 64"):  # qdrant-client 1.20
            switched.add("now uses the new embedder", user_id="alice", infer=False)
    finally:
        build.close_memory(switched)
    switch_embedder(deployment, 64)
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 3
    (found,) = [
        f
        for f in result.json()["findings"]
        if f["code"] == "dimension-mismatch" and f["memory_id"] is None
    ]
    assert (found["collection"], found["expected"], found["observed"]) == ("mem0", 64, 384)
    assert f"holds {stored} points of size 384" in found["message"]
    assert MIGRATE in found["fix"] and f"{KEY} = 384" in found["fix"]
    text = cli("check", config=deployment.config)
    assert MIGRATE in text.out  # the text report carries the same fix


def test_doctor_names_migrate_and_counts_the_embedded_store(make_deployment, cli):
    deployment = make_deployment(count=12)
    stored = len(deployment.seeded.live)
    switch_embedder(deployment, 64)
    result = cli("doctor", "--json", config=deployment.config)
    assert result.code == 3
    results = by_code(result.json())
    (checked,) = results["check"]
    assert checked["status"] == "error" and "dimension-mismatch" in checked["message"]
    assert MIGRATE in checked["fix"]
    params = {r["path"].split("/collection/")[-1]: r for r in results["collection-params"]}
    assert params["mem0/storage.sqlite"]["status"] == "error"
    assert MIGRATE in params["mem0/storage.sqlite"]["fix"]
    (size,) = results["store-size"]
    assert (size["status"], size["path"]) == ("ok", str(deployment.paths.qdrant))
    assert size["message"].startswith(f"{stored} points in the embedded Qdrant store")


def test_an_empty_collection_of_another_size_does_not_name_migrate(make_deployment, cli):
    deployment = make_deployment(count=0)  # mem0 made the collection; nothing was written
    switch_embedder(deployment, 64)
    found = [
        f
        for f in cli("check", "--json", config=deployment.config).json()["findings"]
        if f["code"] == "dimension-mismatch"
    ]
    assert [(f["collection"], f["expected"], f["observed"]) for f in found] == [("mem0", 64, 384)]
    assert "migrate" not in found[0]["fix"]
    doctor = by_code(cli("doctor", "--json", config=deployment.config).json())
    assert "migrate" not in doctor["check"][0]["fix"]
    assert doctor["store-size"][0]["message"].startswith("0 points in the embedded Qdrant store")


def test_on_pgvector_check_and_doctor_name_migrate_and_store_size_says_nothing(
    make_deployment, cli
):
    deployment = make_deployment(count=12, pg=True)  # table made as vector(384)
    stored = len(deployment.seeded.live)
    switch_embedder(deployment, 64)
    (found,) = [
        f
        for f in cli("check", "--json", config=deployment.config).json()["findings"]
        if f["code"] == "dimension-mismatch"
    ]
    assert f"holds {stored} points of size 384" in found["message"] and MIGRATE in found["fix"]
    result = cli("doctor", "--json", config=deployment.config)
    results = by_code(result.json())
    assert result.code == 3 and MIGRATE in results["check"][0]["fix"]
    assert results["pg-dimension"][0]["status"] == "error"
    assert "store-size" not in results  # a server store: qdrant-client's local mode is not in play
