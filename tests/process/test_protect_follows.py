"""Protection follows the files after restore, reconcile and ``migrate --switch``.

The daemon runs Litestream (the real binary, ``make tools``) replicating to a directory; after
each command every live file of the deployment the config now names is replicated, with its
writes shipped: a restore's new files in a new generation, a reconcile's writes in the same
one, a migrated-to collection in its own, and the collection migrated away no longer.
"""

from __future__ import annotations

import json

import pytest

from memsync.demo import deployment as build
from tests.helpers.migrate import target_config
from tests.process.test_daemon import Notify, start, stop
from tests.process.test_protect import poll, protected, state_dir, status


def generations(report):
    return {f["label"]: f["generation"] for f in report["files"]}


def shipped(report):
    """Every file replicated, with nothing left unshipped: the report, else None."""
    return report["protected"] and all(f["lag_s"] == 0 for f in report["files"]) and report


@pytest.mark.slow(reason="the daemon and Litestream, a snapshot and a restore")
def test_after_a_restore_every_file_replicates_in_a_new_generation(make_deployment, tmp_path, cli):
    deployment = protected(make_deployment, tmp_path)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    chosen = cli("snapshot", "create", "--json", config=deployment.config).json()["id"]
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        before = poll("both files replicated", lambda: shipped(status(cli, deployment)))
        restored = cli("restore", chosen, "--force", config=deployment.config)
        assert restored.code == 0, restored.err
        after = poll(
            "both restored files replicated in new generations",
            lambda: (
                (s := shipped(status(cli, deployment)))
                and all(generations(s)[k] != v for k, v in generations(before).items())
                and s
            ),
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert [f["journal_mode"] for f in after["files"]] == ["wal", "wal"]


@pytest.mark.slow(reason="the daemon and Litestream, a damaged pair reconciled through mem0")
def test_a_reconcile_writes_are_shipped_in_the_same_generation(make_deployment, tmp_path, cli):
    deployment = protected(make_deployment, tmp_path)
    build.delete_history_rows(deployment.paths, deployment.seeded.live[0])  # ADD event lost
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        before = poll("both files replicated", lambda: shipped(status(cli, deployment)))
        history = next(f for f in before["files"] if f["label"] == "history.db")
        reconciled = cli("reconcile", "--json", config=deployment.config)
        assert reconciled.code == 0, reconciled.err
        after = poll(
            "the reconcile's history write shipped",
            lambda: (
                (s := shipped(status(cli, deployment)))
                and next(f for f in s["files"] if f["label"] == "history.db")["position"]
                != history["position"]
                and s
            ),
        )
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    assert generations(after) == generations(before)
    assert cli("check", config=deployment.config).code == 0


DAEMON = '\n[daemon]\ncheck_every = "2s"\n'  # the daemon reloads on SIGHUP when its sleep ends


@pytest.mark.slow(reason="the daemon and Litestream, a migration and its switch, a reload")
def test_after_migrate_switch_the_target_collection_replicates_and_the_source_stops(
    make_deployment, tmp_path, cli
):
    deployment = protected(make_deployment, tmp_path, DAEMON)
    deployment.close()
    assert cli("protect", config=deployment.config).code == 0
    section = deployment.config.read_text().split("[protect]", 1)[1].split("[daemon]")[0]
    new = target_config(deployment.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    new.write_text(new.read_text() + "\n[protect]" + section + DAEMON)
    assert cli("migrate", "--to", str(new), config=deployment.config).code == 0
    daemon = start(deployment.config, Notify(tmp_path))
    try:
        daemon.wait_event("litestream_started")
        poll("both files replicated", lambda: shipped(status(cli, deployment)))
        switched = cli("migrate", "--to", str(new), "--switch", "--json", config=deployment.config)
        assert switched.code == 0, switched.err
        daemon.wait_event("config_reloaded")
        after = poll(
            "the target collection and history.db replicated",
            lambda: (
                (s := shipped(status(cli, deployment)))
                and str(tmp_path / "new") in s["files"][0]["path"]
                and s
            ),
        )
        configured = json.loads((state_dir(deployment) / "litestream.yml").read_text())
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    target = tmp_path / "new" / "qdrant" / "collection" / "mem0" / "storage.sqlite"
    assert [f["path"] for f in after["files"]] == [str(target), str(deployment.paths.history_db)]
    assert [db["path"] for db in configured["dbs"]] == [
        str(target),
        str(deployment.paths.history_db),
    ]  # the source collection's replica gets nothing more
