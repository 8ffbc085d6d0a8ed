"""Every maintenance act while a real app runs, through its agent: route "agent", 0 failed writes.

The app (tests/helpers/app.py) is a real process with one ``mem0.Memory`` open for its whole
life and ``memsync.agent`` attached, adding, searching, updating and deleting its own memories
every 20 ms for the users it serves. memsync's commands run meanwhile; the app's own view (its
in-memory store, through ``get_all``) proves each write went through the app.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memsync.demo import deployment as build
from memsync.deployment import Deployment
from tests.conftest import error_findings
from tests.helpers.app import AppProcess
from tests.helpers.holders import app_holding

APP_USERS = ("alice", "bob")  # the app's own traffic; memsync acts on the others' memories


def _all_bytes(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in root.rglob("*") if p.is_file()]


def _app(deployment: Any, tmp_path: Path) -> AppProcess:
    """The app on ``deployment``, its agent attached, writing every 20 ms for ``APP_USERS``."""
    return AppProcess(
        deployment.paths.root,
        agent=tmp_path / "run" / "memsync-agent.sock",
        interval=0.02,
        users=APP_USERS,
    )


@pytest.fixture
def running(deployment: Any, tmp_path: Path) -> Any:
    deployment.close()
    with _app(deployment, tmp_path) as app:
        app.deployment = deployment
        yield app


def _finish(app: Any) -> None:
    stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] > 0


def test_prune_removes_exactly_the_expired_memories_through_the_app(running: Any, cli: Any) -> None:
    app, deployment = running, running.deployment
    expired = set(deployment.seeded.expired)
    assert expired and expired <= app.view()
    result = cli("prune", "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["route"] == "agent"
    assert set(report["deleted"]) == expired
    after = app.view()
    assert not after & expired  # the app's own store, at once
    assert set(deployment.seeded.live) - expired <= after  # nothing else went
    _finish(app)


def test_forget_erase_of_a_user_while_the_app_writes(running: Any, cli: Any) -> None:
    app, deployment = running, running.deployment
    memory_texts = _texts_of(deployment, "chandra")
    assert memory_texts
    result = cli(
        "forget", "--user", "chandra", "--erase", "--yes", "--json", config=deployment.config
    )
    assert result.code == 0, result.err
    report = result.json()
    assert report["route"] == "agent"
    assert not set(memory_texts) & app.view()
    assert "app writes paused" in app.log_text()  # the erasure's VACUUMs held app writes
    _finish(app)  # the app closes its store: every byte it wrote is on disk
    for path, data in _all_bytes(deployment.paths.root):
        for text in memory_texts.values():
            assert text.encode() not in data, (path, text)


def _texts_of(deployment: Any, user: str) -> dict[str, str]:
    """``{memory_id: text}`` of a user's live memories, read from a capture of the files."""
    from memsync import check, config

    settings = config.load(deployment.config, os.environ)
    inventory = check.settled_inventory(Deployment.open(settings), datetime.now(UTC), settle=False)[
        0
    ]
    return {
        point.id: str(point.payload.get("data"))
        for point in inventory.points.values()
        if point.payload.get("user_id") == user
    }


def test_confirm_stamps_through_the_app(running: Any, cli: Any) -> None:
    app, deployment = running, running.deployment
    target = next(m for m in deployment.seeded.live if m not in deployment.seeded.expired)
    result = cli("confirm", target, "--json", config=deployment.config)
    assert result.code == 0, result.err
    assert result.json()["route"] == "agent"
    _finish(app)
    memory = deployment.reopen()
    stamped = memory.vector_store.get(vector_id=target).payload
    assert stamped.get("confirmed_at", "").startswith(str(datetime.now(UTC).year))


def test_reconcile_repairs_a_resurrected_and_a_missing_point_through_the_app(
    deployment: Any, cli: Any, tmp_path: Path
) -> None:
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code == 0
    older = build.copy_qdrant(deployment.paths, tmp_path / "older")
    memory = deployment.reopen()
    live = [m for m in deployment.seeded.live if m not in deployment.seeded.expired]
    resurrected, missing = live[0], live[1]
    memory.delete(resurrected)
    deployment.close()
    build.put_back_qdrant(deployment.paths, older)  # one store restored from another hour
    memory = deployment.reopen()
    build.delete_with_failing_history(memory, deployment.paths, missing)
    deployment.close()
    with _app(deployment, tmp_path) as app:
        view = app.view()
        assert resurrected in view and missing not in view
        result = cli("reconcile", "--json", config=deployment.config)
        assert result.code == 0, result.err
        report = result.json()
        assert report["route"] == "agent"
        view = app.view()
        assert resurrected not in view and missing in view
        checked = cli("check", "--json", config=deployment.config).json()
        assert checked["counts"]["errors"] == 0, error_findings(checked)
        _finish(app)


def test_doctor_names_the_route_a_write_would_take(running: Any, cli: Any) -> None:
    app, deployment = running, running.deployment
    report = cli("doctor", "--json", config=deployment.config).json()
    (route,) = [r for r in report["results"] if r["code"] == "write-route"]
    assert route["status"] == "ok" and f"agent (pid {app.pid})" in route["message"]
    _finish(app)
    with app_holding(deployment.paths.qdrant) as holder:  # an app without the agent
        report = cli("doctor", "--json", config=deployment.config).json()
    (route,) = [r for r in report["results"] if r["code"] == "write-route"]
    assert route["status"] == "warning" and f"pid {holder.pid}" in route["message"]
    assert "queued" in route["message"] and "memsync.agent" in route["fix"]
