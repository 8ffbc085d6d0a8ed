"""reconcile and forget read the memories they need, not the whole inventory.

``check.settled_named`` judges the capture as a stream, then reads again only the memories the
findings name (and the newest point and memory, which ``vectors_newer_than_history`` compares),
and those a forget selects (its ids, its scope), so a plan over a million memories holds its
findings' memories, not the million. The plan and the targets must be the ones the whole
inventory gives.
"""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta

from memsync import check
from memsync import config as config_module
from memsync.demo import deployment as build
from memsync.deployment import Deployment
from memsync.forget import apply as forget
from memsync.forget.select import Ask
from memsync.reconcile.apply import vectors_newer_than_history
from memsync.reconcile.plan import plan_reconcile


def plan(findings, inventory, now):
    ids = (f"memsync-{n}" for n in itertools.count())
    return plan_reconcile(
        findings, inventory, {}, only=None, record_lost=False, now=now, new_id=lambda: next(ids)
    )


def test_the_plan_from_the_named_memories_is_the_plan_from_the_whole_inventory(
    make_deployment, tmp_path
):
    deployment = make_deployment(count=120)
    live = deployment.seeded.live
    deployment.close()
    older = build.copy_qdrant(deployment.paths, tmp_path / "older-qdrant")
    memory = deployment.reopen()
    memory.delete(live[0])
    memory.update(live[1], "changed after the copy")
    added = memory.add("added after the copy", user_id="alice", infer=False)["results"][0]["id"]
    deployment.close()
    build.put_back_qdrant(deployment.paths, older)
    assert build.delete_history_rows(deployment.paths, live[2]) >= 1
    # An undamaged point written an hour after every history event: vectors newer than history.
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    memory = deployment.reopen()
    memory.vector_store.client.set_payload("mem0", payload={"updated_at": later}, points=[live[9]])
    deployment.close()
    config = Deployment.open(config_module.load(deployment.config, os.environ))
    now = datetime.now(UTC)

    whole, report = check.settled_inventory(config, now)
    named, named_report = check.settled_named(config, now, lambda report: False)

    assert named_report.findings == report.findings
    codes = {(f.code, f.memory_id) for f in report.findings if f.severity.value == "error"}
    assert codes >= {
        ("resurrected-point", live[0]),
        ("text-mismatch", live[1]),
        ("missing-point", added),
        ("orphan-point", live[2]),
    }
    assert live[9] in named.points and live[9] not in {f.memory_id for f in report.findings}
    assert len(named.points) < len(whole.points) / 10
    assert vectors_newer_than_history(named) is vectors_newer_than_history(whole) is True
    assert (named.entities, named.message_scopes, named.history_rows) == (
        whole.entities,
        whole.message_scopes,
        whole.history_rows,
    )
    assert plan(report.findings, named, now) == plan(report.findings, whole, now)


def test_forget_selects_from_its_ids_and_scope_the_targets_the_whole_inventory_gives(
    make_deployment,
):
    deployment = make_deployment(count=120)
    deployment.close()
    config = Deployment.open(config_module.load(deployment.config, os.environ))
    now = datetime.now(UTC)
    whole = check.settled_inventory(config, now)[0]
    live, deleted = deployment.seeded.live, deployment.seeded.deleted
    user = whole.points[live[0]].payload["user_id"]
    asks = [
        Ask(kind="forget", user_id=user),
        Ask(kind="forget", memory_ids=(live[3], deleted[0], "not-a-memory")),
    ]
    for ask in asks:
        narrowed = forget.selecting(config, now, ask)
        targets = ask.select(narrowed, now.date())
        assert targets == ask.select(whole, now.date()) and targets.all, ask
        assert len(narrowed.points) < len(whole.points), ask
    proof = forget.reread(config, now, [live[3], deleted[0]])
    assert set(proof.points) <= {live[3], *whole.points} and live[3] in proof.points
    assert deleted[0] in proof.history and len(proof.history) < len(whole.history)
