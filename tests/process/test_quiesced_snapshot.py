"""A snapshot taken through the app's agent: app writes paused for the capture, the pair exact.

The app is a real process (tests/helpers/app.py) writing through its own ``mem0.Memory`` every
20 ms with ``memsync.agent`` attached.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.helpers.app import AppProcess


def test_a_quiesced_snapshot_of_a_busy_app_restores_to_a_clean_check(
    deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment.close()
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock, interval=0.02) as app:
        created = cli("snapshot", "create", "--json", config=deployment.config)
        assert created.code == 0, created.err
        report = created.json()
        assert report["quiesced"] is True and report["route"] == "agent"
        # rollback journal (mem0's default): the pause lasts the copy (commands/snapshot.md)
        assert report["writes_held"]["until"] == "copy" and report["writes_held"]["s"] > 0
        assert report["check"]["errors"] == 0 and report["check"]["unsettled"] == []
        manifest = json.loads((Path(report["path"]) / "manifest.json").read_text())
        assert manifest["capture"]["quiesced"] is True
        assert cli("snapshot", "verify", report["id"], "--json", config=deployment.config).code == 0
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] > 0
    assert "app writes paused" in app.log_text() and "app writes resumed" in app.log_text()
    restored = cli("restore", report["id"], "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.err
    checked = cli("check", "--json", config=deployment.config)
    assert checked.code == 0, checked.out
    assert [f for f in checked.json()["findings"] if f["severity"] == "error"] == []


def test_without_an_agent_the_manifest_does_not_claim_quiesced(deployment: Any, cli: Any) -> None:
    deployment.close()
    created = cli("snapshot", "create", "--json", config=deployment.config)
    assert created.code == 0, created.err
    assert created.json()["quiesced"] is False and created.json()["route"] == "none"
    manifest = json.loads((Path(created.json()["path"]) / "manifest.json").read_text())
    assert "quiesced" not in manifest["capture"]
    assert os.environ.get("MEMSYNC_AGENT_SOCKET") is None
