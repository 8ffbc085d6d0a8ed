"""Breaker: ``protect --verify`` when the two replicas' last shipments straddle one write.

Litestream ships each file on its own (about once a second): an app writing a memory's point,
then its history event, leaves a moment where the collection's replica holds the point and
history's does not yet. ``restore --at`` calls that the seam (a write in flight) and settles
it; ``protect --verify`` (the daemon's daily ``replica`` job) restores each file to its last
shipment and fails the healthy replicas with the seam as an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.process.test_daemon import stop
from tests.process.test_restore_at import add, running, ship_the_collection_alone, shipped


@pytest.mark.slow(reason="the daemon and Litestream shipping, Litestream alone on one file")
def test_protect_verify_does_not_fail_healthy_replicas_on_a_write_in_flight(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    add(deployment, "parks on the third floor")  # nothing runs Litestream now
    ship_the_collection_alone(deployment, tmp_path)

    verified = cli("protect", "--verify", "--json", config=deployment.config)

    seam = verified.json()["at"]["seam"]
    assert verified.code == 0, (verified.code, seam)
