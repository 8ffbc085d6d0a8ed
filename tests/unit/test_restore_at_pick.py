"""restore --at's choice in a replica's listing (``restore.at.pick``): values in, values out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memsync.errors import UnavailableError
from memsync.protection import ReplicaObject
from memsync.restore.at import parse_at, pick

T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
OLD, NEW = "a" * 16, "b" * 16


def listed(generation: str, at_s: float, name: str) -> ReplicaObject:
    kind = "snapshots" if name.endswith(".snapshot.lz4") else "wal"
    return ReplicaObject(
        key=f"generations/{generation}/{kind}/{name}",
        size=100,
        modified=T0 + timedelta(seconds=at_s),
    )


REPLICA = [
    listed(OLD, 0, "00000000.snapshot.lz4"),
    listed(OLD, 0, "00000000_00000000.wal.lz4"),
    listed(OLD, 5, "00000000_00004080.wal.lz4"),
    listed(OLD, 9, "00000001_00000000.wal.lz4"),
    listed(NEW, 20, "00000000.snapshot.lz4"),  # the file was replaced: a new generation
    listed(NEW, 25, "00000000_00001000.wal.lz4"),
]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_time_between_two_shipments_takes_the_last_one_before_it():
    generation, last, position = pick(REPLICA, at(7), "history.db", "/r")
    assert (generation, position) == (OLD, f"{OLD}/00000000_00004080")
    assert last.modified == at(5)


def test_a_time_in_the_gap_after_a_generation_ended_takes_its_last_shipment():
    generation, last, position = pick(REPLICA, at(15), "history.db", "/r")
    assert (generation, position, last.modified) == (OLD, f"{OLD}/00000001_00000000", at(9))


def test_latest_and_a_time_after_the_last_shipment_take_the_newest_generation_whole():
    for when in (None, at(3600)):
        generation, last, position = pick(REPLICA, when, "history.db", "/r")
        assert (generation, position, last.modified) == (NEW, f"{NEW}/00000000_00001000", at(25))


def test_a_time_at_a_generation_start_restores_its_snapshot_alone():
    generation, last, position = pick(REPLICA, at(21), "history.db", "/r")
    assert (generation, position, last.modified) == (NEW, None, at(20))


def test_a_time_before_the_oldest_snapshot_and_an_empty_replica_are_refused():
    with pytest.raises(UnavailableError, match="does not reach back to 2026-12-06T07:59:59Z"):
        pick(REPLICA, at(-1), "history.db", "/r")
    with pytest.raises(UnavailableError, match="history.db: its replica /r holds no generation"):
        pick([listed(OLD, 0, "00000000_00000000.wal.lz4")], None, "history.db", "/r")


def test_at_takes_latest_or_what_before_takes():
    assert parse_at("latest") is None
    assert parse_at("2026-12-06T09:00:00+01:00") == T0
    with pytest.raises(Exception, match="--at '2026-12-06T08:00' has no Z or UTC offset"):
        parse_at("2026-12-06T08:00")
