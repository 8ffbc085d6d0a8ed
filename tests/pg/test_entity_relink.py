"""reconcile's entity repair keeps each entity whole on pgvector, as on embedded Qdrant.

mem0's pgvector ``update`` replaces the whole payload (``SET payload = ...``) where Qdrant's
merges it (``set_payload``): a relink that sends only ``linked_memory_ids`` wiped the entity's
text, type and scope on pgvector.
"""

from __future__ import annotations

import json
from contextlib import nullcontext

import pytest

from tests.conftest import findings_of
from tests.helpers.app import AppProcess

KEPT_ID = "00000000-0000-4000-8000-000000000001"
GONE_ID = "00000000-0000-4000-8000-000000000002"


@pytest.mark.parametrize(
    ("pg", "agent"),
    [(False, False), (True, False), (True, True)],
    ids=["qdrant", "pgvector", "pgvector-agent"],
)
def test_a_dropped_link_leaves_the_entity_its_text_type_and_scope(
    make_deployment, cli, tmp_path, pg, agent
):
    socket = tmp_path / "run" / "memsync-agent.sock"
    extra = f'\n[app]\nagent_socket = "{socket}"\n' if agent else ""
    deployment = make_deployment(pg=pg, extra_config=extra)
    kept, gone = deployment.seeded.live[5], deployment.seeded.live[6]
    entity = {"data": "Oslo", "entity_type": "PROPER", "user_id": "alice"}
    deployment.memory.entity_store.insert(
        vectors=[[0.1] * 384, [0.2] * 384],
        ids=[KEPT_ID, GONE_ID],
        payloads=[
            {**entity, "linked_memory_ids": [kept, gone]},
            {"data": "Bergen", "entity_type": "PROPER", "linked_memory_ids": [gone]},
        ],
    )
    memory = deployment.reopen()
    memory.delete(gone)  # a fresh process: mem0 skips the entity cleanup
    deployment.close()
    app = AppProcess(deployment.paths.root, agent=socket) if agent else nullcontext()
    with app:  # with the agent: the app's own Memory makes the repair (route agent)
        result = cli("reconcile", "--json", config=deployment.config)
    assert result.code == 0, result.out or result.err
    outcome = json.loads(result.out)
    assert {a.get("code") for a in outcome["actions"]} >= {"dangling-entity-link"}, outcome
    assert outcome.get("route") == ("agent" if agent else "direct"), outcome
    report = cli("check", "--json", config=deployment.config).json()
    assert "dangling-entity-link" not in findings_of(report, "warning")
    memory = deployment.reopen()
    assert memory.entity_store.get(vector_id=GONE_ID) is None
    remaining = memory.entity_store.get(vector_id=KEPT_ID).payload
    assert remaining == {**entity, "linked_memory_ids": [kept]}
