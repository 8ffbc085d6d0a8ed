"""``memsync.protection``'s pure half: a replica's layout judged, the textfile's gauges, backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memsync.daemon.protect import restart_delay_s
from memsync.jobs import protection_gauges
from memsync.protection import ReplicaObject, judge_file
from memsync.stores.journal_mode import LiveFile

NOW = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)
GEN = "dea356dd218d9dc7"
LIVE = LiveFile(path=Path("/srv/mem0/history.db"), label="history.db", mode="wal", size_bytes=1)


def obj(key: str, size: int, seconds_ago: float) -> ReplicaObject:
    return ReplicaObject(key=key, size=size, modified=NOW - timedelta(seconds=seconds_ago))


def test_the_newest_wal_segment_is_the_position_and_the_lag_counts_from_it() -> None:
    objects = [
        obj(f"generations/{GEN}/snapshots/00000000.snapshot.lz4", 333, 7200),
        obj(f"generations/{GEN}/wal/00000000_00000000.wal.lz4", 451, 30),
        obj(f"generations/{GEN}/wal/00000001_00004080.wal.lz4", 91, 12),
        obj(f"generations/{GEN}/wal/00000000_00004080.wal.lz4", 50, 20),
    ]
    judged = judge_file(LIVE, "/r/history.db", objects, NOW - timedelta(seconds=2), NOW)
    assert judged.replicated and judged.problem is None
    assert judged.position == f"{GEN}/00000001_00004080"
    assert judged.lag_s == 10.0  # written 2 s ago, last shipped 12 s ago
    assert judged.bytes_last_hour == 451 + 91 + 50  # the snapshot is two hours old


def test_a_file_written_before_its_last_shipment_has_no_lag() -> None:
    objects = [obj(f"generations/{GEN}/wal/00000000_00000000.wal.lz4", 451, 1)]
    judged = judge_file(LIVE, "/r", objects, NOW - timedelta(seconds=5), NOW)
    assert judged.lag_s == 0.0


def test_a_rollback_file_or_an_empty_replica_is_not_replicated_and_says_why() -> None:
    rollback = LiveFile(path=LIVE.path, label="history.db", mode="rollback", size_bytes=1)
    judged = judge_file(rollback, "/r", [], NOW, NOW)
    assert (judged.replicated, judged.lag_s) == (False, None)
    assert judged.problem == "history.db is in rollback journal mode: Litestream needs WAL"
    empty = judge_file(LIVE, "/r/history.db", [obj("stray", 1, 1)], NOW, NOW)
    assert empty.problem == "its replica /r/history.db holds no generation yet"


def test_the_gauges_give_every_file_replicated_and_lag_only_where_there_is_a_replica() -> None:
    text = protection_gauges([("history.db", 0.5), ("collection mem0", None)])
    assert 'memsync_protect_replicated{file="history.db"} 1' in text
    assert 'memsync_protect_replicated{file="collection mem0"} 0' in text
    assert 'memsync_protect_lag_seconds{file="history.db"} 0.500' in text
    assert 'memsync_protect_lag_seconds{file="collection mem0"}' not in text


def test_restarts_back_off_from_one_second_to_a_minute() -> None:
    assert [restart_delay_s(n) for n in (1, 2, 3, 4, 7, 8, 20)] == [1, 2, 4, 8, 60, 60, 60]


OTHER = "0123456789abcdef"


def test_the_replica_is_pinned_to_the_generation_this_hosts_litestream_ships() -> None:
    ours = (GEN, NOW - timedelta(seconds=600))
    same = [obj(f"generations/{GEN}/wal/00000000_00000000.wal.lz4", 9, 5)]
    judged = judge_file(LIVE, "/r", same, NOW, NOW, ours)
    assert (judged.generation_changed, judged.problem, judged.local_generation) == (
        False,
        None,
        GEN,
    )
    foreign = [*same, obj(f"generations/{OTHER}/snapshots/00000000.snapshot.lz4", 9, 2)]
    judged = judge_file(LIVE, "/r", foreign, NOW, NOW, ours)
    assert judged.generation_changed and judged.generation == OTHER
    assert judged.problem == (
        f"its replica /r holds generation {OTHER}, written by another Litestream than this "
        f"host's (generation {GEN}, since 2026-12-06T04:50:00Z): another host or unit "
        "replicates to the same replica, or it was replaced"
    )


def test_a_new_local_generation_not_shipped_yet_is_expected_until_it_should_have_been() -> None:
    # an erasure (or a restore) made this host's Litestream start OTHER 3 s ago; the replica
    # still shows GEN, written before OTHER started: Litestream ships OTHER within a second
    old = [obj(f"generations/{GEN}/wal/00000000_00000000.wal.lz4", 9, 10)]
    fresh = (OTHER, NOW - timedelta(seconds=3))
    assert not judge_file(LIVE, "/r", old, NOW, NOW, fresh, settle_s=60).generation_changed
    stale = (OTHER, NOW - timedelta(seconds=300))  # a replica replaced by an older copy
    assert judge_file(LIVE, "/r", old, NOW, NOW, stale, settle_s=60).generation_changed
    assert not judge_file(LIVE, "/r", old, NOW, NOW, None).generation_changed  # never ran here
