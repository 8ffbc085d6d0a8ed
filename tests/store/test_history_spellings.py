"""mem0 records a memory id in history as its caller spelt it: every reader matches them all."""

from __future__ import annotations

import sqlite3

from memsync.stores import history


def test_one_memorys_events_include_rows_written_under_other_spellings_of_its_id(deployment):
    victim = deployment.seeded.live[3]
    deployment.memory.update(victim.upper(), "now prefers green tea")  # e.g. a .NET client
    deployment.memory.update(victim.replace("-", ""), "now prefers black tea")
    deployment.close()
    events = list(history.iter_events(deployment.paths.history_db, victim))
    assert [e.event for e in events][-2:] == ["UPDATE", "UPDATE"]
    assert events[-1].new_memory == "now prefers black tea"
    assert {e.memory_id for e in events} >= {victim, victim.upper()}
    other = deployment.seeded.live[4]
    assert all(e.memory_id.lower() != other for e in events)
    assert list(history.iter_events(deployment.paths.history_db, "not-a-uuid")) == []


def test_memories_stream_in_id_order_and_equal_what_read_contents_groups(deployment):
    victim = deployment.seeded.live[3]
    deployment.memory.update(victim.upper(), "now prefers green tea")
    deployment.memory.update("{" + victim + "}", "now prefers black tea")
    deployment.close()
    with sqlite3.connect(deployment.paths.history_db) as connection:  # rows no mem0 writes
        connection.execute("INSERT INTO history (id, memory_id, event) VALUES ('n', NULL, 'ADD')")
        connection.execute("INSERT INTO history (id, memory_id, event) VALUES ('i', 17, 'ADD')")
    contents = history.read_contents(deployment.paths.history_db)
    streamed = list(history.iter_memories(deployment.paths.history_db))
    assert [m.memory_id for m in streamed] == sorted(contents.memories)
    assert streamed == [contents.memories[key] for key in sorted(contents.memories)]
    assert contents.memories[victim].last.new_memory == "now prefers black tea"
    assert contents.memories[victim].row_count >= 3 and "17" in contents.memories
    summary = history.read_summary(deployment.paths.history_db)
    assert (summary.present, summary.rows, summary.memories) == (True, contents.rows, {})
    assert summary.message_scopes == contents.message_scopes


def test_memories_are_keyed_as_normalize_point_id_keys_every_spelling(tmp_path):
    from collections import defaultdict

    from memsync.stores.point_ids import normalize_point_id

    canonical = "6a2f41a3-c54d-4b1f-9b8a-1d2b7b1fbb3c"
    ids = [
        canonical, canonical.upper(), canonical.replace("-", ""), "{" + canonical + "}",
        "urn:uuid:" + canonical, "URN:UUID:" + canonical, "a" * 32, "z" * 32, "g" * 36,
        "-" * 36, "{" + "z" * 36 + "}", "urn:uuid:" + "z" * 36, "Alice", "alice", "ÄÖÜ",
        "äöü" * 12, 17, 17.5, "",
    ]  # fmt: skip
    db = tmp_path / "history.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE history (id TEXT, memory_id TEXT, event TEXT)")
        connection.executemany(
            "INSERT INTO history (id, memory_id, event) VALUES (?, ?, 'ADD')",
            [(f"h{n}", memory_id) for n, memory_id in enumerate(ids + ids[::3])],
        )
        rows = connection.execute("SELECT rowid, memory_id FROM history").fetchall()
    connection.close()
    expected: dict[str, list[int]] = defaultdict(list)
    for rowid, memory_id in rows:
        expected[normalize_point_id(str(memory_id))].append(rowid)
    streamed = list(history.iter_memories(db))
    assert [(m.memory_id, m.row_count, m.last.rowid) for m in streamed] == [
        (key, len(rowids), max(rowids)) for key, rowids in sorted(expected.items())
    ]
