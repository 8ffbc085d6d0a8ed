"""Breaker 7: a table of other column types round-trips exactly through a snapshot."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.helpers.pg import as_csv_snapshot
from tests.pg.test_restore_pgvector import memsync

ROWS = "SELECT id::text, vector::text, payload::text, extra FROM mem0 ORDER BY id::text"


def _rows(url: str) -> list[tuple]:
    with psycopg.connect(url) as connection:
        return connection.execute(ROWS).fetchall()


@pytest.mark.parametrize("kind", ["binary", "csv"])
def test_text_ids_json_payloads_an_extra_column_and_a_null_vector_restore_exactly(
    pg_deployment, kind
):
    url = pg_deployment.paths.pg_url
    pg_deployment.close()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ALTER TABLE mem0 ALTER COLUMN id TYPE text")
        connection.execute("ALTER TABLE mem0 ALTER COLUMN payload TYPE json USING payload::json")
        connection.execute("ALTER TABLE mem0 ADD COLUMN extra integer DEFAULT 7")
        connection.execute(
            'UPDATE mem0 SET payload = (\'{"z": 1,  "data": "sp\\u00e9cial \\"q\\"",\''
            " || substr(payload::text, 2))::json, extra = NULL WHERE id = (SELECT min(id) FROM mem0)"
        )
        connection.execute(
            "INSERT INTO mem0 (id, vector, payload, extra) SELECT 'Not-A-UUID', NULL, payload, 3 "
            "FROM mem0 LIMIT 1"
        )
    before = _rows(url)
    created = memsync(pg_deployment, "snapshot", "create", "--json")
    assert created.returncode in (0, 3), created.stderr  # 3: the odd row is a finding
    snapshot_id = json.loads(created.stdout)["id"]
    root = pg_deployment.paths.root / "snapshots" / snapshot_id
    files = sorted(p.name for p in (root / "pgvector").iterdir())
    assert "mem0.pgcopy" in files, files
    if kind == "csv":
        as_csv_snapshot(root, url)
    verified = memsync(pg_deployment, "snapshot", "verify", snapshot_id, "--json")
    codes = [f["code"] for f in json.loads(verified.stdout)["findings"] if f["severity"] == "error"]
    assert "point-undecodable" not in codes and "integrity-failed" not in codes, verified.stdout
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("UPDATE mem0 SET extra = 99, payload = '{}'::json")
    restored = memsync(pg_deployment, "restore", snapshot_id, "--force", "--json")
    assert restored.returncode in (0, 3), restored.stderr  # 3: check findings after
    assert _rows(url) == before
