"""Breaker 7: recover --user, restore --dry-run and migrate read binary, CSV and sealed snapshots."""

from __future__ import annotations

import json
import os

import psycopg
import pytest

from tests.helpers.pg import as_csv_snapshot
from tests.pg.test_restore_pgvector import memsync


def _rows_of(url: str, user: str) -> dict[str, tuple]:
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT id::text, vector::text, payload->>'data' FROM mem0 "
            "WHERE payload->>'user_id' = %s",
            (user,),
        ).fetchall()
    return {row[0]: row[1:] for row in rows}


@pytest.mark.parametrize("kind", ["binary", "csv", "encrypted"])
def test_recover_user_brings_back_rows_with_their_vectors(make_deployment, tmp_path, kind):
    extra = ""
    if kind == "encrypted":
        key = tmp_path / "k"
        key.write_text(os.urandom(32).hex())
        extra = f'encrypt_key_file = "{key}"\n'
    deployment = make_deployment(count=40, pg=True, extra_config=extra)
    url = deployment.paths.pg_url
    deployment.close()
    created = memsync(deployment, "snapshot", "create", "--json")
    assert created.returncode == 0, created.stderr
    snapshot_id = json.loads(created.stdout)["id"]
    if kind == "csv":
        as_csv_snapshot(deployment.paths.root / "snapshots" / snapshot_id, url)
    before = _rows_of(url, "chandra")
    assert before
    dry = memsync(deployment, "restore", snapshot_id, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stdout[-500:] + dry.stderr
    forgot = memsync(deployment, "forget", "--user", "chandra", "--yes", "--no-snapshot")
    assert forgot.returncode == 0, forgot.stderr
    assert _rows_of(url, "chandra") == {}
    back = memsync(deployment, "recover", "--user", "chandra", "--from", snapshot_id, "--json")
    assert back.returncode == 0, back.stdout[-800:] + back.stderr
    assert _rows_of(url, "chandra") == before


def test_migrate_from_pgvector_carries_every_memory(make_deployment, tmp_path, cli):
    from qdrant_client import QdrantClient

    from tests.helpers.migrate import target_config

    source = make_deployment(count=20, pg=True)
    url = source.paths.pg_url
    with psycopg.connect(url) as connection:
        texts = {
            row[0]: row[1]
            for row in connection.execute("SELECT id::text, payload->>'data' FROM mem0")
        }
    source.close()
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    migrated = memsync(source, "migrate", "--to", str(new), "--json")
    assert migrated.returncode == 0, migrated.stdout[-800:] + migrated.stderr
    client = QdrantClient(path=str(tmp_path / "new" / "qdrant"))
    try:
        points, _ = client.scroll("mem0", limit=10_000)
    finally:
        client.close()
    assert {str(p.id): p.payload.get("data") for p in points} == texts
