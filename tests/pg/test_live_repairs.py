"""Every writing command on pgvector while the app writes through its own Memory on the same table.

PostgreSQL has no single-writer lock: nobody "holds" the store, so forget, erase, prune, confirm
and reconcile take the ``direct`` route (memsync's own ``mem0.Memory``) while a real app process
(tests/helpers/app.py) adds, searches, updates and deletes its own memories every 20 ms for
``APP_USERS``. Each test proves: no app write failed, the app's own view and a second Memory
stop returning a deleted memory as soon as the command returns, history.db has mem0's events.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memsync import config as config_module
from memsync import log
from memsync.demo import deployment as build
from memsync.errors import UnavailableError
from memsync.stores import mem0
from memsync.stores.backends import vector_store_for
from tests.conftest import error_findings
from tests.helpers.app import AppProcess

APP_USERS = ("alice", "bob")  # the app's own traffic; memsync acts on the other users' memories
WRITE_S = 1.0  # the app writes this long before each command and again after it


@pytest.fixture
def serving(pg_deployment: Any) -> Iterator[AppProcess]:
    """The app on the pgvector deployment, writing; ``.deployment`` and ``.memory`` (a second Memory)."""
    pg_deployment.close()
    with AppProcess(pg_deployment.paths.root, interval=0.02, users=APP_USERS) as app:
        app.deployment = pg_deployment  # type: ignore[attr-defined]
        app.memory = pg_deployment.reopen()  # type: ignore[attr-defined]
        time.sleep(WRITE_S)
        yield app


def _finish(app: AppProcess) -> dict[str, Any]:
    """Let the app write on, stop it; 0 failed writes, and it kept writing throughout."""
    time.sleep(WRITE_S)
    stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] >= 20, stats
    return stats


def _rows(deployment: Any, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(deployment.paths.pg_url, autocommit=True) as connection:
        return connection.execute(query, params).fetchall()  # type: ignore[arg-type]


def _of_user(deployment: Any, user: str) -> dict[str, str]:
    """``{memory_id: text}`` of a user's rows in the live table."""
    found = _rows(
        deployment,
        "SELECT id::text, payload->>'data' FROM mem0 WHERE payload->>'user_id' = %s",
        user,
    )
    return dict(found)  # type: ignore[arg-type]


def _events(deployment: Any, memory_id: str) -> list[tuple[str, str | None, str | None]]:
    with sqlite3.connect(deployment.paths.history_db) as connection:
        return connection.execute(
            "SELECT event, old_memory, new_memory FROM history WHERE memory_id = ? ORDER BY rowid",
            (memory_id,),
        ).fetchall()


def _seen_by_the_app(app: Any, memory_id: str, text: str, user: str) -> list[str]:
    """Which of the app's own get_all, a second Memory's get and its search return the memory."""
    found = app.memory.search(text, filters={"user_id": user}, top_k=50)["results"]
    seen = {
        "app get_all": memory_id in app.view(),
        "get": app.memory.get(memory_id) is not None,
        "search": memory_id in {item["id"] for item in found},
    }
    return [name for name, yes in seen.items() if yes]


def _assert_gone_for_the_app(app: Any, memory_id: str, text: str, user: str) -> None:
    """None of the app's own get_all, a second Memory's get and search return it any more."""
    assert _seen_by_the_app(app, memory_id, text, user) == []


def _a_memory_of(deployment: Any, user: str) -> tuple[str, str]:
    expired = set(deployment.seeded.expired)
    return next((i, t) for i, t in sorted(_of_user(deployment, user).items()) if i not in expired)


def test_forget_one_memory_while_the_app_writes(serving: Any, cli: Any) -> None:
    app, deployment = serving, serving.deployment
    memory_id, text = _a_memory_of(deployment, "dmitri")
    assert _seen_by_the_app(app, memory_id, text, "dmitri") == ["app get_all", "get", "search"]
    dry = cli("forget", memory_id, "--dry-run", "--json", config=deployment.config)
    assert dry.code == 0, dry.err
    assert dry.json()["route"] == "direct" and app.memory.get(memory_id) is not None
    result = cli("forget", memory_id, "--yes", "--no-snapshot", "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["route"] == "direct" and report["deleted"] == [memory_id]
    _assert_gone_for_the_app(app, memory_id, text, "dmitri")
    assert _events(deployment, memory_id)[-1][0] == "DELETE"
    _finish(app)


def test_forget_a_user_while_the_app_writes_leaves_the_apps_memories(
    serving: Any, cli: Any
) -> None:
    app, deployment = serving, serving.deployment
    targets = _of_user(deployment, "eun-ji")
    assert len(targets) >= 3
    result = cli("forget", "--user", "eun-ji", "--yes", "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["route"] == "direct" and report["safety_snapshot"]
    assert set(report["deleted"]) == set(targets)
    assert not set(targets) & app.view()
    for memory_id in targets:
        assert app.memory.get(memory_id) is None
        assert _events(deployment, memory_id)[-1][0] == "DELETE"
    assert _of_user(deployment, "eun-ji") == {}
    stats = _finish(app)
    live = {row[0] for row in _rows(deployment, "SELECT id::text FROM mem0")}
    assert set(stats["added"]) <= live  # every memory the app still holds is in the table


def _filenodes(deployment: Any) -> dict[str, int]:
    """Each mem0 table's file number: VACUUM FULL rewrites a table into a new one."""
    query = (
        "SELECT relname, pg_relation_filenode(relid) FROM pg_stat_user_tables"
        " WHERE relname LIKE 'mem0%%'"
    )
    return dict(_rows(deployment, query))  # type: ignore[arg-type]


def test_forget_erase_deletes_through_mem0_then_vacuums_while_the_app_writes(
    serving: Any, cli: Any
) -> None:
    app, deployment = serving, serving.deployment
    targets = _of_user(deployment, "chandra")
    assert targets
    before = _filenodes(deployment)
    for text in targets.values():
        assert _rows(deployment, "SELECT id FROM mem0 WHERE payload::text LIKE %s", f"%{text}%")
    result = cli(
        "forget", "--user", "chandra", "--erase", "--yes", "--json", config=deployment.config
    )
    assert result.code == 0, result.err
    report = result.json()
    assert report["route"] == "direct" and set(report["deleted"]) == set(targets)
    assert report["erased"]["history_rows_blanked"] >= len(targets)
    assert report["erased"]["compaction"] == "VACUUM FULL"
    assert not set(targets) & app.view()
    for memory_id, text in targets.items():
        assert app.memory.get(memory_id) is None
        like = f"%{text}%"
        assert _rows(deployment, "SELECT id FROM mem0 WHERE payload::text LIKE %s", like) == []
        events = _events(deployment, memory_id)
        assert events[-1][0] == "DELETE"
        assert all(old is None and new is None for _, old, new in events), events
    after = _filenodes(deployment)
    # VACUUM FULL rewrote every table there was (mem0 creates mem0_entities lazily)
    for table in before:
        assert after[table] != before[table], (before, after)
    _finish(app)


def test_prune_deletes_exactly_the_expired_memories_while_the_app_writes(
    serving: Any, cli: Any
) -> None:
    app, deployment = serving, serving.deployment
    expired = set(deployment.seeded.expired)
    assert expired and expired <= app.view()
    dry = cli("prune", "--dry-run", "--json", config=deployment.config)
    assert dry.code == 0, dry.err
    assert dry.json()["route"] == "direct" and expired <= app.view()
    result = cli("prune", "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["route"] == "direct" and set(report["deleted"]) == expired
    after = app.view()
    assert not after & expired
    assert set(deployment.seeded.live) - expired <= after  # nothing else went
    for memory_id in expired:
        assert app.memory.get(memory_id) is None
        assert _events(deployment, memory_id)[-1][0] == "DELETE"
    _finish(app)


def test_confirm_stamps_while_the_app_writes(serving: Any, cli: Any) -> None:
    app, deployment = serving, serving.deployment
    memory_id, text = _a_memory_of(deployment, "eun-ji")
    dry = cli("confirm", memory_id, "--dry-run", "--json", config=deployment.config)
    assert dry.code == 0 and dry.json()["route"] == "direct", dry.out + dry.err
    assert "confirmed_at" not in (app.memory.get(memory_id).get("metadata") or {})
    result = cli("confirm", memory_id, "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["route"] == "direct" and report["confirmed"] == [memory_id]
    stamped = (app.memory.get(memory_id).get("metadata") or {}).get("confirmed_at")
    assert stamped is not None, app.memory.get(memory_id)
    assert datetime.fromisoformat(stamped) == datetime.fromisoformat(report["confirmed_at"])
    assert _events(deployment, memory_id)[-1] == ("UPDATE", text, text)
    _finish(app)


def test_reconcile_puts_back_a_deleted_row_from_a_pgvector_snapshot_and_deletes_a_resurrected_one(
    serving: Any, cli: Any
) -> None:
    app, deployment = serving, serving.deployment
    assert cli("snapshot", "create", config=deployment.config).code == 0
    missing, missing_text = _a_memory_of(deployment, "dmitri")
    resurrected, text = _a_memory_of(deployment, "eun-ji")
    row = "SELECT id::text, vector::text, payload FROM mem0 WHERE id = %s"
    original = _rows(deployment, row, missing)
    kept = _rows(deployment, "SELECT vector::text, payload FROM mem0 WHERE id = %s", resurrected)
    assert cli("forget", resurrected, "--yes", "--no-snapshot", config=deployment.config).code == 0
    # the field's damage: a row deleted by hand; a deleted row put back (an older pg_restore)
    with psycopg.connect(deployment.paths.pg_url, autocommit=True) as connection:
        connection.execute("DELETE FROM mem0 WHERE id = %s", (missing,))
        connection.execute(
            "INSERT INTO mem0 (id, vector, payload) VALUES (%s, %s::vector, %s)",
            (resurrected, kept[0][0], psycopg.types.json.Jsonb(kept[0][1])),
        )
    dry = cli("reconcile", "--dry-run", "--json", config=deployment.config)
    assert dry.code == 3, dry.err
    planned = {(a["kind"], a["memory_id"]) for a in dry.json()["actions"]}
    assert planned == {("restore-point", missing), ("delete-point", resurrected)}
    assert dry.json()["route"] == "direct"
    result = cli("reconcile", "--json", config=deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["route"] == "direct" and report["counts"]["done"] == 2, report["actions"]
    assert _rows(deployment, row, missing) == original  # same id, vector and payload
    assert _seen_by_the_app(app, missing, missing_text, "dmitri") == [
        "app get_all",
        "get",
        "search",
    ]
    _assert_gone_for_the_app(app, resurrected, text, "eun-ji")
    assert _events(deployment, resurrected)[-1][0] == "DELETE"
    _finish(app)
    check = cli("check", "--json", config=deployment.config)
    assert check.code == 0, error_findings(check.json())


def test_an_unreachable_server_fails_open_memory_at_once_naming_it(
    make_deployment: Any, tmp_path: Path
) -> None:
    log.configure()
    deployment = make_deployment(count=0, pg=True)
    deployment.close()
    (deployment.paths.root / "pg-url").write_text(
        f"host={tmp_path / 'gone'} port=5999 dbname=mem0 user=app password=hunter2\n",
        encoding="utf-8",
    )
    settings = config_module.load(deployment.config, os.environ)
    started = time.monotonic()
    with (
        pytest.raises(UnavailableError) as raised,
        mem0.open_memory(vector_store_for(settings), settings),
    ):
        pass
    assert time.monotonic() - started < 15  # memsync's connect timeout, not mem0's 30 s pool
    message = raised.value.message
    assert "postgresql://app@" in message and "5999/mem0" in message, message
    assert "hunter2" not in message + (raised.value.hint or "")
    assert build.Paths.at(deployment.paths.root).pg_url is not None


def test_an_app_with_the_memsync_agent_on_pgvector_takes_the_writes(
    make_deployment: Any, cli: Any, tmp_path: Path
) -> None:
    socket = tmp_path / "run" / "memsync-agent.sock"
    deployment = make_deployment(pg=True, extra_config=f'\n[app]\nagent_socket = "{socket}"\n')
    deployment.close()
    with AppProcess(deployment.paths.root, agent=socket, interval=0.02, users=APP_USERS) as app:
        time.sleep(WRITE_S)
        memory_id, _ = _a_memory_of(deployment, "chandra")
        result = cli(
            "forget", memory_id, "--yes", "--no-snapshot", "--json", config=deployment.config
        )
        assert result.code == 0, result.err
        assert (
            result.json()["route"] == "agent"
        )  # the agent serves this deployment: it is preferred
        assert memory_id not in app.view()
        assert _events(deployment, memory_id)[-1][0] == "DELETE"
        _finish(app)
