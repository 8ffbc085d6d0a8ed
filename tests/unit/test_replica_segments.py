"""Litestream's WAL segments read as SQLite recovers them: LZ4 prefixes, salts, foreign segments."""

from __future__ import annotations

import os
import struct
from datetime import UTC, datetime

import lz4.frame
import pytest

from memsync import protection
from memsync.restore.at import foreign_segment

PAGE = 4096
GENERATION = "0123456789abcdef"
SHIPPED = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)


def header(salts: bytes) -> bytes:
    return struct.pack(">IIII", 0x377F0682, 3007000, PAGE, 0) + salts + bytes(8)


def frames(salts: bytes, count: int = 2) -> bytes:
    return b"".join(
        struct.pack(">II", 2, 2) + salts + bytes(8) + os.urandom(PAGE) for _ in range(count)
    )


def replica(segments: dict[str, bytes]) -> tuple[list[protection.ReplicaObject], dict[str, bytes]]:
    """Objects of one generation (its snapshot at index 0) and their shipped bytes, by key."""
    shipped = {
        f"generations/{GENERATION}/snapshots/00000000.snapshot.lz4": lz4.frame.compress(b"db")
    }
    shipped |= {
        f"generations/{GENERATION}/wal/{name}.wal.lz4": lz4.frame.compress(raw)
        for name, raw in segments.items()
    }
    objects = [
        protection.ReplicaObject(key=key, size=len(raw), modified=SHIPPED)
        for key, raw in shipped.items()
    ]
    return objects, shipped


@pytest.mark.parametrize("linked", [True, False])
@pytest.mark.parametrize("size", [0, 7, 56, 5000, 300_000])
def test_lz4_prefix_is_the_start_of_what_lz4_decompresses(size: int, linked: bool) -> None:
    data = (os.urandom(size // 2) + bytes(size))[:size]
    packed = lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=linked)
    assert protection.lz4_prefix(packed, 56) == data[:56]
    assert protection.lz4_prefix(packed, size + 1) == data
    with pytest.raises(ValueError):
        protection.lz4_prefix(b"not lz4", 56)


def test_a_segment_at_offset_0_gives_its_header_salts_and_one_later_its_first_frame_s() -> None:
    ours = b"\x01" * 4 + b"\x02" * 4
    assert protection.segment_salts(lz4.frame.compress(header(ours) + frames(ours)), 0) == (
        ours,
        ours,
    )
    assert protection.segment_salts(lz4.frame.compress(frames(ours)), 0x1000) == (None, ours)
    assert protection.segment_salts(lz4.frame.compress(frames(ours)), 0) == (None, None)
    with pytest.raises(ValueError, match="LZ4"):
        protection.segment_salts(b"not lz4", 0)


def test_every_segment_of_this_generations_wal_passes_and_a_foreign_one_is_named() -> None:
    ours, theirs = b"\x01" * 8, b"\x09" * 8
    segments = {
        "00000000_00000000": header(ours) + frames(ours),
        "00000000_00002040": frames(ours),
        "00000001_00000000": header(b"\x03" * 8) + frames(b"\x03" * 8),  # a new WAL: new salts
    }
    objects, shipped = replica(segments)
    assert foreign_segment(objects, GENERATION, None, shipped.__getitem__) is None

    objects, shipped = replica({**segments, "00000001_00002040": frames(theirs)})
    key, why = foreign_segment(objects, GENERATION, None, shipped.__getitem__) or ("", "")
    assert key.endswith("/wal/00000001_00002040.wal.lz4") and "salts of another WAL" in why

    objects, shipped = replica({**segments, "00000002_00000000": frames(theirs)})
    key, why = foreign_segment(objects, GENERATION, None, shipped.__getitem__) or ("", "")
    assert key.endswith("/wal/00000002_00000000.wal.lz4") and "WAL header" in why

    del segments["00000001_00000000"]
    objects, shipped = replica({**segments, "00000001_00002040": frames(ours)})
    key, why = foreign_segment(objects, GENERATION, None, shipped.__getitem__) or ("", "")
    assert key.endswith("/wal/00000001_00002040.wal.lz4") and "no segment at offset 0" in why


def test_a_segment_that_is_not_lz4_is_left_to_litestream_s_restore() -> None:
    ours = b"\x01" * 8
    objects, shipped = replica({"00000000_00000000": header(ours) + frames(ours)})
    damaged = {key: b"not lz4" for key in shipped}
    assert foreign_segment(objects, GENERATION, None, damaged.__getitem__) is None
