"""``agent.meta.undecodable`` (what the app's interpreter runs for doctor's store-decode) reads
the live file in short batches and still sees every row once."""

from __future__ import annotations

import sqlite3
from contextlib import closing

from memsync.agent import meta
from tests.process.test_app_undecodable_rows import rewrite_in_v1_layout


def test_every_row_is_loaded_once_across_batches(deployment, monkeypatch):
    rewritten = rewrite_in_v1_layout(deployment, 3)
    monkeypatch.setattr(meta, "BATCH_ROWS", 7)
    found = meta.undecodable(str(deployment.paths.qdrant))["mem0"]
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    with closing(sqlite3.connect(storage)) as connection:
        rows = connection.execute("SELECT count(*) FROM points").fetchone()[0]
    assert found["rows"] == rows > 7 * 3
    assert found["undecodable"] == 3
    assert {row["id"]: row["rowid"] for row in found["named"]} == rewritten
