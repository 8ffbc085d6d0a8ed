"""``migrate --switch`` tells a running daemon to reload the config that now names the target."""

from __future__ import annotations

from tests.helpers.migrate import target_config
from tests.process.test_daemon import Notify, start, stop

# The daemon acts on SIGHUP when its sleep ends (until the next job is due): a short schedule.
DAEMON = '\n[daemon]\ncheck_every = "2s"\n'


def test_the_switch_sends_the_running_daemon_sighup_and_it_reloads_the_target(
    make_deployment, tmp_path, cli
):
    source = make_deployment(count=10)
    source.close()  # the app is stopped; its mem0 dict is in code
    source.config.write_text(source.config.read_text() + DAEMON)
    new = target_config(source.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    new.write_text(new.read_text() + DAEMON)  # NEW.toml is the whole config memsync will read
    assert cli("migrate", "--to", str(new), config=source.config).code == 0
    daemon = start(source.config, Notify(tmp_path))
    try:
        daemon.wait_event("job_finished")  # its first check
        result = cli("migrate", "--to", str(new), "--switch", "--json", config=source.config)
        assert result.code == 0, result.err
        assert result.json()["switch"]["daemon_reloaded"] == daemon.pid
        daemon.wait_event("config_reloaded")  # at its next wake-up (check_every)
    finally:
        code, err = stop(daemon)
    assert code == 0
    assert "config_reload_failed" not in err
