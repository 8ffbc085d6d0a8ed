"""Breaker 7: a sealed binary snapshot only in the bucket restores exactly."""

from __future__ import annotations

import json
import os
import shutil

import psycopg

from tests.conftest import s3_section
from tests.pg.test_restore_pgvector import memsync

QUERY = "SELECT id::text, vector::text, payload::text FROM mem0 ORDER BY id"


def test_a_sealed_binary_snapshot_from_the_bucket_restores_every_row(
    make_deployment, tmp_path, s3_endpoint, bucket
):
    key = tmp_path / "k"
    key.write_text(os.urandom(32).hex())
    extra = f'encrypt_key_file = "{key}"\n' + s3_section(s3_endpoint, bucket)
    deployment = make_deployment(count=20, pg=True, extra_config=extra)
    url = deployment.paths.pg_url
    deployment.close()
    created = memsync(deployment, "snapshot", "create", "--upload", "--json")
    assert created.returncode == 0, created.stderr
    snapshot_id = json.loads(created.stdout)["id"]
    root = deployment.paths.root / "snapshots" / snapshot_id
    sealed = [p.name for p in (root / "pgvector").iterdir()]
    assert any(n.startswith("mem0.pgcopy") for n in sealed), sealed
    assert b"PGCOPY" not in b"".join(p.read_bytes() for p in (root / "pgvector").iterdir())
    shutil.rmtree(root)
    with psycopg.connect(url) as connection:
        before = connection.execute(QUERY).fetchall()
        connection.execute("DELETE FROM mem0")
        connection.commit()
    target = f"s3://{bucket}/memsync/test/{snapshot_id}"
    verified = memsync(deployment, "snapshot", "verify", target, "--json")
    assert verified.returncode == 0, verified.stdout[-600:] + verified.stderr
    restored = memsync(deployment, "restore", target, "--force", "--json")
    assert restored.returncode == 0, restored.stdout[-600:] + restored.stderr
    with psycopg.connect(url) as connection:
        assert connection.execute(QUERY).fetchall() == before


def test_purge_memory_rewrites_a_sealed_binary_snapshot_that_then_restores_without_them(
    make_deployment, tmp_path
):
    key = tmp_path / "k"
    key.write_text(os.urandom(32).hex())
    deployment = make_deployment(count=40, pg=True, extra_config=f'encrypt_key_file = "{key}"\n')
    url = deployment.paths.pg_url
    deployment.close()
    created = memsync(deployment, "snapshot", "create", "--json")
    assert created.returncode == 0, created.stderr
    snapshot_id = json.loads(created.stdout)["id"]
    with psycopg.connect(url) as connection:
        everyone = connection.execute("SELECT count(*) FROM mem0").fetchone()[0]
        theirs = connection.execute(
            "SELECT count(*) FROM mem0 WHERE payload->>'user_id' = 'chandra'"
        ).fetchone()[0]
    assert theirs
    erased = memsync(deployment, "forget", "--user", "chandra", "--erase", "--yes", "--json")
    assert erased.returncode == 0, erased.stderr
    purged = memsync(deployment, "snapshot", "purge-memory", "--user", "chandra", "--yes")
    assert purged.returncode == 0, purged.stdout + purged.stderr
    verified = memsync(deployment, "snapshot", "verify", snapshot_id)
    assert verified.returncode == 0, verified.stdout[-600:] + verified.stderr
    restored = memsync(deployment, "restore", snapshot_id, "--force", "--json")
    assert restored.returncode == 0, restored.stdout[-600:] + restored.stderr
    with psycopg.connect(url) as connection:
        left = connection.execute(
            "SELECT count(*) FROM mem0 WHERE payload->>'user_id' = 'chandra'"
        ).fetchone()[0]
        total = connection.execute("SELECT count(*) FROM mem0").fetchone()[0]
    assert (left, total) == (0, everyone - theirs)
