"""Doctor and ``snapshot create --if-due`` count only the snapshots this deployment can restore.

After ``memsync migrate`` changed the embedder, the snapshots taken before hold the old
embedder's vectors: ``restore latest`` never chooses them, so doctor's ``last-snapshot`` must not
call the deployment backed up by them, and a daily ``--if-due`` must take one. The deployments
are the store tier's (``tests/store/test_restore_embedder.py``); doctor runs the app's
interpreter, so this lives in the process tier.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from memsync import config as memsync_config
from memsync.snapshot import uploads
from memsync.stores.snapshots import id_time
from tests.store.test_restore_embedder import shared  # noqa: F401 - the fixture


def _last_snapshot(cli: Any, config: Any) -> dict[str, Any]:
    doctor = cli("doctor", "--json", config=config)
    assert doctor.code in (0, 3), doctor.err
    return next(r for r in doctor.json()["results"] if r["code"] == "last-snapshot")


def test_doctor_and_if_due_count_only_snapshots_this_deployment_can_restore(
    shared: Any,  # noqa: F811 - the fixture
    cli: Any,
) -> None:
    own, own_id, other_id = shared
    loaded = memsync_config.load(own.config, os.environ)
    assert _last_snapshot(cli, own.config)["path"].endswith(own_id)  # not the newer other_id
    assert uploads.newest_complete(loaded) == id_time(own_id)
    shutil.rmtree(own.paths.root / "snapshots" / own_id)  # only the other embedder's is left
    result = _last_snapshot(cli, own.config)
    assert result["status"] == "warning" and result["fix"] == "memsync snapshot create"
    assert "the 1 complete snapshot(s) hold another embedder's vectors" in result["message"]
    assert uploads.newest_complete(loaded) is None  # so snapshot create --if-due takes one
    refused = cli("restore", "latest", "--dry-run", "--json", config=own.config)
    assert refused.code == 11
    error = json.loads(refused.err.strip().splitlines()[-1])
    assert error["hint"].startswith("memsync snapshot create takes a snapshot of this deployment")
