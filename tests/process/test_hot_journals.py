"""What a crashed app leaves, met by every command (embedded Qdrant, mem0's rollback journals).

The app, stopped, was killed inside a write of history.db or of a collection's
``storage.sqlite``: its hot ``-journal`` stays beside the file (tests/helpers/hot_journal.py).
"""

from __future__ import annotations

import base64
import json
import pickle
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_findings
from tests.helpers import window_app
from tests.helpers.holders import killed_writer_argv
from tests.helpers.hot_journal import (
    WRITERS,
    argv,
    assert_read_or_refused,
    assert_rolled_back_and_kept,
    crash,
    rows,
    storage_file,
)
from tests.helpers.migrate import target_config
from tests.helpers.switching import file_deployment, memsync, start_app


@pytest.mark.parametrize("file", ["history", "storage"])
@pytest.mark.parametrize("command", list(WRITERS))
def test_a_command_that_writes_rolls_the_hot_journal_back_and_keeps_every_committed_row(
    deployment, cli, tmp_path, command, file
):
    crashed = crash(deployment, cli, file)
    result = cli(*argv(crashed, WRITERS[command], tmp_path), config=deployment.config)
    assert_rolled_back_and_kept(crashed, cli, command, result)


@pytest.mark.parametrize("file", ["history", "storage"])
def test_a_command_that_reads_reads_or_refuses_with_75_and_changes_nothing(
    deployment, cli, tmp_path, file
):
    assert_read_or_refused(crash(deployment, cli, file), cli, tmp_path)


@pytest.mark.parametrize("file", ["history", "storage"])
def test_an_erasure_after_a_restore_rolls_back_the_hot_journal_moved_aside_with_the_old_files(
    deployment, cli, file
):
    crashed = crash(deployment, cli, file)
    restored = cli("restore", crashed.snapshot, "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.err
    result = cli("forget", "--user", "bob", "--erase", "--yes", "--json", config=deployment.config)
    assert result.code == 0, result.err[-600:]
    assert not list(deployment.paths.root.rglob("*-journal"))
    erased = set(result.json()["deleted"])
    aside = Path(f"{deployment.paths.qdrant}.pre-restore-{crashed.snapshot}")
    kept = rows(aside / "collection" / "mem0" / "storage.sqlite", "points")
    gone = {row["id"] for row in crashed.points} - {row["id"] for row in kept}
    assert {pickle.loads(base64.b64decode(key)) for key in gone} <= erased  # noqa: S301 - ours
    assert all(row in crashed.points for row in kept)  # the killed write rolled back, no more
    history = rows(Path(f"{deployment.paths.history_db}.pre-restore-{crashed.snapshot}"))
    assert [row["id"] for row in history] == [row["id"] for row in crashed.history]
    checked = cli("check", "--json", config=deployment.config)
    assert checked.code == 0 and error_findings(checked.json()) == {}, checked.out[-800:]


def stop_kills_a_writer(app: Any, file: str) -> tuple[Path, list[str]]:
    """Make the window app's stop kill a worker inside its write of ``file``; it, the writer.

    As CI's prefork server stopped by SIGTERM: the app stops, a write thread's transaction is
    left half-done (``holders.killed_writer_argv``).
    """
    if file == "history":
        path, killed = app.paths.history_db, killed_writer_argv(app.paths.history_db)
    else:
        path = storage_file(app)
        killed = killed_writer_argv(path, "points", "point")
    text = app.config.read_text()
    stop = json.loads(text.split("stop_command = ", 1)[1].split("\n", 1)[0])
    stopping = ["sh", "-c", f"{shlex.join(stop)} && {shlex.join(killed)}"]
    app.config.write_text(text.replace(json.dumps(stop), json.dumps(stopping)))
    return path, killed


@pytest.mark.parametrize("running", [True, False], ids=["stopped-by-the-window", "stopped"])
@pytest.mark.parametrize("file", ["history", "storage"])
def test_a_switch_after_a_stop_that_left_a_hot_journal_rolls_it_back_and_switches(
    make_deployment, tmp_path, file, running
):
    app = file_deployment(make_deployment)
    path, killed = stop_kills_a_writer(app, file)
    new = target_config(app.paths, tmp_path / "new", embedder="memsync_hash", dims=384)
    copied = memsync("migrate", "--to", new, config=app.config)
    assert copied.returncode == 0, copied.stderr
    committed = rows(app.paths.history_db)
    if running:  # the window's stop kills a writer
        start_app(app)
    else:  # the app was stopped so before the switch: no window
        subprocess.run(killed, check=True, timeout=60)
    try:
        switched = memsync("migrate", "--to", new, "--switch", "--json", config=app.config)
        assert switched.returncode == 0, switched.stderr[-800:]
        assert json.loads(switched.stdout)["switch"]["switched"] is True
    finally:
        window_app.stop(app.paths.root)
    assert not Path(f"{path}-journal").exists()  # (the app, started again, writes history.db)
    after = {row["id"]: row for row in rows(app.paths.history_db)}
    assert all(after.get(row["id"]) == row for row in committed)
