"""check on pgvector judges the export as a stream in id order, with the whole inventory's result.

``check`` merges the inventory export (``COPY ... ORDER BY id``) with history's memories
(``history.iter_memories``) instead of holding every point and event (issue 13: check's peak
RSS at 1,000,000 rows). Each test damages a real deployment, captures it once and compares
the streamed report with ``judge(read_inventory(...))`` of the same capture.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from memsync import check
from memsync.config import load
from memsync.demo import deployment as build
from memsync.demo import pg_faults
from memsync.deployment import Deployment
from memsync.stores import capture as stores


def both_judgements(deployment, shuffle: bool = False):
    """(streamed report, whole-inventory report, schema.json) of one capture.

    ``shuffle``: the export's rows are put out of order first (as a server whose ``lower()``
    orders an id otherwise than Python would leave them).
    """
    config = load(deployment.config, os.environ)
    today = datetime.now(UTC).date()
    opened = Deployment.open(config)
    with stores.temporary_capture(opened.vector_store, config) as captured:
        if shuffle:
            export = captured.vectors.root / "mem0.csv"
            header, *rows = export.read_text(encoding="utf-8").splitlines(keepends=True)
            export.write_text(header + "".join(reversed(rows)), encoding="utf-8")
        around = check.surroundings(opened, captured)
        streamed = check.judge_capture(captured, opened, today, around)
        whole = check.judge(
            stores.read_inventory(opened.vector_store, captured, config), today, around
        )
        exported = captured.vectors.root / "schema.json"  # pgvector only
        schema = json.loads(exported.read_text()) if exported.is_file() else None
    return streamed, whole, schema


def test_a_damaged_deployment_gets_the_same_report_streamed_and_whole(pg_deployment):
    live = pg_deployment.seeded.live
    memory = pg_deployment.memory
    build.delete_with_failing_history(memory, pg_deployment.paths, live[1])  # missing-point
    assert build.delete_history_rows(pg_deployment.paths, live[2]) >= 1  # orphan-point
    twin = memory.add("plays the oboe", user_id="alice", infer=False)["results"][0]["id"]
    memory.add("plays the oboe", user_id="alice", infer=False)  # a duplicate of twin
    streamed, whole, schema = both_judgements(pg_deployment)
    assert schema["tables"]["mem0"]["order"] == "id" and not schema["tables"]["mem0"]["vectors"]
    assert streamed == whole
    said = {
        f.memory_id: f"{f.code}: {f.message}" for f in streamed.findings
    }  # just written: maybe in-flight
    assert "missing-point" in said[live[1]] and "orphan-point" in said[live[2]]
    assert any(f.code == "duplicate-memory" and f.expected == twin for f in streamed.findings)
    assert streamed.points == len(build.point_ids(memory))


def test_text_ids_the_server_orders_otherwise_still_get_the_whole_inventorys_report(
    pg_deployment,
):
    # A table made outside mem0 with a text id: the server orders lower(id) COLLATE "C", which
    # may not be Python's order for ids outside ASCII; the merge then reads the capture whole.
    import psycopg

    pg_deployment.close()
    with psycopg.connect(pg_faults._url(pg_deployment.paths), autocommit=True) as connection:
        connection.execute("ALTER TABLE mem0 ALTER COLUMN id TYPE text")
        for odd in ("Éz-note", "éa-note", "ABC-note"):
            connection.execute(
                "INSERT INTO mem0 (id, vector, payload) SELECT %s, vector, payload FROM mem0 "
                "WHERE id = %s",
                (odd, pg_deployment.seeded.live[0]),
            )
    streamed, whole, schema = both_judgements(pg_deployment)
    assert schema["tables"]["mem0"]["order"] == "id"
    assert streamed == whole
    said = {
        f.memory_id: f"{f.code}: {f.message}" for f in streamed.findings
    }  # just written: maybe in-flight
    assert all("orphan-point" in said[odd] for odd in ("éz-note", "éa-note", "abc-note"))


def test_an_export_out_of_id_order_is_judged_whole_with_the_same_report(pg_deployment):
    build.delete_with_failing_history(
        pg_deployment.memory, pg_deployment.paths, pg_deployment.seeded.live[4]
    )
    streamed, whole, _ = both_judgements(pg_deployment, shuffle=True)
    assert streamed == whole
    said = {f.memory_id: f"{f.code}: {f.message}" for f in streamed.findings}
    assert "missing-point" in said[pg_deployment.seeded.live[4]]
    assert streamed.points == len(build.point_ids(pg_deployment.memory)) > 2


@pytest.mark.parametrize("pg", [False, True], ids=["qdrant", "pgvector"])
def test_entity_links_to_a_point_without_history_or_a_memory_just_deleted_are_not_dangling(
    make_deployment, pg
):
    # Found by the breaker: the first streaming judge gathered a linked memory only when it
    # had both a point and history, so both links below were reported dangling.
    deployment = make_deployment(count=12, pg=pg)
    live, memory = deployment.seeded.live, deployment.memory
    assert build.delete_history_rows(deployment.paths, live[1]) >= 1  # a point, no history
    memory.delete(live[2])  # a DELETE event a moment ago, no point
    ghost = "00000000-0000-4000-8000-00000000dead"
    memory.entity_store.insert(
        vectors=[memory.embedding_model.embed(text, "add") for text in ("Lisbon", "tea")],
        ids=["00000000-0000-4000-8000-0000000000e1", "00000000-0000-4000-8000-0000000000e2"],
        payloads=[
            {"data": "Lisbon", "entity_type": "GPE", "linked_memory_ids": [live[0], live[1]]},
            {"data": "tea", "entity_type": "PRODUCT", "linked_memory_ids": [ghost, live[2]]},
        ],
    )
    streamed, whole, _ = both_judgements(deployment)
    assert streamed == whole
    said = {(f.code, f.memory_id): f.message for f in streamed.findings}
    assert ("dangling-entity-link", ghost) in said
    assert ("dangling-entity-link", live[1]) not in said  # its point is there
    assert said[("in-flight", live[2])].startswith("dangling-entity-link explained by a write")
