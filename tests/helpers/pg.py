"""The files a PostgreSQL database keeps its rows in, for tests that search them for bytes."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest


def database_files(url: str) -> list[Path]:
    """Every file of the database ``url`` names, after a CHECKPOINT (dirty pages, unlinks done).

    Skips the test when the server's data directory is not on this machine
    (``$MEMSYNC_TEST_PG_URL`` naming a remote server).
    """
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CHECKPOINT")
        (data,) = connection.execute("SHOW data_directory").fetchone()
        (oid,) = connection.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    directory = Path(data) / "base" / str(oid)
    if not directory.is_dir():
        pytest.skip("the server's data directory is not on this machine")
    return [p for p in directory.iterdir() if p.is_file()]


def as_csv_snapshot(root: Path, url: str) -> None:
    """Rewrite snapshot ``root``'s binary table exports as memsync 0.2 wrote them: CSV.

    PostgreSQL itself converts the rows: each ``<table>.pgcopy`` is loaded into a temporary
    table (``COPY ... FROM STDIN (FORMAT binary)``) and written out again with ``COPY ... TO
    STDOUT (FORMAT csv, HEADER)``; ``schema.json`` and the manifest follow (file names, sizes,
    sha256), so the snapshot is one an older memsync made of the same rows.
    """
    import hashlib
    import json

    from psycopg import sql

    exported = root / "pgvector"
    schema_path = exported / "schema.json"
    schema = json.loads(schema_path.read_text())
    renamed = {}
    with psycopg.connect(url) as connection, connection.cursor() as cursor:
        for name, table in schema["tables"].items():
            if not table["file"].endswith(".pgcopy"):
                continue
            binary, target = exported / table["file"], exported / f"{name}.csv"
            scratch = sql.Identifier(f"as_csv_{name}")
            columns = sql.SQL(", ").join(
                sql.SQL("{} {}").format(sql.Identifier(c["name"]), sql.SQL(c["type"]))
                for c in table["columns"]
            )
            cursor.execute(sql.SQL("CREATE TEMPORARY TABLE {} ({})").format(scratch, columns))
            with (
                binary.open("rb") as source,
                cursor.copy(sql.SQL("COPY {} FROM STDIN (FORMAT binary)").format(scratch)) as copy,
            ):
                copy.write(source.read())
            with (
                target.open("wb") as out,
                cursor.copy(
                    sql.SQL("COPY {} TO STDOUT (FORMAT csv, HEADER)").format(scratch)
                ) as copy,
            ):
                for block in copy:
                    out.write(block)
            binary.unlink()
            renamed[f"pgvector/{table['file']}"] = f"pgvector/{target.name}"
            table["file"], table["file_bytes"] = target.name, target.stat().st_size
    schema_path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for entry in manifest["files"]:
        entry["path"] = renamed.get(entry["path"], entry["path"])
        if entry["path"].startswith("pgvector/"):
            data = (root / entry["path"]).read_bytes()
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
