"""Breaker: ``protect --verify`` when the two replicas' last shipments straddle one write.

Litestream ships each file on its own (about once a second): an app writing a memory's point,
then its history event, leaves a moment where the collection's replica holds the point and
history's does not yet. ``restore --at`` calls that the seam (a write in flight) and settles
it; ``protect --verify`` (the daemon's daily ``replica`` job) restores each file to its last
shipment and fails the healthy replicas with the seam as an error.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import litestream
from tests.process.test_daemon import stop
from tests.process.test_protect import poll, state_dir
from tests.process.test_restore_at import add, objects, running, shipped


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
    vectors = tmp_path / "replica" / "collection" / "mem0"
    document = json.loads((state_dir(deployment) / "litestream.yml").read_text())
    document["dbs"] = [db for db in document["dbs"] if db["path"].endswith("storage.sqlite")]
    alone = tmp_path / "collection-only.yml"
    alone.write_text(json.dumps(document))
    held = objects(vectors)
    process = subprocess.Popen(
        [str(litestream.ensure()), "replicate", "-config", str(alone)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll("the collection's part of the write shipped", lambda: objects(vectors) > held)
    finally:
        process.terminate()
        process.wait(timeout=60)

    verified = cli("protect", "--verify", "--json", config=deployment.config)

    seam = verified.json()["at"]["seam"]
    assert verified.code == 0, (verified.code, seam)
