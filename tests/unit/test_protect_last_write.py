"""``protection.last_write``: what counts as a write Litestream has to ship."""

from __future__ import annotations

import os
from pathlib import Path

from memsync import protection


def test_an_empty_wal_a_reader_created_is_not_a_write(tmp_path: Path) -> None:
    database = tmp_path / "storage.sqlite"
    database.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84)
    os.utime(database, (1_000_000, 1_000_000))
    wal = tmp_path / "storage.sqlite-wal"
    wal.write_bytes(b"")  # what opening a WAL-mode file creates: no frame in it
    os.utime(wal, (2_000_000, 2_000_000))

    assert protection.last_write(database).timestamp() == 1_000_000

    wal.write_bytes(b"\x37\x7f\x06\x82" + b"\x00" * 28)  # a WAL header: frames follow
    os.utime(wal, (2_000_000, 2_000_000))
    assert protection.last_write(database).timestamp() == 2_000_000
