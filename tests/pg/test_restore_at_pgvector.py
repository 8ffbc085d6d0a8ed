"""restore --at on pgvector: refused in one line pointing to the how-to (the server's own PITR)."""

from __future__ import annotations

from typing import Any


def test_restore_at_on_pgvector_is_refused_pointing_to_the_how_to(
    pg_deployment: Any, cli: Any
) -> None:
    pg_deployment.close()
    done = cli("restore", "--at", "latest", "--force", config=pg_deployment.config)
    assert done.code == 2
    assert done.err.count("\n") == 1
    assert "restore --at restores embedded stores from Litestream replicas" in done.err
    assert "docs/how-to/continuous-protection.md" in done.err
    assert not list(pg_deployment.paths.root.rglob("*.restore-*"))
