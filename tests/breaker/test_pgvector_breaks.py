"""Breaking memsync on pgvector the way users and the field do: real PostgreSQL, real CLI, real signals."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.pgvector.test_restore_pgvector import ids, memsync, snapshot, tables


def tamper(deployment: Any, snapshot_id: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit the snapshot's ``pgvector/schema.json`` and rewrite its manifest entry to match.

    What someone with write access to the snapshot store can do when snapshots are not signed.
    """
    root = deployment.paths.root / "snapshots" / snapshot_id
    schema_path = root / "pgvector" / "schema.json"
    document = json.loads(schema_path.read_text())
    edit(document)
    data = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    schema_path.write_bytes(data)
    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "pgvector/schema.json":
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _type_injection(document: dict[str, Any]) -> None:
    column = document["tables"]["mem0"]["columns"][-1]
    column["type"] += "); DROP TABLE victim; CREATE TABLE planted (y int"


def _default_injection(document: dict[str, Any]) -> None:
    column = document["tables"]["mem0"]["columns"][-1]
    column["type"] += " DEFAULT '{}'::jsonb"


def _index_injection(document: dict[str, Any]) -> None:
    indexes = document["tables"]["mem0"]["indexes"]
    indexes[0] += "; DROP TABLE victim; CREATE TABLE planted (y int)"


def _no_columns(document: dict[str, Any]) -> None:
    del document["tables"]["mem0"]["columns"]


def _file_outside(document: dict[str, Any]) -> None:
    document["tables"]["mem0"]["file"] = "/etc/passwd"


@pytest.mark.parametrize(
    "edit", [_type_injection, _default_injection, _index_injection, _no_columns, _file_outside]
)
def test_a_tampered_schema_json_runs_no_sql_of_its_own_and_changes_nothing(
    pg_deployment, cli, edit
):
    """restore builds DDL from schema.json: a tampered one must be refused, not executed."""
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE victim (x int)")
    before_tables, before_ids = tables(url), ids(url, "mem0")
    history = pg_deployment.paths.history_db.read_bytes()
    tamper(pg_deployment, snapshot_id, edit)
    result = memsync(pg_deployment, "restore", snapshot_id, "--force")
    assert result.returncode == 11, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "schema" in result.stderr
    assert tables(url) == before_tables  # victim kept, nothing planted, no staged table left
    assert ids(url, "mem0") == before_ids
    assert pg_deployment.paths.history_db.read_bytes() == history
