"""Breaker 7: a valid .pgcopy whose schema.json column types were altered (a tamperer)."""

from __future__ import annotations

import json

import pytest

from tests.breaker.test_pgcopy_b7_hostile import outcomes, snapshot_root
from tests.breaker.test_pgvector_breaks import tamper
from tests.pg.test_restore_pgvector import ids, memsync, tables


def _retype(column: str, new: str):
    def edit(document):
        for entry in document["tables"]["mem0"]["columns"]:
            if entry["name"] == column:
                entry["type"] = new

    edit.__name__ = f"{column}_as_{new.split('(')[0]}"
    return edit


EDITS = [
    _retype("id", "text"),
    _retype("payload", "json"),
]


@pytest.mark.parametrize("edit", EDITS, ids=[e.__name__ for e in EDITS])
def test_a_pgcopy_read_with_altered_column_types_fails_verify_and_restore(pg_deployment, edit):
    snapshot_id, _root = snapshot_root(pg_deployment)
    tamper(pg_deployment, snapshot_id, edit)
    assert outcomes(pg_deployment, snapshot_id) == []


def test_verify_fails_a_pgcopy_whose_vectors_disagree_with_schema_json_vector_n(pg_deployment):
    url = pg_deployment.paths.pg_url
    snapshot_id, _root = snapshot_root(pg_deployment)
    tamper(pg_deployment, snapshot_id, _retype("vector", "vector(383)"))
    before_tables, before_ids = tables(url), ids(url, "mem0")
    restored = memsync(pg_deployment, "restore", snapshot_id, "--force")
    assert restored.returncode == 11 and "expected 383 dimensions" in restored.stderr
    assert tables(url) == before_tables and ids(url, "mem0") == before_ids
    verified = memsync(pg_deployment, "snapshot", "verify", snapshot_id, "--json")
    assert verified.returncode == 3, verified.stdout[-400:]
    bad = [f for f in json.loads(verified.stdout)["findings"] if f["severity"] == "error"]
    assert any("mem0.pgcopy" in (f["message"] or "") for f in bad), bad
