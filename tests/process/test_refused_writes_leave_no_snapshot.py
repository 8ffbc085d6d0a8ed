"""A write its route would refuse is refused before its safety snapshot: none is left behind.

The writer's start refuses a plugin the app's interpreter cannot import (exit 10); memsync asks
the app's interpreter first (as doctor does), so forget and reconcile take no snapshot then.
"""

from __future__ import annotations

from memsync.demo import deployment as build


def snapshot_names(deployment) -> list[str]:
    snapshots = deployment.paths.root / "snapshots"
    return sorted(p.name for p in snapshots.iterdir()) if snapshots.exists() else []


def test_forget_and_reconcile_refused_by_the_apps_interpreter_take_no_snapshot(deployment, cli):
    live = [m for m in deployment.seeded.live if m not in deployment.seeded.expired]
    memory = deployment.reopen()
    build.delete_with_failing_history(memory, deployment.paths, live[-1])  # reconcile has work
    deployment.close()
    text = deployment.config.read_text()
    plugins = 'plugins = ["memsync.demo.providers"]'
    assert plugins in text
    deployment.config.write_text(
        text.replace(plugins, 'plugins = ["memsync.demo.providers", "app_plugin_not_installed"]')
    )
    before = snapshot_names(deployment)
    for argv in (("forget", live[0], "--yes"), ("reconcile", "--record-lost")):
        result = cli(*argv, config=deployment.config)
        assert result.code == 10, (argv, result.out, result.err)
        assert "app_plugin_not_installed" in result.err
        assert snapshot_names(deployment) == before, argv
