"""restore after a lost disk says what the snapshot lacks: what memsync's last check saw after it.

A real deployment written through mem0, a snapshot, memories added after it, a check that
records what it counted (``<state_dir>/last-check.json``), then the stores lost and restored.
"""

from __future__ import annotations

import os
import shutil

import pytest

from memsync import state


def lose_the_stores(deployment) -> None:
    deployment.close()
    shutil.rmtree(deployment.paths.qdrant)
    deployment.paths.history_db.unlink()


def written_after_a_snapshot(deployment, cli) -> tuple[str, int]:
    """Snapshot, then 3 memories for a new user ``zoe`` and 1 more for ``alice``, then a check."""
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    memory = deployment.reopen()
    for text in ("zoe likes tea", "zoe lives in Oslo", "zoe plays chess"):
        memory.add(text, user_id="zoe", infer=False)
    memory.add("alice keeps bees", user_id="alice", infer=False)
    deployment.close()
    checked = cli("check", "--json", config=deployment.config)
    assert checked.code == 0, checked.out
    return made.json()["id"], checked.json()["counts"]["points"]


def test_restore_after_a_lost_disk_says_what_the_last_check_saw_after_the_snapshot(deployment, cli):
    snapshot_id, seen = written_after_a_snapshot(deployment, cli)
    lose_the_stores(deployment)  # the state directory survives (another disk)
    restored = cli("restore", "--json", snapshot_id, config=deployment.config)
    assert restored.code == 0, restored.err
    lost = restored.json()["since_snapshot"]
    assert lost["known"] is True and lost["after_snapshot"] is True
    assert lost["memories_seen"] == seen and lost["memories_in_snapshot"] == seen - 4
    assert lost["missing"] == 4
    assert lost["scopes"] == [
        {"scope": "user_id=zoe", "seen": 3, "in_snapshot": 0},
        {"scope": "user_id=alice", "seen": lost["scopes"][1]["seen"],
         "in_snapshot": lost["scopes"][1]["seen"] - 1},
    ]  # fmt: skip
    assert 0 <= lost["last_check_age_s"] < 120
    # the restore's own check is now the last one: a second restore knows nothing is missing
    again = cli("restore", "--force", snapshot_id, config=deployment.config)
    assert again.code == 0, again.err
    assert "the counts show none missing" in again.out, again.out


def test_the_text_report_names_the_missing_memories_by_scope(deployment, cli):
    snapshot_id, seen = written_after_a_snapshot(deployment, cli)
    lose_the_stores(deployment)
    restored = cli("restore", snapshot_id, config=deployment.config)
    assert restored.code == 0, restored.err
    said = (
        f"saw {seen:,} memories; this snapshot holds {seen - 4:,}: about 4 written after it "
        "are not in it (user_id=zoe 3, user_id=alice 1)"
    )
    assert said in restored.out, restored.out


def test_without_memsyncs_state_restore_says_it_cannot_tell_what_is_lost(deployment, cli):
    snapshot_id, _seen = written_after_a_snapshot(deployment, cli)
    lose_the_stores(deployment)
    shutil.rmtree(deployment.paths.state)  # the state was on the lost disk too
    restored = cli("restore", "--json", snapshot_id, config=deployment.config)
    assert restored.code == 0, restored.err
    lost = restored.json()["since_snapshot"]
    assert lost["known"] is False and lost["last_check_at"] is None
    assert lost["memories_in_snapshot"] > 0
    shutil.rmtree(deployment.paths.state)
    lose_the_stores(deployment)
    text = cli("restore", snapshot_id, config=deployment.config)
    assert text.code == 0, text.err
    assert "memsync cannot say what was written after the snapshot" in text.out, text.out
    assert state.last_check(deployment.paths.state) is not None  # the restore's check recorded


def test_scopes_that_lost_memories_are_named_even_when_the_total_did_not_drop(deployment, cli):
    """3 added for zoe after the snapshot, 3 others deleted: the total is level, zoe's lost."""
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    memory = deployment.reopen()
    for text in ("zoe likes tea", "zoe lives in Oslo", "zoe plays chess"):
        memory.add(text, user_id="zoe", infer=False)
    for memory_id in deployment.seeded.live[:3]:
        memory.delete(memory_id)
    deployment.close()
    assert cli("check", config=deployment.config).code == 0
    restored = cli("restore", "--force", made.json()["id"], config=deployment.config)
    assert restored.code == 0, restored.err
    assert "fewer in some scopes" in restored.out and "user_id=zoe 3" in restored.out, restored.out


HOSTILE_LAST_CHECKS = [
    '{"checked_at": "2999-01-01T00:00:00Z", "memories": 5, "scopes": {"user_id": [1, 2]}}',
    '{"checked_at": "2999-01-01T00:00:00Z", "memories": 5, "scopes": {"user_id": "bob"}}',
    '{"checked_at": "2999-01-01T00:00:00Z", "memories": 5, "scopes": {"user_id": 7}}',
    '{"checked_at": "2999-01-01T00:00:00Z", "memories": true, "scopes": {}}',
    '{"checked_at": 12, "memories": 5, "scopes": {}}',
    "[1, 2, 3]",
    '"just a string"',
    "symlink to /dev/zero",
    "a FIFO",
]


@pytest.mark.parametrize("document", HOSTILE_LAST_CHECKS)
def test_a_hostile_last_check_never_fails_the_restore(deployment, cli, document):
    """A last-check.json of the wrong shape is what restore cannot say, never exit 1 after the move."""
    snapshot_id, _seen = written_after_a_snapshot(deployment, cli)
    lose_the_stores(deployment)
    path = deployment.paths.state / state.LAST_CHECK
    path.unlink()
    if document == "symlink to /dev/zero":  # read in full, it would never end
        path.symlink_to("/dev/zero")
    elif document == "a FIFO":  # read, it would wait for a writer for ever
        os.mkfifo(path)
    else:
        path.write_text(document, encoding="utf-8")
    restored = cli("restore", "--json", snapshot_id, config=deployment.config)
    assert restored.code == 0, restored.err
    lost = restored.json()["since_snapshot"]
    assert lost["scopes"] == []


def test_a_check_stamped_in_the_future_is_not_taken_as_after_the_snapshot(deployment, cli):
    """A clock set wrong: restore says it cannot tell, never a negative age or a loss count."""
    snapshot_id, _seen = written_after_a_snapshot(deployment, cli)
    lose_the_stores(deployment)
    path = deployment.paths.state / state.LAST_CHECK
    path.write_text(
        '{"checked_at": "2999-01-01T00:00:00Z", "memories": 500, "scopes": {}}', encoding="utf-8"
    )
    restored = cli("restore", "--json", snapshot_id, config=deployment.config)
    assert restored.code == 0, restored.err
    lost = restored.json()["since_snapshot"]
    assert lost["known"] is False and lost["after_snapshot"] is None and lost["missing"] is None
    lose_the_stores(deployment)
    path.write_text(
        '{"checked_at": "2999-01-01T00:00:00Z", "memories": 500, "scopes": {}}', encoding="utf-8"
    )
    text = cli("restore", "--force", snapshot_id, config=deployment.config)
    assert "later than now" in text.out and "ago, saw" not in text.out, text.out
