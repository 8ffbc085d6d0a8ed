"""The daemon's prune job against a running app: through its agent, and through a window.

Real processes only: the daemon, the app (``memsync.demo.app``: one ``mem0.Memory`` for life,
writing), the job's ``memsync prune`` child. The job succeeds, the app's own view loses exactly
the expired memories, and the app's writes never fail.
"""

from __future__ import annotations

from tests.helpers import window_app
from tests.helpers.app import AppProcess
from tests.process.test_daemon import Notify, start, state, stop, with_daemon


def _expired_live(deployment) -> set[str]:
    return set(deployment.seeded.expired)


def test_the_prune_job_succeeds_through_the_apps_agent(deployment, tmp_path):
    deployment.close()
    with_daemon(deployment, 'prune_every = "1h"\n')  # never ran: it runs at start
    expired = _expired_live(deployment)
    with AppProcess(
        deployment.paths.root, agent=tmp_path / "run" / "memsync-agent.sock", users=("alice",)
    ) as app:
        assert expired <= app.view()
        daemon = start(deployment.config, Notify(tmp_path))
        try:
            finished = daemon.wait_event("job_finished")[0]
        finally:
            assert stop(daemon)[0] == 0
        assert finished["job"] == "prune" and finished["outcome"] == "ok", finished
        assert finished["route"] == "agent" and finished["deleted"] == len(expired)
        assert not app.view() & expired
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    record = state(deployment.paths.root)["jobs"]["prune"]
    assert record["last_outcome"] == "ok" and record["failing"] is False


def test_the_prune_job_succeeds_through_a_maintenance_window(deployment, tmp_path):
    deployment.close()
    root = deployment.paths.root
    deployment.config.write_text(deployment.config.read_text() + window_app.commands(root))
    with_daemon(deployment, 'prune_every = "1h"\n')
    assert window_app.start(root) == 0
    first = window_app.pid_of(root)
    try:
        daemon = start(deployment.config, Notify(tmp_path))
        try:
            finished = daemon.wait_event("job_finished")[0]
        finally:
            assert stop(daemon)[0] == 0
        assert finished["job"] == "prune" and finished["outcome"] == "ok", finished
        assert finished["route"] == "window" and finished["deleted"] == len(
            _expired_live(deployment)
        )
        assert 0 < finished["downtime_s"] < 60
        restarted = window_app.pid_of(root)
        assert restarted is not None and restarted != first  # stopped, then started again
    finally:
        window_app.stop(root)
    record = state(root)["jobs"]["prune"]
    assert record["last_outcome"] == "ok" and record["summary"]["downtime_s"] > 0
