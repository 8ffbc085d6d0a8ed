"""memsync's writes on a pgvector deployment of each mem0ai version, by the app's own interpreter.

Each version's app (tests/helpers/app_envs.py, psycopg 3 with its pool: what each release's
pgvector provider prefers) builds the deployment in a fresh database; after each memsync write
the app's own version reads every memory back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers.compat import VERSIONS, App, assert_reads, ensure_built


@pytest.mark.slow(
    reason="an app process of an old mem0ai after each write, and a writer process per write"
)
@pytest.mark.parametrize("version", VERSIONS)
def test_writes_on_pgvector_leave_the_app_reading_every_memory(
    pg_url: str, tmp_path: Path, cli: Any, version: str
) -> None:
    ensure_built()
    app = App(tmp_path / "deployment", version, pg_url=pg_url)
    ids = app.run(("seed", "8"))[0]["ids"]
    # mem0ai 2.0.0's pgvector search returns the cosine distance as the score, so its 0.1
    # threshold drops every exact match: its own defect, there before memsync touches anything.
    search = version != "2.0.0"
    seeded = app.read(search=search)
    assert set(seeded) == set(ids)
    config = app.config
    created = cli("snapshot", "create", "--json", config=config)
    assert created.code == 0, created.err

    result = cli("forget", ids[0], "--yes", "--no-snapshot", "--json", config=config)
    assert result.code == 0, result.err
    assert result.json()["route"] == "direct"
    assert_reads(app, seeded, {ids[0]}, ("delete", ids[1]), search=search)

    result = cli("recover", ids[1], "--from", created.json()["id"], "--json", config=config)
    assert result.code == 0, result.err
    text = "a text written after the snapshot"
    assert_reads(app, seeded, {ids[0]}, ("update", ids[3], text), ("delete", ids[3]), search=search)

    # Changed after the snapshot, then deleted: back with its last text, embedded by the app.
    result = cli("recover", ids[3], "--from", created.json()["id"], "--json", config=config)
    assert result.code == 0, result.err
    assert result.json()["memories"][0]["re_embedded"] is True
    seeded = {**seeded, ids[3]: {**seeded[ids[3]], "memory": text}}
    assert_reads(app, seeded, {ids[0]}, search=search)
    assert cli("check", config=config).code == 0

    with psycopg.connect(pg_url, autocommit=True) as connection:  # a row lost, history intact
        connection.execute("DELETE FROM mem0 WHERE id = %s", (ids[2],))
    report = cli("check", "--json", config=config)
    assert ("missing-point", ids[2]) in {
        (f["code"], f.get("memory_id")) for f in report.json()["findings"]
    }
    result = cli("reconcile", "--no-snapshot", "--json", config=config)
    assert result.code == 0, result.err
    assert cli("check", config=config).code == 0
    assert_reads(app, seeded, {ids[0]}, search=search)
