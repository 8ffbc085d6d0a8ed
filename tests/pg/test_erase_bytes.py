"""Erasure on pgvector leaves no byte of the erased texts in the database's files.

A plain VACUUM frees a deleted row's space without overwriting it; ``forget --erase`` rewrites
the tables (VACUUM FULL). These tests read the database's own files after a CHECKPOINT, so they
need the server's data directory on this machine (the pgserver the tests start).
"""

from __future__ import annotations

from typing import Any

import psycopg

from tests.helpers.pg import database_files


def _holding(url: str, texts: list[str]) -> list[str]:
    files = database_files(url)
    return [t for t in texts if any(t.encode() in f.read_bytes() for f in files)]


def _texts_of(url: str, user: str) -> list[str]:
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT payload->>'data' FROM mem0 WHERE payload->>'user_id' = %s", (user,)
        ).fetchall()
    return [row[0] for row in rows]


def test_an_erasure_leaves_no_byte_of_the_texts_in_the_tables_files(pg_deployment: Any, cli):
    url = pg_deployment.paths.pg_url
    texts = _texts_of(url, "chandra")
    assert texts and _holding(url, texts) == texts  # the check can see them before
    result = cli(
        "forget", "--user", "chandra", "--erase", "--yes", "--json", config=pg_deployment.config
    )
    assert result.code == 0, result.err
    assert result.json()["erased"]["compaction"] == "VACUUM FULL"
    assert _holding(url, texts) == []


def test_a_table_held_by_a_long_transaction_gets_a_plain_vacuum_and_the_report_says_so(
    pg_deployment: Any, cli
):
    url = pg_deployment.paths.pg_url
    texts = _texts_of(url, "chandra")
    holder = psycopg.connect(url)
    holder.execute("SELECT count(*) FROM mem0")  # ACCESS SHARE until the transaction ends
    try:
        result = cli(
            "forget", "--user", "chandra", "--erase", "--yes", "--json", config=pg_deployment.config
        )
    finally:
        holder.rollback()
        holder.close()
    assert result.code == 0, result.err
    compaction = result.json()["erased"]["compaction"]
    assert compaction.startswith("plain VACUUM of mem0") and "VACUUM FULL mem0" in compaction
    assert "erase_compaction_partial" in result.err
    with psycopg.connect(url) as connection:  # gone from every query all the same
        left = connection.execute(
            "SELECT count(*) FROM mem0 WHERE payload->>'user_id' = 'chandra'"
        ).fetchone()
    assert left == (0,) and texts
    # the remedy the report names, run by hand once the table is free, removes the bytes
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM FULL mem0")
    assert _holding(url, texts) == []
