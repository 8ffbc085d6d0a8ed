"""``memsync protect`` on mem0's REST-server layout: the vectors are PostgreSQL's (its own WAL
archiving protects them), so history.db is the one SQLite file Litestream replicates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import litestream
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_protect import poll, status


@pytest.mark.slow(reason="PostgreSQL, the daemon and Litestream's first shipment")
def test_on_pgvector_history_db_alone_is_switched_and_replicated(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    binary = litestream.ensure()
    deployment = make_deployment(
        pg=True,
        extra_config=f'\n[protect]\nlitestream = "{binary}"\ndirectory = "{tmp_path / "r"}"\n',
    )
    deployment.close()
    done = cli("protect", "--json", config=deployment.config)
    assert done.code == 0, done.err
    assert done.json()["switched"] == [str(deployment.paths.history_db)]
    assert [db["path"] for db in done.json()["litestream"]["dbs"]] == [
        str(deployment.paths.history_db)
    ]
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        report = poll(
            "history.db replicated", lambda: (s := status(cli, deployment))["protected"] and s
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert [(f["label"], f["replica"]) for f in report["files"]] == [
        ("history.db", str(tmp_path / "r" / "history.db"))
    ]


@pytest.mark.slow(reason="PostgreSQL, the daemon and Litestream's shipments, an erasure")
def test_on_pgvector_an_erasure_renews_history_dbs_replica(
    make_deployment: Any, tmp_path: Path, cli: Any
) -> None:
    from tests.process.test_protect_erase import MARKER, decompressed_hits

    binary = litestream.ensure()
    replica = tmp_path / "r"
    deployment = make_deployment(
        count=5,
        pg=True,
        extra_config=f'\n[protect]\nlitestream = "{binary}"\ndirectory = "{replica}"\n',
    )
    target = deployment.memory.add(MARKER, user_id="zed", infer=False)["results"][0]["id"]
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("history.db's text shipped", lambda: decompressed_hits(replica, MARKER.encode()))
        erased = cli("forget", target, "--erase", "--yes", "--json", config=deployment.config)
        after = poll(
            "history.db replicated", lambda: (s := status(cli, deployment))["protected"] and s
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert erased.code == 0, erased.out + erased.err
    [renewed] = erased.json()["replicas"]["files"]
    assert renewed["label"] == "history.db" and renewed["new_generation"]
    assert after["files"][0]["generation"] == renewed["new_generation"]
    assert decompressed_hits(replica, MARKER.encode()) == []
