"""Breaker: ``forget --erase`` with ``[protect]`` after a ``restore --at`` moved the stores aside.

A memory written while Litestream ran is in its local shadow WAL beside the file
(``.storage.sqlite-litestream/generations/*/wal/*.wal``, raw WAL frames). ``restore --at``
moves the whole live vector store directory aside (``qdrant.pre-restore-at-*``), its shadow
directory with it; the erasure then rewrites the pre-restore copies' databases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.process.test_daemon import stop
from tests.process.test_protect_erase import decompressed_hits, local_hits
from tests.process.test_restore_at import add, running, shipped

MARKER = "the locker code is BRK4-5521-OMEGA-shadow"


@pytest.mark.slow(reason="the daemon and Litestream shipping, a restore --at, an erasure")
def test_an_erasure_after_a_restore_at_leaves_no_byte_beside_the_stores(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
        target = add(deployment, MARKER)  # written while Litestream runs: in its shadow WAL
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    restored = cli("restore", "--at", "latest", "--force", "--json", config=deployment.config)
    assert restored.code == 0, restored.out + restored.err

    erased = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)

    Path(tmp_path / "erased.json").write_text(erased.out + erased.err)
    assert erased.code in (0, 4), erased.out + erased.err
    held = local_hits(deployment.paths.root, MARKER.encode())
    assert decompressed_hits(tmp_path / "replica", MARKER.encode()) == []
    assert held == [], (erased.code, held)
