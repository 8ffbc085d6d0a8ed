"""pgvector foundations: a real mem0 deployment on PostgreSQL, checked and snapshotted."""

from __future__ import annotations

import json

import psycopg


def test_check_reads_a_pgvector_deployment_as_it_reads_embedded_qdrant(pg_deployment, cli):
    result = cli("check", "--json", config=pg_deployment.config)
    report = result.json()
    assert result.code == 0, result.out + result.err
    assert report["backend"] == "pgvector"
    assert report["counts"]["points"] == len(pg_deployment.seeded.live)
    assert report["counts"]["errors"] == 0


def test_a_point_deleted_by_hand_in_postgres_is_a_finding(pg_deployment, cli):
    victim = pg_deployment.seeded.live[0]
    with psycopg.connect(pg_deployment.paths.pg_url, autocommit=True) as connection:
        connection.execute("DELETE FROM mem0 WHERE id = %s", (victim,))
    report = cli("check", "--json", config=pg_deployment.config).json()
    codes = {(f["code"], f.get("memory_id")) for f in report["findings"]}
    assert ("missing-point", victim) in codes, json.dumps(report["findings"])[:2000]


def test_snapshot_of_a_pgvector_deployment_verifies(pg_deployment, cli):
    created = cli("snapshot", "create", "--json", config=pg_deployment.config)
    assert created.code == 0, created.out + created.err
    document = created.json()
    snapshot_id = document["id"]
    verified = cli("snapshot", "verify", snapshot_id, "--json", config=pg_deployment.config)
    assert verified.code == 0, verified.out + verified.err
    manifest = json.loads(
        (pg_deployment.paths.root / "snapshots" / snapshot_id / "manifest.json").read_text()
    )
    assert manifest["mode"] == "pgvector"
    assert manifest["versions"]["pgvector"].startswith("0.")
    assert {"pgvector/schema.json", "pgvector/mem0.pgcopy"} <= {
        f["path"] for f in manifest["files"]
    }
