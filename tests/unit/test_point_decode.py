"""Decoding stored points without their floats: the same point as the full decode, or its error.

The blobs are real: ``tests/helpers/point_pickles.py`` made them in every app environment's
interpreter, through its own qdrant-client's local mode (``point_pickles.json``).
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest

from memsync.stores.qdrant_embedded import formats
from memsync.stores.qdrant_embedded.formats import PointDecodeError, decode_point

MADE = json.loads((Path(__file__).parent / "point_pickles.json").read_text())
CASES = [
    pytest.param(base64.b64decode(case["blob"]), case["case"], id=f"{version}-{case['case']}")
    for version, made in sorted(MADE.items())
    for case in made["cases"]
]
# The shapes the float count is read from the bytes for; the others take the full decode.
FAST = {
    "bare list, 384": 384,
    "unnamed, 384": 384,
    "unnamed with bm25, 384": 384,
    "1 floats": 1,  # pickle writes a batch of one as BINFLOAT APPEND, without MARK
    "1000 floats": 1000,
    "1001 floats": 1001,
    "protocol 5": 384,
}


def full_decode(blob: bytes) -> tuple[str, dict[str, object], int | None] | str:
    """What ``decode_point`` returned before (every float unpickled, then counted), or its error."""
    try:
        point_id, payload, vector = formats.decode_stored(blob)
    except PointDecodeError as error:
        return str(error)
    payload.pop("text_lemmatized", None)
    return point_id, payload, formats._vector_size(vector)


def fast_decode(blob: bytes) -> tuple[str, dict[str, object], int | None] | str:
    try:
        point = decode_point(blob)
    except PointDecodeError as error:
        return str(error)
    return point.id, dict(point.payload), point.vector_size


def test_every_app_environment_made_its_points():
    assert sorted(MADE) == ["0.1.118", "1.0.11", "2.0.0", "2.1.0", "2.2.1"]
    assert all(len(made["cases"]) == 10 for made in MADE.values())


@pytest.mark.parametrize(("blob", "case"), CASES)
def test_the_fast_decode_is_the_full_decode(blob, case):
    assert fast_decode(blob) == full_decode(blob)
    spliced = formats._without_floats(blob)
    if FAST.get(case) is None:
        assert spliced is None
    else:
        short, size = spliced
        assert size == FAST[case] == decode_point(blob).vector_size
        vector = formats._point_fields(short)["vector"]
        assert (vector[""] if isinstance(vector, dict) else vector) == []


@pytest.mark.parametrize(("blob", "case"), [c for c in CASES if "bm25" in c.values[1]])
def test_a_damaged_point_gives_the_full_decodes_error(blob, case):
    start = blob.index(b"]\x94(G") + 2
    damaged = {
        "truncated in the floats": blob[: start + 100],
        "truncated after them": blob[: start + 2 + 9 * 384 + 20],
        "truncated by one byte": blob[:-1],
        "a float one byte short": blob[: start + 10] + blob[start + 11 :],
        "the frame one byte short": blob[:3] + (len(blob) - 12).to_bytes(8, "little") + blob[11:],
    }
    # each again with its frame's length made to fit, so the splice is tried on it
    damaged |= {f"{how}, framed": framed(bad) for how, bad in damaged.items()}
    outcomes = {how: full_decode(bad) for how, bad in damaged.items()}
    assert {how: fast_decode(bad) for how, bad in damaged.items()} == outcomes
    assert all(isinstance(outcomes[how], str) for how in list(damaged)[:4]), outcomes
    spliced = formats._without_floats(damaged["truncated after them, framed"])
    assert spliced is not None and isinstance(outcomes["truncated after them, framed"], str)


def framed(blob: bytes) -> bytes:
    return blob[:3] + (len(blob) - 11).to_bytes(8, "little") + blob[11:]


def test_a_list_appended_to_after_the_splice_takes_the_full_decode():
    blob = base64.b64decode(MADE["2.2.1"]["cases"][0]["blob"])
    assert MADE["2.2.1"]["cases"][0]["case"] == "bare list, 384"
    # the payload's first value replaced by the vector list itself (BINGET of its memo), with
    # one float appended to it: the full decode sees 385 floats, the spliced one would see 1
    start = blob.index(b"]\x94(G") + 2
    memo = blob.count(b"\x94", 11, start) - 1
    data = blob.index(b"\x8c\x04data\x94") + 7
    value_end = blob.index(b"\x94", data + 1)  # the value's MEMOIZE stays: the memo holds
    extra = b"h" + bytes([memo]) + b"G" + struct.pack(">d", 0.5) + b"a"
    body = blob[11:data] + extra + blob[value_end:]
    crafted = blob[:3] + len(body).to_bytes(8, "little") + body
    point = decode_point(crafted)
    assert point.vector_size == full_decode(crafted)[2] == 385
