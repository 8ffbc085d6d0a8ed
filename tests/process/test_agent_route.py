"""Writes take the agent route while the app runs with ``memsync.agent``: no downtime, no queue.

The app is the real app process (tests/helpers/app.py) with the agent attached and traffic of
its own; memsync finds the agent by itself (the socket the store's holder listens on).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.app import AppProcess
from tests.helpers.holders import app_holding

TRAFFIC = ("agent-app-traffic",)


def run(cli: Any, deployment: Any, *argv: str) -> tuple[int, dict[str, Any]]:
    result = cli(*argv, "--json", config=deployment.config)
    return result.code, (result.json() if result.out else json.loads(result.err.splitlines()[-1]))


@pytest.fixture
def app(deployment: Any, tmp_path: Any) -> Any:
    deployment.close()
    with AppProcess(
        deployment.paths.root, agent=tmp_path / "run" / "memsync-agent.sock", users=TRAFFIC
    ) as process:
        process.deployment = deployment
        yield process


def test_forget_prune_and_confirm_go_through_the_running_apps_agent(app: Any, cli: Any) -> None:
    deployment = app.deployment
    seeded = deployment.seeded
    target, confirmed = [m for m in seeded.live if m not in seeded.expired][:2]
    code, forgot = run(cli, deployment, "forget", target, "--yes", "--no-snapshot")
    assert code == 0 and forgot["route"] == "agent" and forgot["downtime_s"] is None
    assert forgot["deleted"] == [target] and forgot["unproven"] == []
    code, pruned = run(cli, deployment, "prune")
    assert code == 0 and pruned["route"] == "agent"
    assert set(pruned["deleted"]) == set(seeded.expired)
    code, stamped = run(cli, deployment, "confirm", confirmed)
    assert code == 0 and stamped["route"] == "agent" and stamped["confirmed"] == [confirmed]
    view = app.view()  # the app's own in-memory store: the deletes reached it at once
    assert target not in view and not set(seeded.expired) & view and confirmed in view
    assert app.process.poll() is None  # never stopped
    assert app.stop()["failures"] == 0


def test_a_queued_erasure_is_applied_through_the_agent_once_the_app_has_one(
    deployment: Any, cli: Any, tmp_path: Any
) -> None:
    deployment.close()
    with app_holding(deployment.paths.qdrant):  # an app without an agent
        code, asked = run(cli, deployment, "forget", "--user", "bob", "--erase", "--yes")
    assert code == 5 and asked["route"] == "queued" and asked["targets"]
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock, users=TRAFFIC) as app:
        code, applied = run(cli, deployment, "pending", "apply")
        assert code == 0 and applied["route"] == "agent" and applied["left"] == 0
        assert set(applied["requests"][0]["deleted"]) == set(asked["targets"])
        assert not set(asked["targets"]) & app.view()
        assert app.stop()["failures"] == 0
