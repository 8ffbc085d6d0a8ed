"""Breaker: ``restore --at`` with the last TIME ``--at`` accepts (9999-12-31T23:59:59.999999Z)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.process.test_restore_at import fingerprint, replicated


@pytest.mark.slow(reason="the daemon and Litestream shipping, a restore --at")
def test_restore_at_the_last_representable_time_restores_or_refuses_cleanly(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, _, _ = replicated(
        make_deployment, tmp_path, cli, "keeps the spare key under the mat"
    )
    files = fingerprint(deployment)

    done = cli(
        "restore", "--at", "9999-12-31T23:59:59.999999Z", "--dry-run", config=deployment.config
    )

    assert fingerprint(deployment) == files
    assert done.code in (0, 2), (done.code, done.err)
    assert "Traceback" not in done.err and "internal" not in done.err.lower(), done.err
