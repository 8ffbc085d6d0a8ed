"""An erased memory an older store brings back is erased again by reconcile, never re-recorded.

mem0ai 2.2.1's delete writes the point's text into its DELETE history row: reconcile deleting a
resurrected erased memory would put the erased text back into history.db (found by a new user
on pgvector: a ``pg_restore`` of a dump taken before ``forget --erase``). Both backends.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsync.demo import deployment as build
from memsync.demo import pg_faults


def _texts_of(deployment, user: str) -> dict[str, str]:
    listed = deployment.memory.get_all(filters={"user_id": user}, top_k=1000, show_expired=True)
    return {item["id"]: item["memory"] for item in listed["results"]}


def _holders(root: Path, texts: list[str]) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and any(t.encode() in p.read_bytes() for t in texts)
    )


@pytest.mark.parametrize("backend", ["embedded-qdrant", "pgvector"])
def test_reconcile_erases_again_what_an_older_store_brought_back(make_deployment, cli, backend):
    deployment = make_deployment(pg=backend == "pgvector")
    texts = _texts_of(deployment, "chandra")
    assert texts
    deployment.close()
    older = deployment.paths.root / "older"
    if backend == "pgvector":
        pg_faults.dump_table(deployment.paths, older)
    else:
        build.copy_qdrant(deployment.paths, older)
    erased = cli(
        "forget", "--user", "chandra", "--erase", "--yes", "--json", config=deployment.config
    )
    assert erased.code == 0, erased.err
    if backend == "pgvector":
        pg_faults.restore_table(deployment.paths, older)
    else:
        build.put_back_qdrant(deployment.paths, older)
    found = cli("check", "--json", config=deployment.config).json()
    back = {f["memory_id"] for f in found["findings"] if f["code"] == "resurrected-point"}
    assert back == set(texts)
    result = cli("reconcile", "--json", config=deployment.config)
    assert result.code == 0, result.out + result.err
    report = result.json()
    assert sorted(report["erased_again"]) == sorted(texts)
    assert report["safety_snapshot"] is not None
    assert report["check_after"]["errors"] == 0
    # neither history.db nor the safety snapshot (nor anything else memsync keeps) holds them
    holders = _holders(deployment.paths.root, list(texts.values()))
    assert [h for h in holders if not h.startswith("older")] == [], holders
    assert "erased_memories_deleted_again" in result.err
    assert json.loads(result.out)["counts"]["failed"] == 0
