"""Queued requests: a forget, erase or prune with no route is recorded and applied later.

The app here is a plain holder of the store (``tests/helpers/holders.py``): no agent answers and
no window is configured, so the only ways are the queue and ``memsync pending apply`` once the
holder is gone (as an app unit's ``ExecStartPre=memsync job apply-pending`` would).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta

from memsync.routes import queue as pending
from tests.helpers.holders import app_holding


def run(cli, deployment, *argv):
    deployment.close()
    result = cli(*argv, "--json", config=deployment.config)
    return result.code, (result.json() if result.out else json.loads(result.err.splitlines()[-1]))


def user_points(deployment, user: str) -> set[str]:
    memory = deployment.reopen()
    try:
        listed, _ = memory.vector_store.client.scroll("mem0", limit=100_000)
        return {str(p.id) for p in listed if p.payload.get("user_id") == user}
    finally:
        deployment.close()


def texts_of(deployment, memory_id: str) -> list:
    connection = sqlite3.connect(deployment.paths.history_db)
    try:
        rows = connection.execute(
            "SELECT old_memory, new_memory FROM history WHERE memory_id = ?", (memory_id,)
        ).fetchall()
    finally:
        connection.close()
    return [text for row in rows for text in row if text is not None]


def test_a_queued_erase_of_a_user_reaches_memories_the_app_added_after_the_request(deployment, cli):
    alice_then = user_points(deployment, "alice")
    assert alice_then
    deployment.close()
    with app_holding(deployment.paths.qdrant):
        code, asked = run(cli, deployment, "forget", "--user", "alice", "--erase", "--yes")
        assert code == 5 and asked["route"] == "queued" and asked["deleted"] == []
        code, still = run(cli, deployment, "pending", "apply")
        assert code == 5 and still["left"] == 1 and still["requests"][0]["status"] == "queued"
    code, listed = run(cli, deployment, "pending", "list")
    request = listed["requests"][0]
    assert code == 0 and request["id"] == asked["pending_id"] and request["kind"] == "erase"
    assert request["user_id"] == "alice" and request["memory_ids"] == []
    assert request["requested_by"]["user"] and request["age_s"] >= 0
    secret = "alice told the app her new door code is 7305-2219 after the request"
    memory = deployment.reopen()  # the app, running again, adds a memory for alice
    late = memory.add(secret, user_id="alice", infer=False)["results"][0]["id"]
    deployment.close()
    code, applied = run(cli, deployment, "pending", "apply")
    assert code == 0 and applied["left"] == 0 and applied["route"] == "direct"
    row = applied["requests"][0]
    assert row["status"] == "applied" and set(row["deleted"]) == alice_then | {late}
    assert user_points(deployment, "alice") == set()
    assert texts_of(deployment, late) == []
    assert secret.encode() not in deployment.paths.history_db.read_bytes()
    assert run(cli, deployment, "pending", "list")[1]["requests"] == []


def test_a_queued_prune_is_recorded_once_and_applied_when_the_holder_stops(make_deployment, cli):
    deployment = make_deployment(count=10)
    today = datetime.now(UTC).date()
    expired = {
        deployment.memory.add(
            f"expired {i}", user_id="ana", infer=False,
            expiration_date=(today - timedelta(days=1)).isoformat(),
        )["results"][0]["id"]
        for i in range(2)
    } | set(deployment.seeded.expired)  # fmt: skip
    deployment.close()
    with app_holding(deployment.paths.qdrant):
        first = run(cli, deployment, "prune")
        second = run(cli, deployment, "prune")
    assert first[0] == second[0] == 5 and first[1]["pending_id"] == second[1]["pending_id"]
    assert set(first[1]["targets"]) == expired
    assert len(run(cli, deployment, "pending", "list")[1]["requests"]) == 1
    result = cli(
        "pending", "apply", "--json", "--log-level", "info", "--log-format", "json",
        config=deployment.config,
    )  # fmt: skip
    assert result.code == 0 and set(result.json()["requests"][0]["deleted"]) == expired
    events = [json.loads(line) for line in result.err.splitlines() if line.startswith("{")]
    applied = [e for e in events if e["event"] == "pending_applied"]
    assert applied and applied[0]["pending_id"] == first[1]["pending_id"]
    assert applied[0]["requested_at"] and applied[0]["requested_by"]
    assert run(cli, deployment, "prune")[1]["deleted"] == []


def test_pending_apply_dry_run_names_the_route_and_changes_nothing(deployment, cli):
    deployment.close()
    with app_holding(deployment.paths.qdrant):
        code, would = run(cli, deployment, "forget", deployment.seeded.live[0], "--dry-run")
        assert code == 0 and would["route"] == "queued" and would["pending_id"] is None
        assert pending.load(deployment.paths.state) == []  # a dry run queues nothing
        code, asked = run(cli, deployment, "forget", deployment.seeded.live[0], "--yes")
        assert code == 5
        code, dry = run(cli, deployment, "pending", "apply", "--dry-run")
        assert code == 0 and dry["route"] is None and dry["left"] == 1
    code, dry = run(cli, deployment, "pending", "apply", "--dry-run")
    assert code == 0 and dry["route"] == "direct" and dry["requests"][0]["status"] == "would-apply"
    assert deployment.seeded.live[0] in dry["requests"][0]["targets"] and dry["left"] == 1


def test_an_empty_queue_applies_nothing_and_exits_0(deployment, cli):
    code, applied = run(cli, deployment, "pending", "apply")
    assert code == 0 and applied["requests"] == [] and applied["route"] is None


def test_reconcile_and_confirm_without_a_route_exit_12_naming_the_ways(deployment, cli):
    deployment.close()
    with app_holding(deployment.paths.qdrant) as app:
        code, error = run(cli, deployment, "confirm", deployment.seeded.live[0])
    assert code == 12 and f"pid {app.pid}" in error["message"]
    assert "memsync.agent" in error["hint"] and "[app] stop_command" in error["hint"]


def test_doctor_warns_of_a_queue_and_errs_on_an_erasure_older_than_max_pending(deployment, cli):
    state = deployment.paths.state
    now = datetime.now(UTC)
    pending.add(state, pending.new_request("forget", now, memory_ids=[deployment.seeded.live[0]]))
    code, report = run(cli, deployment, "doctor")
    codes = {r["code"]: r["status"] for r in report["results"]}
    assert codes["pending-requests"] == "warning" and "pending-erasure-overdue" not in codes
    assert code == 0
    pending.add(state, pending.new_request("erase", now - timedelta(hours=25), user_id="bob"))
    code, report = run(cli, deployment, "doctor")
    overdue = [r for r in report["results"] if r["code"] == "pending-erasure-overdue"]
    assert code == 3 and len(overdue) == 1 and overdue[0]["status"] == "error"
    assert "max_pending" in overdue[0]["message"]


def test_job_apply_pending_applies_the_queue_as_an_app_units_exec_start_pre_would(deployment, cli):
    target = deployment.seeded.live[0]
    deployment.close()
    with app_holding(deployment.paths.qdrant):
        assert run(cli, deployment, "forget", target, "--yes")[0] == 5
    code, _ = run(cli, deployment, "job", "apply-pending")  # before the app opens the store
    assert code == 0 and pending.load(deployment.paths.state) == []
    memory = deployment.reopen()
    assert memory.history(target)[-1]["event"] == "DELETE"
    deployment.close()
