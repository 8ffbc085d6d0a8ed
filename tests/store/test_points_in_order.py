"""Embedded Qdrant's points in memory-id order, through a temporary database when the store is large.

qdrant-client's row keys are pickles of the id as spelt, so ``storage.sqlite`` has no id order;
above ``qdrant_embedded.rows.SPILL_ROWS`` rows check sorts the points through a temporary SQLite
database instead of holding them all. The tests lower that threshold on a store of thousands
of points, damaged as the field damages it, and compare with the in-memory order.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pickle
import sqlite3
import tracemalloc
import uuid
from contextlib import closing
from pathlib import Path

from memsync import config as config_module
from memsync.demo import deployment as build
from memsync.deployment import Deployment
from memsync.stores import capture as capture_module
from memsync.stores.capture import CHECKED_PAYLOAD_KEYS
from memsync.stores.qdrant_embedded import rows as qdrant_rows
from tests.conftest import error_findings, findings_of

POINTS = 3000


def storage_of(paths: build.Paths) -> Path:
    return paths.qdrant / "collection" / "mem0" / "storage.sqlite"


def add_in_bulk(paths: build.Paths, count: int) -> list[str]:
    """Add ``count`` memories as mem0 leaves them (a point, an ADD event), in bulk: what mem0's
    API would take minutes to write. Each point is a copy of the store's first one (vector and
    payload keys), with its own id, text and hash. Returns the ids."""
    with closing(sqlite3.connect(storage_of(paths))) as points:
        template = pickle.loads(points.execute("SELECT point FROM points").fetchone()[0])  # noqa: S301
    rows, events, ids = [], [], []
    for index in range(count):
        memory_id = str(uuid.uuid4())
        text = f"bulk fact {index}"
        payload = {**template.payload, "data": text, "hash": hashlib.md5(text.encode()).hexdigest()}  # noqa: S324
        point = template.model_copy(update={"id": memory_id, "payload": payload})
        key = base64.b64encode(pickle.dumps(memory_id, protocol=4)).decode()
        rows.append((key, pickle.dumps(point)))
        at = payload["created_at"]
        events.append((str(uuid.uuid4()), memory_id, None, text, "ADD", at, at, 0, None, "user"))
        ids.append(memory_id)
    with closing(sqlite3.connect(storage_of(paths))) as points, points:
        points.executemany("INSERT INTO points VALUES (?, ?)", rows)
    with closing(sqlite3.connect(paths.history_db)) as history, history:
        columns = "id, memory_id, old_memory, new_memory, event, created_at, updated_at, "
        history.executemany(
            f"INSERT INTO history ({columns}is_deleted, actor_id, role) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            events,
        )
    return ids


def write_newer_row(storage: Path, memory_id: str, spelling: str, text: str) -> None:
    """Write the point again under another spelling of its id, after every row (an older client)."""
    with closing(sqlite3.connect(storage)) as connection, connection:
        for (blob,) in connection.execute("SELECT point FROM points ORDER BY rowid DESC"):
            point = pickle.loads(blob)  # noqa: S301 - the test's own store
            if str(point.id).lower() == memory_id:
                break
        payload = {**point.payload, "data": text, "hash": hashlib.md5(text.encode()).hexdigest()}  # noqa: S324
        row = point.model_copy(update={"id": spelling, "payload": payload})
        connection.execute(
            "INSERT INTO points (id, point) VALUES (?, ?)",
            (f"key-of-{spelling}", pickle.dumps(row)),
        )


def test_check_through_the_spilled_order_finds_what_the_in_memory_order_finds(
    make_deployment, cli, monkeypatch, tmp_path
):
    deployment = make_deployment()
    deployment.close()
    live = [*deployment.seeded.live, *add_in_bulk(deployment.paths, POINTS)]
    deployment.reopen()
    deployment.memory.add("owns a red bicycle", user_id="carol", infer=False)
    twin = deployment.memory.add("owns a red bicycle", user_id="carol", infer=False)
    deployment.close()
    older = build.copy_qdrant(deployment.paths, tmp_path / "older-qdrant")
    memory = deployment.reopen()
    deleted, updated = live[:2], live[2]
    for memory_id in deleted:
        memory.delete(memory_id)
    memory.update(updated, "changed after the copy")
    added = memory.add("added after the copy", user_id="alice", infer=False)["results"][0]["id"]
    deployment.close()
    build.put_back_qdrant(deployment.paths, older)  # an older copy of the store put back
    assert build.delete_history_rows(deployment.paths, live[3]) >= 1
    # The newest row of a point under its upper-case spelling holds a text history never saw.
    write_newer_row(storage_of(deployment.paths), live[4], live[4].upper(), "edited by hand")

    in_memory = cli("check", "--json", config=deployment.config)
    monkeypatch.setattr(qdrant_rows, "SPILL_ROWS", 100)
    spilled = cli("check", "--json", config=deployment.config)

    assert spilled.code == in_memory.code == 3
    report = spilled.json()
    assert report["findings"] == in_memory.json()["findings"]
    assert report["counts"] == in_memory.json()["counts"]
    assert report["counts"]["points"] > POINTS * 0.9
    assert error_findings(report) == {
        "resurrected-point": set(deleted),
        "missing-point": {added},
        "text-mismatch": {updated, live[4]},
        "orphan-point": {live[3]},
    }
    assert findings_of(report, "warning")["duplicate-memory"] == {twin["results"][0]["id"]}


def test_the_spilled_order_holds_a_batch_of_points_not_the_collection(
    make_deployment, monkeypatch, tmp_path
):
    deployment = make_deployment()
    deployment.close()
    add_in_bulk(deployment.paths, POINTS)
    opened = Deployment.open(config_module.load(deployment.config, os.environ))
    captured = capture_module.capture(
        opened.vector_store, opened.config, tmp_path / "capture", vectors=False
    )
    monkeypatch.setattr(qdrant_rows, "SPILL_ROWS", 100, raising=False)

    tracemalloc.start()
    try:
        whole = captured.store.read_points(captured.vectors, CHECKED_PAYLOAD_KEYS)
        whole_peak = tracemalloc.get_traced_memory()[1]
        expected = sorted(whole)
        del whole
        tracemalloc.reset_peak()
        ids = [p.id for p in captured.store.points_in_order(captured.vectors, CHECKED_PAYLOAD_KEYS)]
        streamed_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert ids == expected and len(ids) > POINTS * 0.9
    # The ids kept for the comparison (a list of strings) are counted in the streamed peak.
    assert streamed_peak < whole_peak / 2, (streamed_peak, whole_peak)
