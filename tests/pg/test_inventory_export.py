"""The inventory-only export (check's capture): vector sizes instead of vector values."""

from __future__ import annotations

import json
import os

import psycopg
import pytest

from memsync.config import load
from memsync.errors import UnavailableError
from memsync.stores.backends import vector_store_for
from memsync.stores.pgvector import export, rows


def test_an_inventory_export_reads_as_the_full_export_without_the_vectors(pg_deployment, tmp_path):
    with psycopg.connect(pg_deployment.paths.pg_url, autocommit=True) as connection:
        nulled = connection.execute(
            "UPDATE mem0 SET vector = NULL WHERE id = %s RETURNING id::text",
            (pg_deployment.seeded.live[0],),
        ).fetchone()[0]
    store = vector_store_for(load(pg_deployment.config, os.environ))
    full = store.capture(tmp_path / "full")
    light = store.capture(tmp_path / "light", vectors=False)

    assert store.read_points(light) == store.read_points(full)
    points = store.read_points(light)
    assert points[nulled].vector_size is None
    assert {p.vector_size for i, p in points.items() if i != nulled} == {384}
    assert store.read_entities(light) == store.read_entities(full)
    table = export.read_schema(light.root)["tables"]["mem0"]
    assert table["vectors"] is False
    assert export.read_schema(full.root)["tables"]["mem0"]["vectors"] is True
    assert table["rows"] == len(points)
    assert light.copies["mem0"].size_bytes * 4 < full.copies["mem0"].size_bytes
    assert store.check_copy(light) == {"mem0.csv": "ok"}
    header = (light.root / "mem0.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "id,vector_dims,payload"


def test_a_vector_is_never_read_from_an_inventory_export(pg_deployment, tmp_path):
    store = vector_store_for(load(pg_deployment.config, os.environ))
    light = store.capture(tmp_path / "light", vectors=False)
    memory_id = pg_deployment.seeded.live[1]
    with pytest.raises(UnavailableError, match="vector sizes only"):
        store.find_point(light.root, "mem0", memory_id)
    full = store.capture(tmp_path / "full")
    found = store.find_point(full.root, "mem0", memory_id)
    assert found is not None and len(found.vector or []) == 384


def test_a_damaged_vector_size_names_the_line(tmp_path):
    path = tmp_path / "mem0.csv"
    payload = json.dumps({"data": "x"}).replace('"', '""')
    path.write_text(
        f'id,vector_dims,payload\n0b6ad3b4-5e5d-4bb5-9d07-1f1bdf7c2f3a,abc,"{payload}"\n',
        encoding="utf-8",
    )
    with pytest.raises(UnavailableError, match="line 2 .*vector_dims is not a number"):
        list(rows.iter_points(path))


def test_a_snapshot_capture_judges_from_an_inventory_export_of_the_same_transaction(
    pg_deployment, cli, tmp_path
):
    store = vector_store_for(load(pg_deployment.config, os.environ))
    full = store.capture(tmp_path / "full", inventory=tmp_path / "side")
    side = export.read_schema(tmp_path / "side")
    assert side["exported_at"] == export.read_schema(full.root)["exported_at"]  # one transaction
    assert side["tables"]["mem0"]["vectors"] is False and side["tables"]["mem0"]["order"] == "id"
    assert side["tables"]["mem0"]["rows"] == export.read_schema(full.root)["tables"]["mem0"]["rows"]
    assert full.inventory == tmp_path / "side"
    # the judge's stream is the side's, in id order, and holds the full export's points
    ordered = list(store.points_in_order(full))
    assert [p.id for p in ordered] == sorted(p.id for p in ordered)
    assert {p.id: p for p in ordered} == store.read_points(full)

    made = cli("snapshot", "create", "--json", config=pg_deployment.config)
    assert made.code == 0, made.err
    snapshot = pg_deployment.paths.root / "snapshots" / made.json()["id"] / "pgvector"
    assert sorted(p.name for p in snapshot.iterdir()) == ["mem0.pgcopy", "schema.json"] or sorted(
        p.name for p in snapshot.iterdir()
    ) == ["mem0.pgcopy", "mem0_entities.pgcopy", "schema.json"]
    work = load(pg_deployment.config, os.environ).work_dir
    assert not list(work.glob("capture-*"))  # the inventory export went with its scratch
    verified = cli("snapshot", "verify", made.json()["id"], "--json", config=pg_deployment.config)
    assert verified.code == 0, verified.err
