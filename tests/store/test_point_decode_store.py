"""A real mem0 deployment's points take the float-free decode; a damaged one reads as before."""

from __future__ import annotations

import json
import sqlite3

from memsync.stores.qdrant_embedded import formats


def _storage(deployment):
    return deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"


def test_every_point_mem0_wrote_is_decoded_without_its_floats(deployment):
    deployment.close()
    with sqlite3.connect(_storage(deployment)) as connection:
        blobs = [blob for (blob,) in connection.execute("SELECT point FROM points")]
    connection.close()
    assert len(blobs) >= 30  # the seeded memories, some deleted
    for blob in blobs:
        spliced = formats._without_floats(blob)
        assert spliced is not None
        point = formats.decode_point(blob)
        point_id, payload, vector = formats.decode_stored(blob)
        payload.pop("text_lemmatized", None)
        assert (point.id, point.payload, point.vector_size) == (
            point_id,
            payload,
            len(vector[""] if isinstance(vector, dict) else vector),
        )
        assert spliced[1] == point.vector_size


def test_a_point_a_float_short_fails_check_with_the_full_decodes_error(deployment, cli):
    deployment.close()
    storage = _storage(deployment)
    with sqlite3.connect(storage) as connection:
        rowid, blob = connection.execute(
            "SELECT rowid, point FROM points ORDER BY rowid LIMIT 1"
        ).fetchone()
        start = blob.index(b"]\x94(G") + 2
        body = blob[11 : start + 10] + blob[start + 11 :]  # one byte of the first float gone
        bad = blob[:3] + len(body).to_bytes(8, "little") + body  # its frame made to fit
        connection.execute("UPDATE points SET point = ? WHERE rowid = ?", (bad, rowid))
    connection.close()
    try:
        formats._point_fields(bad)
    except formats.PointDecodeError as error:
        full = str(error)
    else:
        raise AssertionError("the damaged point decodes in full")
    done = cli("check", "--json", config=deployment.config)
    error = json.loads(done.err.splitlines()[-1])
    assert (done.code, error["code"]) == (11, 11)
    assert error["message"].startswith(f"point at rowid {rowid} of {storage} ")
    assert error["message"].endswith(f" cannot be decoded: {full}")
