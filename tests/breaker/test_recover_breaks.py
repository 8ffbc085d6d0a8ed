"""recover SIGKILLed between a memory's recover event and its point, and recover of a memory
whose last text from history the app's agent refuses to embed (empty or over its limit)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from memsync.config import load
from tests.process.test_recover import history_rows, memsync, stored, verified_snapshot

ROOT = Path(__file__).resolve().parents[2]


def drill(make_deployment: Any, cli: Any, texts: list[str]) -> tuple[Any, str, list[str], dict]:
    """A snapshot, ``texts`` written over the first memories of a user after it, then delete_all."""
    deployment = make_deployment(count=40)
    snapshot_id = verified_snapshot(cli, deployment)
    snapped = stored(deployment)
    victim = next(iter(snapped.values()))[0]["user_id"]
    theirs = sorted(m for m, (payload, _) in snapped.items() if payload["user_id"] == victim)
    memory = deployment.reopen()
    for memory_id, text in zip(theirs, texts, strict=False):
        memory.update(memory_id, text)
    deployment.close()
    last = stored(deployment)
    memory = deployment.reopen()
    memory.delete_all(user_id=victim)
    deployment.close()
    return deployment, snapshot_id, theirs, last | {"victim": victim}


def test_recover_killed_after_a_recover_event_is_finished_by_the_next_run(make_deployment, cli):
    texts = ["a text written after the snapshot", "ünïcødé 🧠 text\nwith a newline"]
    deployment, snapshot_id, theirs, last = drill(make_deployment, cli, texts)
    victim = last.pop("victim")
    killed = subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat",
         "memsync.stores.agent_client:AgentWriter.put_back_text", "--",
         "recover", "--user", victim, "--from", snapshot_id, "--config", str(deployment.config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    work_dir = load(deployment.config, os.environ).work_dir
    assert [p.name for p in work_dir.glob("recover-*")]  # SIGKILL: the snapshot's copy stays
    code, done = memsync(deployment, "recover", "--user", victim, "--from", snapshot_id)
    assert code == 0, done
    after = stored(deployment)
    assert set(theirs) <= set(after)
    for memory_id in theirs:
        assert after[memory_id][0]["data"] == last[memory_id][0]["data"]
        assert after[memory_id][0] == last[memory_id][0]  # updated_at: the text's, as unkilled
        recover_events = [r for r in history_rows(deployment, memory_id) if r[1] == "memsync"]
        assert len(recover_events) == 1, recover_events
    assert done["check_after"]["errors"] == 0
    assert not list(work_dir.glob("recover-*"))  # the next run removed the dead one's copy


def test_a_last_text_the_app_cannot_embed_leaves_no_recover_event(make_deployment, cli):
    """A last text over the agent's limit: that memory FAILED, nothing written for it (no event
    saying it came back, which made every later run "finish" it and fail again); the rest back."""
    deployment, snapshot_id, theirs, last = drill(make_deployment, cli, ["x" * 70_000])
    victim = last.pop("victim")
    for _ in range(2):
        code, done = memsync(deployment, "recover", "--user", victim, "--from", snapshot_id)
        assert code != 0, done
        status = {m["memory_id"]: m for m in done["memories"]}
        assert status[theirs[0]]["status"] == "failed", status[theirs[0]]
        assert "70,000 characters" in status[theirs[0]]["error"]
        assert history_rows(deployment, theirs[0])[-1][0] == "DELETE"
        assert theirs[0] not in stored(deployment)
        assert set(theirs[1:]) <= set(stored(deployment))
