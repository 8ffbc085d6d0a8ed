"""mem0/qdrant-client failing to open the store is the store's state (exit 11), not memsync's config.

qdrant-client 1.20 unpickles every point row when it opens an embedded store; a row pickled
with a class it does not have (as a client of another version can leave) raises out of
``Memory.from_config``. Built on a real mem0 deployment with one such row added.
"""

from __future__ import annotations

import json
import pickle
import sqlite3
from contextlib import closing


def pydantic_v1_style(blob: bytes) -> bytes:
    """The same point pickled with a ``(fields, fields_set)`` tuple state (pydantic-1 style).

    memsync's reader decodes it (same id, vector and payload); pydantic 2's
    ``BaseModel.__setstate__`` cannot (it calls ``state.get``), so qdrant-client's load fails.
    """
    point = pickle.loads(blob)
    fields = {"id": point.id, "vector": point.vector, "payload": point.payload}
    if isinstance(fields["vector"], dict):  # the sparse vector as a plain dict of lists
        fields["vector"] = {
            name: (value.model_dump() if hasattr(value, "model_dump") else value)
            for name, value in fields["vector"].items()
        }
    state = pickle.dumps((fields, None), protocol=2)[2:-1]  # no PROTO, no STOP
    return b"\x80\x02cqdrant_client.http.models.models\nPointStruct\n)\x81" + state + b"b."


def test_forget_on_a_store_qdrant_client_cannot_open_exits_11_naming_the_store(deployment, cli):
    deployment.close()
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    with closing(sqlite3.connect(storage)) as db, db:
        key, blob = db.execute("SELECT id, point FROM points LIMIT 1").fetchone()
        db.execute("UPDATE points SET point = ? WHERE id = ?", (pydantic_v1_style(blob), key))
    report = cli("check", "--json", config=deployment.config)
    assert report.code == 0, report.out  # memsync reads the row: the pair is consistent

    target = deployment.seeded.live[-1]
    result = cli("forget", target, "--yes", "--no-snapshot", "--json", config=deployment.config)
    error = json.loads(result.err.strip().splitlines()[-1])
    assert result.code == 11, result.err
    assert str(deployment.paths.qdrant) in error["message"]
    assert "does not load" in error["message"] and "pydantic" in error["message"]
    assert "Memory.from_config failed" not in error["message"]
