"""``migrate --switch`` keeps the app's downtime within ``[app] max_downtime_s``.

The final catch-up runs while the app is stopped: when it would overrun the bound (here an
embedder that stops answering, as a remote one does, while 60 memories added since the copy
wait to be embedded), it is interrupted, no config is written and the app is started again on
the source. The embedder is the tests' gated one (it waits while its gate file is absent), so
the overrun does not depend on the machine's speed, and the bound (5 s) leaves the app's start,
which it also bounds, room on a loaded machine (at 1.5 s the start itself overran there).
"""

from __future__ import annotations

import json

from memsync.demo import deployment as build
from tests.helpers import window_app
from tests.helpers.migrate import target_config
from tests.helpers.migrate_plugin import GATE_ENV
from tests.helpers.switching import file_deployment, holder_pid, journal, memsync, start_app

DOWNTIME_S = 5


def test_a_final_catch_up_that_would_overrun_max_downtime_leaves_the_app_on_the_source(
    make_deployment, tmp_path
):
    app = file_deployment(make_deployment)
    with app.config.open("a", encoding="utf-8") as handle:
        handle.write(f"max_downtime_s = {DOWNTIME_S}\n")  # the [app] table is the config's last
    new = target_config(app.paths, tmp_path / "new", embedder="migrate_gated", dims=256)
    gate = tmp_path / "embedder-answers"
    gate.touch()
    env = {GATE_ENV: str(gate)}
    assert memsync("migrate", "--to", new, config=app.config, env=env).returncode == 0
    memory = build.open_memory(app.paths, "memsync_hash", 384)  # the app wrote on since
    try:
        for n in range(60):
            memory.add(f"written after the copy {n}", user_id="late", infer=False)
    finally:
        build.close_memory(memory)
    before = app.app_file.read_bytes()
    old_pid = start_app(app)
    try:
        gate.unlink()  # the embedder stops answering: the catch-up cannot end in time
        switched = memsync("migrate", "--to", new, "--switch", config=app.config, env=env)
        assert switched.returncode == 75, switched.stderr
        assert f"overran [app] max_downtime_s = {DOWNTIME_S} s" in switched.stderr
        assert len(switched.stderr.strip().splitlines()) <= 2  # the error and its hint
        new_pid = window_app.pid_of(app.paths.root)
        assert new_pid is not None and new_pid != old_pid  # started again ...
        assert holder_pid(app.config) == new_pid  # ... on the source
    finally:
        window_app.stop(app.paths.root)
    assert app.app_file.read_bytes() == before
    assert not app.app_file.with_name(app.app_file.name + ".bak").exists()
    pins = [json.loads(p.read_text()) for p in (app.paths.root / "snapshots").glob("*/pinned.json")]
    assert pins and all(pin["pinned"] is False for pin in pins)  # not switched: left to retention
    assert journal(app.paths)["phase"] in ("copy", "verified")  # not switched (copy: cut mid-batch)
    # As the hint says: catch up again (the app running), and the copy is verified again.
    gate.touch()
    assert memsync("migrate", "--to", new, config=app.config, env=env).returncode == 0
    assert journal(app.paths)["phase"] == "verified"
