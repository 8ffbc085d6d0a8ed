"""The typed mem0 writer on a real deployment: each write lands, and each is idempotent."""

from __future__ import annotations

import os
import sqlite3

import pytest

from memsync import config as config_module
from memsync import log
from memsync.model import HistoryEvent
from memsync.stores import mem0
from memsync.stores.backends import vector_store_for

ENTITY = "00000000-0000-4000-8000-000000000001"


@pytest.fixture(autouse=True)
def _logs_to_this_tests_stderr():
    """Earlier CLI tests leave structlog writing to their own (closed) captured stderr."""
    log.configure()


def _events(history_db, memory_id):
    with sqlite3.connect(history_db) as connection:
        return [
            row[0]
            for row in connection.execute(
                "SELECT event FROM history WHERE memory_id = ? ORDER BY rowid", (memory_id,)
            )
        ]


def test_writes_land_once_and_repeat_as_no_ops(deployment, tmp_path):
    live = deployment.seeded.live
    deployment.memory.entity_store.insert(
        vectors=[[0.1] * 384],
        ids=[ENTITY],
        payloads=[{"data": "Oslo", "linked_memory_ids": [live[0], live[1]]}],
    )
    deployment.close()
    config = config_module.load(deployment.config, os.environ)
    store = vector_store_for(config)
    stored = store.find_point(store.location, config.collection, live[3])
    assert stored is not None and stored.vector is not None
    with mem0.open_memory(vector_store_for(config), config) as writer:
        writer.touch_entity_store()
        assert writer.delete(live[0]) is True and writer.delete(live[0]) is False
        assert writer.exists(live[0]) is False and writer.payload(live[0]) is None
        assert writer.update_text(live[1], "now prefers green tea") is True
        assert (
            writer.update_text(live[1], "now prefers green tea") is False
        )  # settled: text and hash
        assert (
            writer.update_metadata(live[2], {"confirmed_at": "2026-12-01T00:00:00+00:00"}) is True
        )
        assert writer.update_metadata(live[0], {"confirmed_at": "x"}) is False  # no point
        assert writer.relink_entity(ENTITY, [live[1]]) is True
        assert (
            writer.put_back(live[0], stored.vector, {**stored.payload, "data": "back again"})
            is True
        )
        assert writer.put_back(live[0], stored.vector, stored.payload) is False  # already there
        row = HistoryEvent(
            0,
            "memsync-test-row",
            live[0],
            None,
            "back again",
            "ADD",
            None,
            None,
            0,
            "memsync",
            None,
        )
        assert writer.record_events([row]) == 1 and writer.record_events([row]) == 0
        assert store.read_live_entities()[0].linked_memory_ids == (live[1],)
        assert (
            writer.relink_entity(ENTITY, []) is True and writer.relink_entity(ENTITY, []) is False
        )
        assert store.read_live_entities() == ()
    with mem0.open_memory(vector_store_for(config), config) as writer:
        assert writer.payload(live[0]) == {**stored.payload, "data": "back again"}
        assert writer.payload(live[1])["data"] == "now prefers green tea"
        assert writer.payload(live[2])["confirmed_at"] == "2026-12-01T00:00:00+00:00"
    assert _events(config.history_db_path, live[0])[-2:] == ["DELETE", "ADD"]
    assert _events(config.history_db_path, live[1])[-1] == "UPDATE"
