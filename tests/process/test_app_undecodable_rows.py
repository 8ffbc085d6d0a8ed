"""Stored points the app's own qdrant-client cannot load, though memsync's reader decodes them.

qdrant-client's local mode unpickles every row when it opens the store; a row pickled in a
layout the app's pydantic does not read (here pydantic v1's ``(fields, fields_set)`` state, as
an older client wrote it, loaded by the app's pydantic 2) stops the whole open: the app does not
start. memsync's own reader takes both layouts, so only the app's interpreter can tell.
"""

from __future__ import annotations

import pickle
import sqlite3
from contextlib import closing

from qdrant_client.http.models import PointStruct


def v1_layout(fields: dict) -> bytes:
    """A PointStruct pickled with pydantic v1's state, a ``(fields, fields_set)`` tuple:
    ``PointStruct.__new__`` then ``BUILD`` with that state (protocol 4, written op by op)."""
    state = pickle.dumps((fields, set(fields)), protocol=4)[2:-1]  # without PROTO and STOP
    if state[:1] == pickle.FRAME:
        state = state[9:]  # one frame is optional: the ops are read the same without it
    cls = b"c" + PointStruct.__module__.encode() + b"\n" + PointStruct.__name__.encode() + b"\n"
    return b"\x80\x04" + cls + pickle.EMPTY_TUPLE + pickle.NEWOBJ + state + pickle.BUILD + b"."


def rewrite_in_v1_layout(deployment, count: int) -> dict[str, int]:
    """Rewrite ``count`` rows of the memory collection in the v1 layout: {point id: rowid}."""
    deployment.close()
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    rewritten = {}
    with closing(sqlite3.connect(storage)) as connection, connection:
        rows = connection.execute(
            "SELECT rowid, point FROM points ORDER BY rowid LIMIT ?", (count,)
        )
        for rowid, blob in rows.fetchall():
            point = pickle.loads(blob)
            fields = {"id": point.id, "vector": point.vector, "payload": point.payload}
            connection.execute(
                "UPDATE points SET point = ? WHERE rowid = ?",
                (v1_layout(fields), rowid),
            )
            rewritten[str(point.id)] = rowid
    return rewritten


def test_doctor_names_the_rows_the_apps_qdrant_client_cannot_load(deployment, cli):
    rewritten = rewrite_in_v1_layout(deployment, 2)
    assert cli("check", "--json", config=deployment.config).code == 0  # memsync decodes them
    result = cli("doctor", "--json", config=deployment.config)
    found = [r for r in result.json()["results"] if r["code"] == "store-decode"]
    assert result.code == 3, result.out
    assert [r["status"] for r in found] == ["error"], found
    message = found[0]["message"]
    assert str(deployment.paths.qdrant) in message and "collection mem0: 2 of " in message
    for point_id, rowid in rewritten.items():
        assert f"{point_id} (rowid {rowid})" in message
    assert "app does not start" in message and "snapshot" in found[0]["fix"]


def test_check_app_names_each_row_the_apps_qdrant_client_cannot_load(deployment, cli):
    deployment.close()
    clean = cli("check", "--app", "--json", config=deployment.config)
    assert clean.code == 0 and not [
        f for f in clean.json()["findings"] if f["code"] == "app-undecodable"
    ], clean.out + clean.err
    rewritten = rewrite_in_v1_layout(deployment, 2)
    result = cli("check", "--app", "--json", config=deployment.config)
    assert result.code == 3, result.out + result.err
    found = [f for f in result.json()["findings"] if f["code"] == "app-undecodable"]
    assert {(f["memory_id"], f["collection"], f["severity"]) for f in found} == {
        (point_id, "mem0", "error") for point_id in rewritten
    }
    for finding in found:
        assert f"(rowid {rewritten[finding['memory_id']]})" in finding["message"]
        assert str(deployment.paths.qdrant) in finding["message"]


def test_a_write_the_app_cannot_open_the_store_for_is_refused_before_any_snapshot(deployment, cli):
    rewrite_in_v1_layout(deployment, 1)
    snapshots = deployment.paths.root / "snapshots"
    before = sorted(p.name for p in snapshots.iterdir()) if snapshots.exists() else []
    result = cli("forget", deployment.seeded.live[-1], "--yes", config=deployment.config)
    assert result.code == 11, result.out + result.err
    assert "store-decode" in result.err and "name the rows" not in result.err
    after = sorted(p.name for p in snapshots.iterdir()) if snapshots.exists() else []
    assert after == before


def test_a_reconcile_the_app_cannot_open_the_store_for_is_refused_before_any_snapshot(
    deployment, cli
):
    from memsync.demo import deployment as build

    live = [m for m in deployment.seeded.live if m not in deployment.seeded.expired]
    memory = deployment.reopen()
    build.delete_with_failing_history(memory, deployment.paths, live[-1])  # missing-point
    rewrite_in_v1_layout(deployment, 1)
    snapshots = deployment.paths.root / "snapshots"
    before = sorted(p.name for p in snapshots.iterdir()) if snapshots.exists() else []
    result = cli("reconcile", "--record-lost", config=deployment.config)
    assert result.code == 11, result.out + result.err
    assert "store-decode" in result.err
    after = sorted(p.name for p in snapshots.iterdir()) if snapshots.exists() else []
    assert after == before
