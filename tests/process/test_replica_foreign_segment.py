"""A replica holding a WAL segment that is not of its generation's WAL: refused, never reported.

SQLite skips the frames of a segment whose salts are not its WAL header's, so the restored file
stops before it; memsync refuses such a replica (exit 11, the segment named) rather than
report a position it did not restore, and restores it again once the segment is moved aside.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lz4.frame
import pytest

from tests.process.test_restore_at import replicated


@pytest.mark.slow(reason="the daemon and Litestream shipping, replicas restored in work_dir")
def test_a_segment_of_another_wal_in_the_generation_is_refused_and_named(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, _, _ = replicated(
        make_deployment, tmp_path, cli, "keeps the spare key under the mat"
    )
    replica = tmp_path / "replica"
    foreign = sorted(replica.glob("history.db/generations/*/wal/*"))[-1]
    [wal] = replica.glob("collection/*/generations/*/wal")
    last = sorted(wal.iterdir())[-1]  # history's frames at the next offset of the same WAL
    index, offset = last.name[:8], int(last.name[9:17], 16)
    offset += len(lz4.frame.decompress(last.read_bytes()))
    planted = wal / f"{index}_{offset:08x}.wal.lz4"
    shutil.copy2(foreign, planted)
    position = f"{wal.parent.name}/{planted.name[:17]}"

    verified = cli("protect", "--verify", "--json", config=deployment.config)
    restored = cli("restore", "--at", "latest", "--dry-run", config=deployment.config)

    assert verified.code == 11, verified.out
    assert position not in verified.out
    for done in (verified, restored):
        assert done.code == 11 and done.err.count("\n") == 1, done.err
        assert f"holds generations/{wal.parent.name}/wal/{planted.name}," in done.err
        assert "the salts of another WAL" in done.err
    aside = tmp_path / "aside"
    aside.mkdir()
    shutil.move(planted, aside / planted.name)
    again = cli("protect", "--verify", "--json", config=deployment.config)
    assert again.code == 0, again.out
    assert position not in [f["position"] for f in again.json()["at"]["files"]]
