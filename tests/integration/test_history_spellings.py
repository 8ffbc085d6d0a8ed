"""mem0 records a memory id in history as its caller spelt it: every reader matches them all."""

from __future__ import annotations

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
