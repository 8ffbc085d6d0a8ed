"""``restore --at TIME`` on pgvector: history.db from its Litestream replica, paired with a
database PostgreSQL recovered to the same TIME (its own WAL archive and ``recovery_target_time``,
as docs/how-to/pgvector.md tells users to do it).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memsync.demo import deployment as build
from memsync.demo import postgres
from tests.conftest import HASH, IN_FLIGHT_MARGIN_S, Deployment
from tests.helpers import litestream, pg_pitr
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_restore_at import add, memory_ids, shipped


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow(reason="two PostgreSQL clusters, a base backup, the daemon running Litestream")
def test_restore_at_pairs_history_with_the_table_recovered_to_the_same_time(
    tmp_path: Path, cli: Any
) -> None:
    root = Path(tempfile.mkdtemp(prefix="msync-pitr-"))  # short: the sockets live there
    try:
        with pg_pitr.archiving_cluster(root) as cluster:
            database = postgres.fresh_database(cluster.url, "d_pitr")
            paths = build.Paths(tmp_path / "dep", pg_url=database)
            replica = tmp_path / "replica"
            config = build.write_memsync_config(
                paths,
                embedder=HASH,
                extra=f'\n[protect]\nlitestream = "{litestream.ensure()}"\ndirectory = "{replica}"\n',
                in_flight_margin_s=IN_FLIGHT_MARGIN_S,
            )
            deployment = Deployment(
                paths=paths, config=config, memory=build.open_memory(paths, embedder=HASH),
                seeded=None,
            )  # fmt: skip
            build.seed(deployment.memory, 6, batch=3)
            deployment.close()
            base = cluster.base_backup()
            assert cli("protect", config=config).code == 0
            daemon = start(config, Notify(tmp_path))
            try:
                daemon.wait_event("litestream_started")
                shipped(cli, deployment)
                first = add(deployment, "keeps a spare key under the blue pot")
                shipped(cli, deployment)
                between = datetime.now(UTC)  # the first write is on both sides; the second not
                second = add(deployment, "moved the spare key to the garage")
                shipped(cli, deployment)
            finally:
                code, err = stop(daemon)
            assert code == 0, err
            cluster.archive_current()
            stamp = between.isoformat().replace("+00:00", "Z")
            history = paths.history_db
            unchanged = sha256(history)

            # the server still holds the second memory: not recovered to TIME, refused
            refused = cli("restore", "--at", stamp, "--force", config=config)
            assert refused.code == 11, refused.err
            assert refused.err.count("\n") == 1
            assert f"holds memory {second}" in refused.err
            assert "the database was not recovered to that time" in refused.err
            assert sha256(history) == unchanged

            # PostgreSQL's own point-in-time recovery to TIME; the config pointed at it
            recovered = cluster.recover_to(base, between)
            url = make_conninfo("", **{**conninfo_to_dict(recovered), "dbname": "d_pitr"})
            (paths.root / "pg-url").write_text(url + "\n", encoding="utf-8")
            deployment.paths = build.Paths.at(paths.root)  # the app reads the recovered one too
            looked = cli("restore", "--at", stamp, "--dry-run", "--json", config=config)
            assert looked.code == 0, looked.err
            assert looked.json()["at"]["seam"] == []
            assert sha256(history) == unchanged
            done = cli("restore", "--at", stamp, "--force", "--json", config=config)

            assert done.code == 0, done.err
            report = done.json()
            at = report["at"]
            assert [f["label"] for f in at["files"]] == ["history.db"]
            assert at["meta_json"] == "none (a server store)"
            assert at["lost_after"]["memories"] == [second]
            assert at["seam"] == [] and at["reconciled"] is False
            assert report["check_after"]["errors"] == 0
            assert [Path(m["live"]) for m in report["moves"]] == [history]
            assert memory_ids(deployment) >= {first}
            assert second not in memory_ids(deployment)  # memory by memory: on neither side
            assert cli("check", config=config).code == 0
            elsewhere = cli("restore", "--at", stamp, "--to", str(tmp_path / "copy"), config=config)
            assert elsewhere.code == 2 and "restore --at --to restores embedded" in elsewhere.err
    finally:
        shutil.rmtree(root, ignore_errors=True)
