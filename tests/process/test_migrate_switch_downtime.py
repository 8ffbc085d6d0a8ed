"""``migrate --switch`` keeps the app's downtime within ``[app] max_downtime_s``.

The final catch-up runs while the app is stopped: when it would overrun the bound (here a
slow embedder, 30 ms a call, standing for a remote one, and 60 memories added since the
copy), it is interrupted, no config is written and the app is started again on the source.
"""

from __future__ import annotations

import json

from memsync.demo import deployment as build
from tests.helpers import window_app
from tests.helpers.migrate import target_config
from tests.helpers.switching import file_deployment, holder_pid, journal, memsync, start_app


def test_a_final_catch_up_that_would_overrun_max_downtime_leaves_the_app_on_the_source(
    make_deployment, tmp_path
):
    app = file_deployment(make_deployment)
    with app.config.open("a", encoding="utf-8") as handle:
        handle.write("max_downtime_s = 1.5\n")  # the [app] table is the config's last
    new = target_config(app.paths, tmp_path / "new", embedder="migrate_slow", dims=256)
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    memory = build.open_memory(app.paths, "memsync_hash", 384)  # the app wrote on since
    try:
        for n in range(60):
            memory.add(f"written after the copy {n}", user_id="late", infer=False)
    finally:
        build.close_memory(memory)
    before = app.app_file.read_bytes()
    old_pid = start_app(app)
    try:
        switched = memsync("migrate", "--to", new, "--switch", config=app.config)
        assert switched.returncode == 75, switched.stderr
        assert "overran [app] max_downtime_s = 1.5 s" in switched.stderr
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
    assert memsync("migrate", "--to", new, config=app.config).returncode == 0
    assert journal(app.paths)["phase"] == "verified"
