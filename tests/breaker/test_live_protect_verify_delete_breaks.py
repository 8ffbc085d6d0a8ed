"""``protect --verify`` on replicas shipped each on its own, with a delete in flight at the seam.

mem0 deletes the point, then writes the DELETE event. Litestream ships each file on its own, so
the collection's replica may hold the delete while history's does not hold its DELETE yet: the
restored pair has a ``missing-point`` dated by the memory's old ADD, outside the shipping gap.
The live history changed that memory after the restored history's last event (the DELETE), so
verify calls it a write in flight at the seam, not an error (no alert from the replica job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.process.test_daemon import stop
from tests.process.test_restore_at import running, ship_the_collection_alone, shipped


@pytest.mark.slow(reason="the daemon and Litestream shipping, Litestream alone on one file")
def test_verify_reports_a_delete_in_flight_at_the_seam_as_in_flight(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    victim = deployment.seeded.live[0]
    memory = deployment.reopen()  # the app's delete, both writes landed; nothing ships now
    try:
        memory.delete(victim)
    finally:
        deployment.close()
    live = cli("check", "--json", config=deployment.config)
    assert live.code == 0, live.out  # the live stores agree
    ship_the_collection_alone(deployment, tmp_path)  # the point's removal ships, not the DELETE

    verified = cli("protect", "--verify", "--json", config=deployment.config)

    report = verified.json()
    assert [(f["code"], f["memory_id"]) for f in report["findings"]] == [], verified.out
    assert [(f["code"], f["memory_id"]) for f in report["in_flight"]] == [("in-flight", victim)]
    assert verified.code == 0, verified.out
