"""Breaker 7: forget --erase rewrites binary, CSV and mixed snapshots: no byte left, verify after."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import psycopg
import pytest

from tests.helpers.pg import as_csv_snapshot
from tests.pg.test_restore_pgvector import memsync


def _texts_of(url: str, user: str) -> list[str]:
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT payload->>'data' FROM mem0 WHERE payload->>'user_id' = %s", (user,)
        ).fetchall()
    return [row[0] for row in rows]


def _one_table_as_csv(root: Path, url: str, keep_binary: str) -> None:
    """as_csv_snapshot for every table but ``keep_binary`` (a snapshot mixing both formats)."""
    exported = root / "pgvector"
    schema_path = exported / "schema.json"
    schema = json.loads(schema_path.read_text())
    aside = schema["tables"].pop(keep_binary)
    schema_path.write_text(json.dumps(schema))
    as_csv_snapshot(root, url)
    schema = json.loads(schema_path.read_text())
    schema["tables"][keep_binary] = aside
    data = (json.dumps(schema, indent=2, sort_keys=True) + "\n").encode()
    schema_path.write_bytes(data)
    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "pgvector/schema.json":
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (root / "manifest.json").write_text(json.dumps(manifest))


def _snapshot(deployment) -> Path:
    deployment.close()
    created = memsync(deployment, "snapshot", "create", "--json")
    assert created.returncode == 0, created.stderr
    return deployment.paths.root / "snapshots" / json.loads(created.stdout)["id"]


@pytest.mark.parametrize("kind", ["binary", "csv"])
def test_erase_leaves_no_byte_in_a_snapshot_and_it_still_verifies(pg_deployment, kind):
    url = pg_deployment.paths.pg_url
    root = _snapshot(pg_deployment)
    names = sorted(json.loads((root / "pgvector" / "schema.json").read_text())["tables"])
    if kind == "csv":
        as_csv_snapshot(root, url)
    elif kind == "mixed":
        assert len(names) == 2, names
        _one_table_as_csv(root, url, keep_binary=names[0])
    formats = sorted(p.suffix for p in (root / "pgvector").iterdir() if p.name != "schema.json")
    texts = _texts_of(url, "chandra")
    assert texts
    holding = [
        t
        for t in texts
        if any(t.encode() in p.read_bytes() for p in root.rglob("*") if p.is_file())
    ]
    assert holding == texts, formats
    before = memsync(pg_deployment, "snapshot", "verify", root.name, "--json")
    assert before.returncode == 0, before.stdout[-500:] + before.stderr
    erased = memsync(pg_deployment, "forget", "--user", "chandra", "--erase", "--yes", "--json")
    assert erased.returncode == 0, erased.stderr
    purged = memsync(pg_deployment, "snapshot", "purge-memory", "--user", "chandra", "--yes")
    assert purged.returncode == 0, purged.stdout + purged.stderr
    files = [p for p in root.rglob("*") if p.is_file()]
    left = [(t, p.name) for t in texts for p in files if t.encode() in p.read_bytes()]
    assert left == [], (formats, left)
    after = memsync(pg_deployment, "snapshot", "verify", root.name, "--json")
    assert after.returncode == 0, (formats, after.stdout[-800:], after.stderr)


def test_purge_memory_over_a_pgcopy_with_a_short_uuid_fails_in_one_line(pg_deployment):
    from tests.breaker.test_pgcopy_b7_hostile import columns, parse, short_uuid, write

    root = _snapshot(pg_deployment)
    relative = "pgvector/mem0.pgcopy"
    write(root, relative, short_uuid(parse((root / relative).read_bytes()), columns(root)))
    before = (root / relative).read_bytes()
    purged = memsync(pg_deployment, "snapshot", "purge-memory", "--user", "chandra", "--yes")
    assert "Traceback" not in purged.stderr, purged.stderr[-1500:]
    assert purged.returncode != 0, purged.stdout + purged.stderr
    assert (root / relative).read_bytes() == before


@pytest.mark.parametrize("binary_table", ["mem0", "mem0_entities"])
def test_a_snapshot_mixing_binary_and_csv_tables_verifies_restores_and_purges(
    pg_deployment, binary_table
):
    url = pg_deployment.paths.pg_url
    pg_deployment.close()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE mem0_entities (LIKE mem0 INCLUDING ALL)")
        connection.execute(
            "INSERT INTO mem0_entities SELECT gen_random_uuid(), vector, "
            "jsonb_build_object('data', 'entity ' || md5(id::text), 'user_id', "
            "payload->>'user_id', 'linked_memory_ids', jsonb_build_array(id::text)) FROM mem0"
        )
    snapshot_id = json.loads(memsync(pg_deployment, "snapshot", "create", "--json").stdout)["id"]
    root = pg_deployment.paths.root / "snapshots" / snapshot_id
    _one_table_as_csv(root, url, keep_binary=binary_table)
    formats = sorted(p.name for p in (root / "pgvector").iterdir())
    assert f"{binary_table}.pgcopy" in formats and len(formats) == 3, formats
    verified = memsync(pg_deployment, "snapshot", "verify", snapshot_id, "--json")
    assert verified.returncode == 0, verified.stdout[-800:]
    query = "SELECT id::text, vector::text, payload::text FROM {} ORDER BY id"  # noqa: S608
    with psycopg.connect(url) as connection:
        before = {
            t: connection.execute(query.format(t)).fetchall() for t in ("mem0", "mem0_entities")
        }
        connection.execute("DELETE FROM mem0")
        connection.execute("DELETE FROM mem0_entities")
        connection.commit()
    restored = memsync(pg_deployment, "restore", snapshot_id, "--force", "--json")
    assert restored.returncode == 0, restored.stderr
    with psycopg.connect(url) as connection:
        after = {
            t: connection.execute(query.format(t)).fetchall() for t in ("mem0", "mem0_entities")
        }
    assert after == before
    texts = _texts_of(url, "chandra")
    erased = memsync(pg_deployment, "forget", "--user", "chandra", "--erase", "--yes", "--json")
    assert erased.returncode == 0, erased.stderr
    purged = memsync(pg_deployment, "snapshot", "purge-memory", "--user", "chandra", "--yes")
    assert purged.returncode == 0, purged.stdout + purged.stderr
    files = [p for p in root.rglob("*") if p.is_file()]
    left = [(t, p.name) for t in texts for p in files if t.encode() in p.read_bytes()]
    assert left == [], left
    again = memsync(pg_deployment, "snapshot", "verify", snapshot_id, "--json")
    assert again.returncode == 0, again.stdout[-800:]
