"""``protect --verify`` on replicas shipped each on its own: the seam in flight, the rest errors.

The collection's replica holds a point whose history event has not shipped yet (a write in
flight between the two files' shipments) beside a memory whose history rows were deleted long
before both shipments: the first is reported in flight, the second stays the error it is.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.process.test_daemon import stop
from tests.process.test_restore_at import add, running, ship_the_collection_alone, shipped


@pytest.mark.slow(reason="the daemon and Litestream shipping, Litestream alone on one file")
def test_verify_reports_the_write_in_flight_and_keeps_an_older_orphan_point_an_error(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        shipped(cli, deployment)
        victim = deployment.seeded.live[0]
        with sqlite3.connect(deployment.paths.history_db) as connection:  # its history lost
            connection.execute("DELETE FROM history WHERE memory_id = ?", (victim,))
        connection.close()
        add(deployment, "waters the fern on Sundays")  # both files ship after the damage
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    written = add(deployment, "parks on the third floor")  # nothing runs Litestream now
    ship_the_collection_alone(deployment, tmp_path)

    verified = cli("protect", "--verify", "--json", config=deployment.config)
    text = cli("protect", "--verify", config=deployment.config)

    assert verified.code == 3, verified.out
    report = verified.json()
    assert report["ok"] is False
    assert [(f["code"], f["memory_id"]) for f in report["findings"]] == [("orphan-point", victim)]
    assert [(f["code"], f["memory_id"]) for f in report["in_flight"]] == [("in-flight", written)]
    assert "orphan-point" in report["in_flight"][0]["message"]
    assert report["check_after"]["errors"] == 1 and report["check_after"]["infos"] == 1
    assert {(s["code"], s["memory_id"]) for s in report["at"]["seam"]} == {
        ("orphan-point", victim),
        ("orphan-point", written),
    }  # restore --at's seam: every memory in one store only
    assert text.code == 3
    assert f"write in flight {written}" in text.out and f"orphan-point {victim}" in text.out
