"""Breaker: a replica holding the ``.tmp`` file Litestream leaves when it dies mid-snapshot.

Litestream 0.3's directory replica writes a snapshot to ``<index>.snapshot.lz4.tmp`` and
renames it when whole (``file/replica_client.go``). Killed while it writes the first snapshot
of a new generation (a lost disk right after the daemon began one), the replica holds a
generation directory with that ``.tmp`` alone. ``protection.SEGMENT`` is a ``search``, so
``pick`` counts the ``.tmp`` as the generation's snapshot and ``latest`` picks that generation,
which Litestream cannot restore.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.process.test_restore_at import replicated


@pytest.mark.slow(reason="the daemon and Litestream shipping, a replica restored in work_dir")
def test_a_half_written_snapshot_of_a_new_generation_does_not_hide_the_last_whole_one(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, _, _ = replicated(
        make_deployment, tmp_path, cli, "keeps the spare key under the mat"
    )
    [snapshot] = (tmp_path / "replica").glob("history.db/generations/*/snapshots/*.snapshot.lz4")
    partial = snapshot.parents[2] / "ffffffffffffffff" / "snapshots" / "00000000.snapshot.lz4.tmp"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(snapshot.read_bytes()[:64])  # the first bytes Litestream had written

    verified = cli("protect", "--verify", config=deployment.config)
    looked = cli("restore", "--at", "latest", "--dry-run", config=deployment.config)

    assert verified.code == 0, verified.err
    assert looked.code == 0, looked.err
