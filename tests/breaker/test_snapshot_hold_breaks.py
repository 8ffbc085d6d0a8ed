"""A quiesced snapshot of WAL files holds the app's writes only while its read snapshots open.

A real app (tests/helpers/app.py: its own ``mem0.Memory``, a write every 20 ms, the agent
attached) on WAL files (``memsync tune --wal``); ``snapshot create`` is held at a named step
(``tests.breaker.pauseat``) and the agent's write gate is read where the app's writes take it:
``<history.db>.memsync-gate/gate``, held exclusive by a pause (``memsync.agent.shared``).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memsync.agent.shared import gate_directory
from tests.helpers.app import AppProcess

ROOT = Path(__file__).resolve().parents[2]


def gate_paused(history_db: Path) -> bool:
    """Whether a pause holds the app's write gate (a shared ``flock`` would have to wait)."""
    directory = gate_directory(history_db)
    assert directory is not None
    fd = os.open(directory / "gate", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock at once
    return False


def history_rows(history_db: Path) -> int:
    with sqlite3.connect(f"{history_db.as_uri()}?mode=ro", uri=True) as connection:
        return int(connection.execute("SELECT count(*) FROM history").fetchone()[0])


@contextmanager
def create_held_at(config: Path, target: str, nth: int, flag: Path) -> Iterator[dict[str, Any]]:
    """``snapshot create --json`` held before the ``nth`` call of ``target`` until the block ends.

    The yielded dict gets ``code``, ``out`` and ``err`` once the create has finished.
    """
    create = subprocess.Popen(
        [sys.executable, "-m", "tests.breaker.pauseat", target, "--nth", str(nth),
         "--flag", str(flag), "--", "snapshot", "create", "--json", "--config", str(config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(1200):
            if flag.exists() or create.poll() is not None:
                break
            time.sleep(0.05)
        assert flag.exists(), create.communicate()
        finished: dict[str, Any] = {}
        yield finished
    finally:
        flag.unlink(missing_ok=True)
        out, err = create.communicate(timeout=120)
    finished.update(code=create.returncode, out=out, err=err)


@pytest.mark.slow(
    reason="two snapshot creates, each a fresh memsync process held at a step, beside a real app"
)
def test_the_pause_ends_once_the_read_snapshots_are_open_and_the_copy_runs_after(
    deployment: Any, cli: Any, tmp_path: Path
) -> None:
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    history_db = deployment.paths.history_db
    pins = len(list(deployment.paths.qdrant.glob("collection/*/storage.sqlite"))) + 1
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock, interval=0.02) as app:
        # held as it opens history.db's read snapshot, the last: the pause holds the app
        pinning = tmp_path / "pinning"
        with create_held_at(
            deployment.config, "memsync.stores.sqlite_files:_open_read_snapshot", pins, pinning
        ) as create:
            assert gate_paused(history_db)
        assert create["code"] == 0, create["err"]
        # held before the first copy: the app writes again while the copy waits to run
        copying = tmp_path / "copying"
        with create_held_at(
            deployment.config, "memsync.stores.sqlite_files:_copy_snapshot", 1, copying
        ) as create:
            assert not gate_paused(history_db)
            before = history_rows(history_db)
            deadline = time.monotonic() + 20
            while history_rows(history_db) == before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert history_rows(history_db) > before, "the app wrote nothing while memsync waited"
        assert create["code"] == 0, create["err"]
        report = json.loads(create["out"])
        stats = app.stop()
    assert report["quiesced"] is True and report["check"]["unsettled"] == []
    assert report["writes_held"]["until"] == "read-snapshots"
    manifest = json.loads((Path(report["path"]) / "manifest.json").read_text())
    assert manifest["capture"]["quiesced"] is True
    assert cli("snapshot", "verify", report["id"], config=deployment.config).code == 0
    assert stats["failures"] == 0, stats["errors"]
