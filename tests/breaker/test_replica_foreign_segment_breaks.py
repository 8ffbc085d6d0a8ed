"""Breaker: a replica edited by hand, a WAL segment of another file's generation put in it.

history.db's last segment copied into the collection's generation as its next index
(``00000001_00000000.wal.lz4``): ``pick`` takes the highest index as the position restored,
Litestream restores through it (SQLite ignores frames whose salts are not the database's), and
``protect --verify`` reports the collection restored to that position and the pair clean.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.process.test_restore_at import replicated


@pytest.mark.slow(reason="the daemon and Litestream shipping, a replica restored in work_dir")
def test_protect_verify_never_reports_a_position_from_a_foreign_segment(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, _, _ = replicated(
        make_deployment, tmp_path, cli, "keeps the spare key under the mat"
    )
    replica = tmp_path / "replica"
    foreign = sorted(replica.glob("history.db/generations/*/wal/*"))[-1]
    [wal] = replica.glob("collection/*/generations/*/wal")
    index = int(sorted(wal.iterdir())[-1].name[:8], 16) + 1
    planted = wal / f"{index:08x}_00000000.wal.lz4"
    shutil.copy2(foreign, planted)
    planted_position = f"{wal.parent.name}/{planted.name[:17]}"

    done = cli("protect", "--verify", "--json", config=deployment.config)

    Path(tmp_path / "verify.json").write_text(done.out + done.err)
    if done.code == 0:
        positions = [f["position"] for f in done.json()["at"]["files"]]
        assert planted_position not in positions, positions
