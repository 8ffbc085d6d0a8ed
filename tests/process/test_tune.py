"""``memsync tune``: real deployments switched to WAL mode and back, by each route.

Real mem0 deployments (hash embedder), real SQLite files, a real process holding the store
(tests/helpers/holders.py) and a real app with memsync's agent writing all along
(tests/helpers/app.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memsync.stores.sqlite_files import header_journal_mode
from tests.helpers.app import AppProcess
from tests.helpers.holders import app_holding


def sqlite_files(deployment: Any) -> list[Path]:
    """history.db and every storage.sqlite of the deployment, sorted."""
    paths = deployment.paths
    return sorted([paths.history_db, *paths.qdrant.glob("collection/*/storage.sqlite")])


def modes(deployment: Any) -> dict[str, str]:
    return {path.name: header_journal_mode(path) for path in sqlite_files(deployment)}


def test_tune_wal_switches_every_file_and_reads_it_back_when_the_app_is_stopped(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    assert set(modes(deployment).values()) == {"rollback"}
    result = cli("tune", "--wal", "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert (report["route"], report["changed"], report["dry_run"]) == ("direct", 2, False)
    assert sorted(Path(f["path"]) for f in report["files"]) == sqlite_files(deployment)
    assert {(f["before"], f["after"], f["change"]) for f in report["files"]} == {
        ("rollback", "wal", True)
    }
    assert set(modes(deployment).values()) == {"wal"}
    leftovers = [p for f in sqlite_files(deployment) for p in f.parent.glob(f"{f.name}-*")]
    assert leftovers == []  # the last connection closed: no -wal or -shm left behind


def test_tune_wal_twice_changes_nothing_the_second_time(deployment: Any, cli: Any) -> None:
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    again = cli("tune", "--wal", "--json", config=deployment.config)
    assert again.code == 0, again.err
    assert (again.json()["route"], again.json()["changed"]) == (None, 0)
    assert {f["after"] for f in again.json()["files"]} == {"wal"}


def test_tune_dry_run_reports_each_file_and_changes_nothing(deployment: Any, cli: Any) -> None:
    deployment.close()
    before = {p: p.read_bytes() for p in sqlite_files(deployment)}
    result = cli("tune", "--wal", "--dry-run", "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert (report["dry_run"], report["route"], report["changed"]) == (True, "direct", 2)
    assert {(f["before"], f["after"], f["change"]) for f in report["files"]} == {
        ("rollback", None, True)
    }
    assert {p: p.read_bytes() for p in sqlite_files(deployment)} == before
    text = cli("tune", "--wal", "--dry-run", config=deployment.config).out
    assert "would switch to wal" in text and "route: direct" in text


def test_tune_exits_12_and_changes_nothing_when_the_app_holds_the_store_without_an_agent(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    with app_holding(deployment.paths.qdrant) as app:
        result = cli("tune", "--wal", "--json", config=deployment.config)
        dry = cli("tune", "--wal", "--dry-run", "--json", config=deployment.config)
    assert result.code == 12, result.out
    error = json.loads(result.err.strip().splitlines()[-1])
    assert f"pid {app.pid}" in error["message"] and "no memsync agent" in error["message"]
    assert "stop the app" in error["hint"] and "agent" in error["hint"]
    assert set(modes(deployment).values()) == {"rollback"}
    assert dry.code == 0 and dry.json()["route"] is None
    assert "no memsync agent" in dry.json()["blocked"]


def test_tune_switches_through_the_agent_while_the_app_keeps_writing(
    deployment: Any, tmp_path: Path, cli: Any
) -> None:
    deployment.close()
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock, interval=0.02) as app:
        result = cli("tune", "--wal", "--json", config=deployment.config)
        assert result.code == 0, result.err
        cli("snapshot", "create", "--json", config=deployment.config)  # the app writes on
        in_use = {f.name: Path(f"{f}-wal").exists() for f in sqlite_files(deployment)}
        stats = app.stop()
    report = result.json()
    assert (report["route"], report["changed"]) == ("agent", 2)
    assert report["paused_s"] is not None and report["lease_ran_out"] is False
    assert {f["after"] for f in report["files"]} == {"wal"}
    assert in_use == {"history.db": True, "storage.sqlite": True}  # the app's own connections
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] > 0
    assert "app writes paused" in app.log_text()
    assert set(modes(deployment).values()) == {"wal"}
    checked = cli("check", "--json", config=deployment.config)
    assert checked.code == 0, checked.out


def test_tune_rollback_journal_switches_back_when_the_app_is_stopped(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    result = cli("tune", "--rollback-journal", "--json", config=deployment.config)
    assert result.code == 0, result.err
    assert {(f["before"], f["after"]) for f in result.json()["files"]} == {("wal", "rollback")}
    assert set(modes(deployment).values()) == {"rollback"}
    memory = deployment.reopen()  # mem0 writes to its files in rollback mode again
    memory.add("prefers green tea", user_id="alice", infer=False)
    deployment.close()
    assert set(modes(deployment).values()) == {"rollback"}
    assert cli("check", config=deployment.config).code == 0


def test_tune_rollback_journal_exits_12_while_the_app_holds_the_store(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    with app_holding(deployment.paths.qdrant):
        result = cli("tune", "--rollback-journal", config=deployment.config)
    assert result.code == 12
    assert "leaving WAL mode needs every connection" in result.err
    assert set(modes(deployment).values()) == {"wal"}


def test_tune_wal_with_history_db_missing_switches_nothing_and_says_so(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    history = deployment.paths.history_db
    aside = history.with_name("history.db.aside")
    history.rename(aside)
    stores = list(deployment.paths.qdrant.glob("collection/*/storage.sqlite"))
    before = [header_journal_mode(path) for path in stores]
    result = cli("tune", "--wal", "--json", config=deployment.config)
    assert result.code == 11
    assert "does not exist" in json.loads(result.err)["message"]
    assert [header_journal_mode(path) for path in stores] == before == ["rollback"] * len(stores)
