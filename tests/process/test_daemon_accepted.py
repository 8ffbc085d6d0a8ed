"""The daemon's jobs run on the configuration it accepted, mem0_config_file included (no TOML edited)."""

from __future__ import annotations

import json
import signal
import time
import tomllib

from tests.process.test_daemon import Notify, events, start, state, stop, wait_state


def test_jobs_keep_the_accepted_mem0_file_when_a_reload_breaks_it(deployment, tmp_path):
    deployment.close()
    text = deployment.config.read_text()
    mem0 = tomllib.loads(text)["mem0"]
    (deployment.config.parent / "mem0.json").write_text(json.dumps(mem0))
    head, tail = text.split("[mem0]", 1)
    config_text = (
        head
        + 'mem0_config_file = "mem0.json"\n\n[snapshot]'
        + tail.split("[snapshot]", 1)[1]
        + '\n[daemon]\ncheck_every = "1s"\n'
    )
    deployment.config.write_text(config_text)
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)
    try:
        notify.wait_for("READY=1")
        wait_state(
            deployment.paths.root,
            lambda s: s.get("jobs", {}).get("check", {}).get("last_outcome") == "ok",
        )
        accepted = json.loads((deployment.paths.state / "daemon-config.json").read_text())
        assert accepted["mem0"] == mem0 and "mem0_config_file" not in accepted
        (deployment.config.parent / "mem0.json").write_text("{ not json")
        process.send_signal(signal.SIGHUP)
        time.sleep(1.5)
        ran = state(deployment.paths.root)["jobs"]["check"]["last_run_at"]
        # a later run succeeds: the jobs read the accepted mem0 dict, not the broken file (exit 10)
        wait_state(
            deployment.paths.root,
            lambda s: s["jobs"]["check"].get("last_success_at", "") > ran,
            timeout_s=20,
        )
    finally:
        code, err = stop(process)
    assert code == 0
    assert deployment.config.read_text() == config_text
    assert any(
        e.get("event") == "config_reload_failed" and "mem0_config_file" in e.get("error", "")
        for e in events(err)
    )
