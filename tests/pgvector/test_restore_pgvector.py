"""restore on pgvector: tables loaded beside the live ones, swapped in one transaction, never dropped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.conftest import error_findings

ROOT = Path(__file__).resolve().parents[2]


def snapshot(cli, deployment) -> str:
    deployment.close()
    result = cli("snapshot", "create", "--json", config=deployment.config)
    assert result.code == 0, result.out + result.err
    return str(result.json()["id"])


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as connection:
        return {
            row[0]
            for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            )
        }


def indexes(url: str, table: str) -> set[str]:
    with psycopg.connect(url) as connection:
        return {
            row[0]
            for row in connection.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = %s", (table,)
            )
        }


def ids(url: str, table: str) -> set[str]:
    with psycopg.connect(url) as connection:
        return {row[0] for row in connection.execute(f'SELECT id::text FROM "{table}"')}


def memsync(deployment, *argv: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    """``memsync ARGV`` in a subprocess; ``kill_at``: SIGKILLed at that step (tests.breaker.killat)."""
    head = ["-m", "tests.breaker.killat", kill_at, "--"] if kill_at else ["-m", "memsync"]
    return subprocess.run(
        [sys.executable, *head, *argv, "--config", str(deployment.config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def add_after_snapshot(deployment, count: int = 3) -> list[str]:
    memory = deployment.reopen()
    added = [
        memory.add(f"added after the snapshot {n}", user_id="ana", infer=False)["results"][0]["id"]
        for n in range(count)
    ]
    deployment.close()
    return added


def test_restore_swaps_the_tables_and_history_and_keeps_the_old_ones_aside(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    newer = add_after_snapshot(pg_deployment)
    before = ids(url, "mem0")
    refused = cli("restore", snapshot_id, config=pg_deployment.config)
    assert refused.code == 2 and "--force" in refused.err
    dry = cli("restore", "--dry-run", "--json", snapshot_id, config=pg_deployment.config)
    assert dry.code == 0, dry.err
    tag = snapshot_id.lower().replace("-", "_")
    live = tables(url)
    assert [m["aside"] for m in dry.json()["moves"]][:2] == [
        f"mem0_pre_restore_{tag}",
        f"mem0_entities_pre_restore_{tag}" if "mem0_entities" in live else None,
    ]
    assert tables(url) == live  # the dry run changed nothing

    result = cli("restore", "--force", "--json", snapshot_id, config=pg_deployment.config)
    assert result.code == 0, result.err
    report = result.json()
    assert report["check_after"]["errors"] == 0
    aside = f"mem0_pre_restore_{tag}"
    assert {aside, "mem0"} <= tables(url)
    assert ids(url, aside) == before  # the old table, untouched, with the rows added since
    assert ids(url, "mem0") == set(pg_deployment.seeded.live)
    history_aside = f"{pg_deployment.paths.history_db}.pre-restore-{snapshot_id}"
    assert set(report["moved_aside"]) >= {aside, history_aside}
    # mem0's CREATE INDEX IF NOT EXISTS names are the restored table's now
    assert {"mem0_pkey", "mem0_hnsw_idx", "mem0_text_lemmatized_idx"} <= indexes(url, "mem0")
    assert not {"mem0_pkey", "mem0_hnsw_idx"} & indexes(url, aside)

    check = cli("check", "--json", config=pg_deployment.config)
    assert check.code == 0 and check.json()["counts"]["errors"] == 0, error_findings(check.json())
    memory = pg_deployment.reopen()
    kept = pg_deployment.seeded.live[0]
    assert memory.get(kept) is not None and memory.get(newer[0]) is None
    text = memory.get(kept)["memory"]
    found = memory.search(text, filters={"user_id": memory.get(kept)["user_id"]}, limit=5)["results"]
    assert kept in {hit["id"] for hit in found}


def test_restoring_twice_keeps_every_pre_restore_table(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    assert cli("restore", "--force", snapshot_id, config=pg_deployment.config).code == 0
    between = add_after_snapshot(pg_deployment, 1)
    second = cli("restore", "--force", "--json", snapshot_id, config=pg_deployment.config)
    assert second.code == 0, second.err
    tag = snapshot_id.lower().replace("-", "_")
    assert set(between) <= ids(url, f"mem0_pre_restore_{tag}_1")
    assert f"mem0_pre_restore_{tag}_1" in second.json()["moved_aside"]


def test_a_snapshot_of_the_other_backend_is_refused(pg_deployment, make_deployment, cli):
    embedded = make_deployment(name="embedded")
    embedded_id = snapshot(cli, embedded)
    pg_id = snapshot(cli, pg_deployment)
    source = embedded.paths.root / "snapshots" / embedded_id
    refused = cli("restore", "--force", str(source), config=pg_deployment.config)
    assert refused.code == 10, refused.err
    assert refused.err.strip().count("\n") == 0 and "embedded Qdrant" in refused.err
    back = pg_deployment.paths.root / "snapshots" / pg_id
    other = cli("restore", "--force", str(back), config=embedded.config)
    assert other.code == 10 and "pgvector" in other.err, other.err
    assert not any("restore" in t for t in tables(pg_deployment.paths.pg_url))


def test_restore_refuses_while_the_app_holds_history_and_no_window_is_set(pg_deployment, cli):
    snapshot_id = snapshot(cli, pg_deployment)
    pg_deployment.reopen()  # the app: this test process, with mem0's history.db open
    held = memsync(pg_deployment, "restore", "--force", "--json", snapshot_id)
    assert held.returncode == 12, held.stderr
    assert f"pid {__import__('os').getpid()}" in json.loads(held.stderr)["message"]
    assert not any("restore" in t for t in tables(pg_deployment.paths.pg_url))
