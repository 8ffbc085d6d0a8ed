"""Breaker: ``forget --erase`` (no daemon) SIGKILLed once the new generation is on the replica.

Without a daemon, the erasure runs a ``litestream replicate`` of its own for the new
generation, then removes the older generations (``erase.replicas._remove``) and stops it.
Killed at ``_remove``, that Litestream outlives it, holding a read transaction on every file,
and the older generations, which hold the erased text, stay on the replica. It is recorded
(``protect-erasure.json``): ``protect --status`` and ``doctor`` name it, and running the same
erasure again stops it and finishes, leaving no Litestream and no record behind. Killed
just after Litestream started, before the record names its pid, it is found by the record's
token in its environment. A daemon started before the retry stops it before starting its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.breaker.pauseat import ROOT
from tests.helpers import litestream
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_protect import state_dir
from tests.process.test_protect_erase import MARKER, decompressed_hits, replicated_once


def litestreams_of(config_file: Path) -> list[int]:
    """The pids of Litestream processes replicating with ``config_file`` (by /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"replicate" in argv and str(config_file).encode() in argv:
                found.append(int(entry.name))
    return found


def killed_at_remove(
    make_deployment: Any, tmp_path: Path, cli: Any, step: str = "_remove", nth: int = 1
) -> tuple[Any, str, Path]:
    """A replicated deployment whose ``forget --erase`` (no daemon) was SIGKILLed at ``step``.

    Returns ``(deployment, target, replica)``.
    """
    deployment, target, replica = replicated_once(
        make_deployment, tmp_path, cli, litestream.ensure()
    )
    killed = subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat", f"memsync.erase.replicas:{step}",
         "--nth", str(nth), "--", "forget", target, "--erase", "--yes", "--config", str(deployment.config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    return deployment, target, replica


def stop_left(config_file: Path) -> None:
    for pid in litestreams_of(config_file):  # an orphan this test's kill left
        os.kill(pid, signal.SIGTERM)


@pytest.mark.slow(reason="Litestream's first shipments, an erasure killed, the erasure again")
@pytest.mark.parametrize(
    ("step", "nth", "recorded"),
    [("_remove", 1, True), ("_record", 2, False)],  # _record's second: its pid not yet written
    ids=["at-remove", "before-its-pid-is-recorded"],
)
def test_an_erasure_killed_before_removing_the_old_generations_is_finished_by_running_it_again(
    make_deployment: Any, tmp_path: Path, cli: Any, step: str, nth: int, recorded: bool
) -> None:
    config_file = tmp_path / "dep" / "memsync-state" / "litestream.yml"
    try:
        deployment, target, replica = killed_at_remove(make_deployment, tmp_path, cli, step, nth)
        assert state_dir(deployment) / "litestream.yml" == config_file
        record = state_dir(deployment) / "protect-erasure.json"
        [orphan] = litestreams_of(config_file)
        pid = json.loads(record.read_text())["pid"]  # recorded before the kill
        assert pid == (orphan if recorded else None)
        named = f"Litestream pid {orphan} was left running by a memsync erasure that was killed"
        status = cli("protect", "--status", "--json", config=deployment.config)
        assert any(p.startswith(named) for p in status.json()["problems"]), status.out
        doctor = cli("doctor", "--json", config=deployment.config).json()["results"]
        [warned] = [r for r in doctor if r["message"].startswith(named)]
        assert warned["status"] == "warning" and "forget --erase again" in warned["fix"]

        again = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)

        hits = decompressed_hits(replica, MARKER.encode())
        assert again.code == 0, (again.code, again.json()["replicas"]["problem"], hits)
        assert hits == []
        renewed = again.json()["replicas"]  # as an erasure never interrupted reports it
        assert renewed["renewed"] is True and renewed["problem"] is None
        history = next(f for f in renewed["files"] if f["label"] == "history.db")
        generations = replica / "history.db" / "generations"
        assert [p.name for p in generations.iterdir()] == [history["new_generation"]]
        assert litestreams_of(config_file) == []  # the orphan stopped, the retry's own too
        assert not record.exists()
    finally:
        stop_left(config_file)


@pytest.mark.slow(reason="Litestream's first shipments, an erasure killed, the daemon, the erasure")
def test_a_daemon_started_after_such_a_kill_stops_that_litestream_before_it_starts_its_own(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    config_file = tmp_path / "dep" / "memsync-state" / "litestream.yml"
    try:
        deployment, target, replica = killed_at_remove(make_deployment, tmp_path, cli)
        [orphan] = litestreams_of(config_file)
        (tmp_path / "second").mkdir()  # replicated_once's daemon had its own
        daemon = start(deployment.config, Notify(tmp_path / "second"))
        try:
            [stopped] = daemon.wait_event("litestream_orphan_stopped")
            [started] = daemon.wait_event("litestream_started")
            assert stopped["pid"] == orphan
            assert litestreams_of(config_file) == [started["pid"]]  # one Litestream per file
            again = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)
        finally:
            code, err = stop(daemon)
        assert code == 0, err
        assert again.code == 0, again.out + again.err
        assert decompressed_hits(replica, MARKER.encode()) == []
        assert not (state_dir(deployment) / "protect-erasure.json").exists()
    finally:
        stop_left(config_file)
