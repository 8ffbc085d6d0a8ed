"""The replica commands that need embedded stores, on pgvector: refused in one line each.

``restore --at`` in place runs on pgvector (history.db from its replica, the table from
PostgreSQL's own recovery: tests/pg/test_restore_at_pg.py); ``restore --at --to``, ``recover
--at`` and ``protect --verify`` restore both stores from replicas, which a server's table has
not: each refuses (exit 2) pointing to docs/how-to/pgvector.md, and nothing is staged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["restore", "--at", "latest", "--to", "COPY"], "restore --at --to"),
        (["recover", "--user", "alice", "--at", "latest"], "recover --at"),
        (["protect", "--verify"], "protect --verify"),
    ],
)
def test_a_replica_command_that_needs_embedded_stores_is_refused_on_pgvector(
    pg_deployment: Any, cli: Any, tmp_path: Path, argv: list[str], what: str
) -> None:
    pg_deployment.close()
    argv = [str(tmp_path / "copy") if a == "COPY" else a for a in argv]
    done = cli(*argv, config=pg_deployment.config)
    assert done.code == 2, done.err
    assert done.err.count("\n") == 1
    assert f"{what} restores embedded stores from Litestream replicas" in done.err
    assert "docs/how-to/pgvector.md" in done.err
    assert not list(pg_deployment.paths.root.rglob("*.restore-*"))
    assert not (tmp_path / "copy").exists()
