"""restore on pgvector: tables loaded beside the live ones, swapped in one transaction, never dropped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import error_findings
from tests.helpers.holders import history_events, killed_inside_a_transaction
from tests.helpers.pg import as_csv_snapshot

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
    skipped = cli("restore", "--if-empty", "--json", snapshot_id, config=pg_deployment.config)
    assert skipped.code == 0 and skipped.json()["skipped"] is True
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
    # create verified and judged the export: its sha256 is compared, nothing decoded again,
    # and the load took every row it recorded, so the report is create's judgement
    assert report["verification"] == {"snapshot": "hashed", "check_after": "recorded"}
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
    counted = check.json()["counts"]
    assert {key: counted[key] for key in report["check_after"]} == report["check_after"]
    memory = pg_deployment.reopen()
    kept = pg_deployment.seeded.live[0]
    assert memory.get(kept) is not None and memory.get(newer[0]) is None
    text = memory.get(kept)["memory"]
    found = memory.search(text, filters={"user_id": memory.get(kept)["user_id"]}, limit=5)[
        "results"
    ]
    assert kept in {hit["id"] for hit in found}


def test_a_hot_journal_a_killed_app_left_in_history_is_rolled_back_by_the_restore(
    pg_deployment, cli
):
    snapshot_id = snapshot(cli, pg_deployment)
    history = pg_deployment.paths.history_db
    committed = history_events(history)
    killed_inside_a_transaction(history)  # a prefork worker's write thread, as the server stops
    result = cli("restore", snapshot_id, "--force", "--json", config=pg_deployment.config)
    assert result.code == 0, result.err
    aside = Path(f"{history}.pre-restore-{snapshot_id}")
    for path in (history, aside):
        assert not Path(f"{path}-journal").exists(), path
    assert (
        history_events(aside) == committed
    )  # the killed write rolled back, nothing committed lost
    checked = cli("check", "--json", config=pg_deployment.config)
    assert checked.code == 0 and error_findings(checked.json()) == {}, checked.out


def test_a_flipped_byte_in_the_export_refuses_the_restore_as_before(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    export = pg_deployment.paths.root / "snapshots" / snapshot_id / "pgvector" / "mem0.pgcopy"
    data = bytearray(export.read_bytes())
    data[len(data) // 2] ^= 0x01
    export.write_bytes(bytes(data))
    before = tables(url)
    refused = cli("restore", "--force", snapshot_id, config=pg_deployment.config)
    assert refused.code == 11, refused.err
    assert f"fails verification: checksum-mismatch {export}" in refused.err
    assert tables(url) == before


def test_a_load_that_takes_fewer_rows_than_the_export_recorded_swaps_nothing(pg_deployment, cli):
    # an export whose schema.json counts a row its CSV lacks, yet whose manifest hashes it
    # (a tool rewrote both): the bytes match, so only the load's own count can see it
    import hashlib

    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    directory = pg_deployment.paths.root / "snapshots" / snapshot_id
    schema_path = directory / "pgvector" / "schema.json"
    schema = json.loads(schema_path.read_text())
    recorded = schema["tables"]["mem0"]["rows"]
    schema["tables"]["mem0"]["rows"] = recorded + 1
    schema_path.write_bytes(json.dumps(schema, indent=2, sort_keys=True).encode() + b"\n")
    manifest = json.loads((directory / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "pgvector/schema.json":
            data = schema_path.read_bytes()
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (directory / "manifest.json").write_text(json.dumps(manifest))
    before, live = tables(url), ids(url, "mem0")

    refused = cli("restore", "--force", "--json", snapshot_id, config=pg_deployment.config)
    assert refused.code == 11, refused.out + refused.err
    assert f"gave {recorded} rows, but its export recorded {recorded + 1}" in refused.err
    assert tables(url) == before and ids(url, "mem0") == live  # nothing staged is left either
    assert pg_deployment.reopen().get(pg_deployment.seeded.live[0]) is not None


@pytest.mark.parametrize("layout", ["binary", "csv"])
def test_a_changed_digit_that_loads_fine_still_refuses_before_the_swap(pg_deployment, cli, layout):
    # the hashes are compared while the tables load: a vector value changed on disk loads as
    # a valid row, and the restore still refuses before the swap and leaves no staged table
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    root = pg_deployment.paths.root / "snapshots" / snapshot_id
    if layout == "csv":  # a snapshot of memsync 0.2
        as_csv_snapshot(root, url)
    export = root / "pgvector" / ("mem0.csv" if layout == "csv" else "mem0.pgcopy")
    data = bytearray(export.read_bytes())
    if layout == "csv":
        at = data.index(b"[", len(data) // 2) + 3  # a digit inside a vector (-0.0x... or 0.0x...)
        while not chr(data[at]).isdigit():
            at += 1
        data[at] = ord("7") if data[at] != ord("7") else ord("3")
    else:  # the first row: header 19 bytes, 3 fields, the uuid (4 + 16), the vector's length
        # and its dims header (4 + 4), then big-endian float4s: a lowest mantissa bit flipped
        columns = json.loads((root / "pgvector" / "schema.json").read_text())["tables"]["mem0"]
        assert [c["name"] for c in columns["columns"]][:2] == ["id", "vector"]
        data[19 + 2 + 4 + 16 + 4 + 4 + 4 * 10 + 3] ^= 0x01
    export.write_bytes(bytes(data))
    before = tables(url)
    refused = cli("restore", "--force", snapshot_id, config=pg_deployment.config)
    assert refused.code == 11, refused.err
    assert f"fails verification: checksum-mismatch {export}" in refused.err
    assert tables(url) == before


def test_restoring_twice_keeps_every_pre_restore_table(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    assert cli("restore", "--force", snapshot_id, config=pg_deployment.config).code == 0
    between = add_after_snapshot(pg_deployment, 1)
    assert cli("snapshot", "verify", snapshot_id, config=pg_deployment.config).code == 0
    second = cli("restore", "--force", "--json", "latest", config=pg_deployment.config)
    assert second.code == 0, second.err
    assert second.json()["chosen"]["snapshot_id"] == snapshot_id
    tag = snapshot_id.lower().replace("-", "_")
    assert set(between) <= ids(url, f"mem0_pre_restore_{tag}_1")
    assert f"mem0_pre_restore_{tag}_1" in second.json()["moved_aside"]
    doctor = cli("doctor", "--json", config=pg_deployment.config).json()
    listed = {r["path"] for r in doctor["results"] if r["code"] == "pre-restore-copy"}
    assert {f"table mem0_pre_restore_{tag}", f"table mem0_pre_restore_{tag}_1"} <= listed


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
    assert f"pid {os.getpid()}" in json.loads(held.stderr)["message"]
    assert not any("restore" in t for t in tables(pg_deployment.paths.pg_url))


def history_rows(path: Path) -> int:
    import sqlite3

    connection = sqlite3.connect(path)
    try:
        return int(connection.execute("SELECT count(*) FROM history").fetchone()[0])
    finally:
        connection.close()


KILLS = {  # where the restore is SIGKILLed -> what the next command makes of it
    "memsync.restore.pgvector:_stage_history": "old",  # tables loaded, history not staged yet
    "memsync.stores.pgvector.load:swap": "old",  # everything loaded and staged, nothing swapped
    "memsync.restore.pgvector:_swap_history": "new",  # tables swapped, history.db not yet
}


def test_sigkill_mid_restore_is_rolled_back_or_finished_by_the_next_command(pg_deployment, cli):
    url, history = pg_deployment.paths.pg_url, pg_deployment.paths.history_db
    snapshot_id = snapshot(cli, pg_deployment)
    restored_rows = (ids(url, "mem0"), history_rows(history))
    add_after_snapshot(pg_deployment)
    journal = pg_deployment.paths.state / "restore-journal.json"
    for step, outcome in KILLS.items():
        old = (ids(url, "mem0"), history_rows(history))
        killed = memsync(pg_deployment, "restore", "--force", snapshot_id, kill_at=step)
        assert killed.returncode == -9, (step, killed.stderr)
        assert journal.is_file(), step
        unfinished = cli("check", "--json", config=pg_deployment.config)
        assert unfinished.code == 11, (step, unfinished.err)
        resumed = memsync(pg_deployment, "restore", "--resume", "--json")
        assert resumed.returncode == 0, (step, resumed.stderr)
        said = json.loads(resumed.stdout)["recovered"]
        assert said.startswith("finished" if outcome == "new" else "rolled back"), (step, said)
        assert not journal.exists(), step
        left = tables(url)
        assert not any("_restore_" in t and "_pre_restore_" not in t for t in left), (step, left)
        assert not Path(f"{history}.restore-{snapshot_id}").exists(), step
        now = (ids(url, "mem0"), history_rows(history))
        assert now == (old if outcome == "old" else restored_rows), step
        check = cli("check", "--json", config=pg_deployment.config)
        assert check.code == 0, (step, error_findings(check.json()))
        if outcome == "new":
            assert any(t.startswith("mem0_pre_restore_") for t in left), step
            memory = pg_deployment.reopen()
            assert memory.get(pg_deployment.seeded.live[0]) is not None
            pg_deployment.close()
        else:
            assert not any(t.startswith("mem0_pre_restore_") for t in left), step


def relfilenode(url: str, table: str) -> int:
    with psycopg.connect(url) as connection:
        found = connection.execute(
            "SELECT relfilenode FROM pg_class WHERE relname = %s", (table,)
        ).fetchone()
    return int(found[0])


def test_forget_erase_reaches_the_pre_restore_tables(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    assert cli("restore", "--force", snapshot_id, config=pg_deployment.config).code == 0
    assert cli("restore", "--force", snapshot_id, config=pg_deployment.config).code == 0
    tag = snapshot_id.lower().replace("-", "_")
    asides = [f"mem0_pre_restore_{tag}", f"mem0_pre_restore_{tag}_1"]
    victim, kept = pg_deployment.seeded.live[:2]
    assert all(victim in ids(url, t) for t in asides)
    files = {t: relfilenode(url, t) for t in asides}
    erased = cli("forget", victim, "--erase", "--yes", "--json", config=pg_deployment.config)
    assert erased.code == 0, erased.out + erased.err
    for table in asides:
        left = ids(url, table)
        assert victim not in left and kept in left, table
        assert relfilenode(url, table) != files[table], f"{table} was not rewritten (VACUUM FULL)"
    assert victim not in ids(url, "mem0")
    history_aside = Path(f"{pg_deployment.paths.history_db}.pre-restore-{snapshot_id}")
    import sqlite3

    with sqlite3.connect(history_aside) as connection:
        texts = connection.execute(
            "SELECT old_memory, new_memory FROM history WHERE memory_id = ?", (victim,)
        ).fetchall()
    assert texts and all(row == (None, None) for row in texts)


def test_a_scope_erasure_reaches_a_memory_the_restore_rolled_back_into_the_pre_restore_table(
    pg_deployment, cli
):
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    memory = pg_deployment.reopen()
    marker = "the locker code is PG-4471-rolled-back"
    added = memory.add(marker, user_id="alice", infer=False)["results"][0]["id"]
    pg_deployment.close()
    assert cli("restore", "--force", snapshot_id, config=pg_deployment.config).code == 0
    aside = f"mem0_pre_restore_{snapshot_id.lower().replace('-', '_')}"
    assert added in ids(url, aside) and added not in ids(url, "mem0")

    erased = cli("forget", "--user", "alice", "--erase", "--yes", config=pg_deployment.config)

    assert erased.code == 0, erased.out + erased.err
    assert f"rolled back by a restore, erased from its pre-restore copies: {added}" in erased.out
    assert added not in ids(url, aside)
    history_aside = Path(f"{pg_deployment.paths.history_db}.pre-restore-{snapshot_id}")
    assert marker.encode() not in history_aside.read_bytes()


def open_files(pid: int) -> set[Path]:
    return {Path(f"/proc/{pid}/fd/{fd}").resolve() for fd in os.listdir(f"/proc/{pid}/fd")}


def test_a_running_app_is_stopped_around_the_history_swap_by_the_window(pg_deployment, cli):
    from tests.helpers import window_app as app_process

    root, history = pg_deployment.paths.root, pg_deployment.paths.history_db
    snapshot_id = snapshot(cli, pg_deployment)
    newer = add_after_snapshot(pg_deployment, 1)
    pg_deployment.config.write_text(pg_deployment.config.read_text() + app_process.commands(root))
    assert app_process.start(root) == 0
    try:
        before = app_process.pid_of(root)
        assert history in open_files(before)  # the app holds history.db
        result = cli("restore", "--force", "--json", snapshot_id, config=pg_deployment.config)
        assert result.code == 0, result.err
        after = app_process.pid_of(root)
        assert after is not None and after != before  # stopped, and started again
        assert (root / "app-stops.log").read_text().split() == [str(before)]
        assert history in open_files(after)  # the restored history.db, not the aside one
        assert newer[0] not in ids(pg_deployment.paths.pg_url, "mem0")
        assert result.json()["check_after"]["errors"] == 0
    finally:
        app_process.stop(root)


ENTITIES_DDL = (
    "CREATE TABLE mem0_entities (id UUID PRIMARY KEY, vector vector(384), payload JSONB);"
    "CREATE INDEX mem0_entities_hnsw_idx ON mem0_entities USING hnsw (vector vector_cosine_ops)"
)


def add_entity(url: str) -> str:
    entity = "00000000-0000-4000-8000-000000000001"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(ENTITIES_DDL)
        connection.execute(
            'INSERT INTO mem0_entities VALUES (%s, %s, \'{"data": "ana"}\')',
            (entity, "[" + ",".join(["0.1"] * 384) + "]"),
        )
    return entity


def test_a_table_absent_in_the_snapshot_or_live_is_moved_aside_or_only_put_in_place(
    pg_deployment, cli
):
    url = pg_deployment.paths.pg_url
    pg_deployment.close()
    entity = add_entity(url)  # the snapshot has an entity table, the deployment then loses it
    with_entities = snapshot(cli, pg_deployment)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP TABLE mem0_entities")
    restored = cli("restore", "--force", "--json", with_entities, config=pg_deployment.config)
    assert restored.code == 0, restored.err
    tag = with_entities.lower().replace("-", "_")
    assert ids(url, "mem0_entities") == {entity}
    assert f"mem0_entities_pre_restore_{tag}" not in tables(url)  # nothing was there to move
    assert "mem0_entities_hnsw_idx" in indexes(url, "mem0_entities")

    with psycopg.connect(url, autocommit=True) as connection:  # now the reverse
        connection.execute("DROP TABLE mem0_entities")
    without = snapshot(cli, pg_deployment)
    add_entity(url)
    again = cli("restore", "--force", "--json", without, config=pg_deployment.config)
    assert again.code == 0, again.err
    second = without.lower().replace("-", "_")
    assert "mem0_entities" not in tables(url)  # the snapshot had none: mem0 makes it again
    assert ids(url, f"mem0_entities_pre_restore_{second}") == {entity}
    check = cli("check", "--json", config=pg_deployment.config)
    assert check.json()["counts"]["errors"] == 0, error_findings(check.json())


def test_a_snapshot_of_memsync_0_2_in_csv_verifies_and_restores_every_row(pg_deployment, cli):
    # snapshots taken before the binary export hold each table as CSV: still read, restored
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    root = pg_deployment.paths.root / "snapshots" / snapshot_id
    as_csv_snapshot(root, url)
    assert (root / "pgvector" / "mem0.csv").read_text().startswith("id,vector,payload\n")
    kept = ids(url, "mem0")
    pg_deployment.reopen().delete(pg_deployment.seeded.live[0])
    verified = cli("snapshot", "verify", snapshot_id, "--json", config=pg_deployment.config)
    assert verified.code == 0, verified.out + verified.err
    restored = cli("restore", snapshot_id, "--force", "--json", config=pg_deployment.config)
    assert restored.code == 0, restored.err
    assert ids(url, "mem0") == kept
    assert pg_deployment.reopen().get(pg_deployment.seeded.live[0]) is not None


def test_restore_to_a_directory_is_refused_on_pgvector_and_writes_nothing(
    pg_deployment, cli, tmp_path
):
    # a copy of a pgvector snapshot would still read the live server: no such copy is made
    snapshot_id = snapshot(cli, pg_deployment)
    dest = tmp_path / "look"
    for extra in ((), ("--dry-run",)):
        refused = cli(
            "restore", snapshot_id, "--to", str(dest), *extra, config=pg_deployment.config
        )
        assert refused.code == 2, refused.out + refused.err
        assert "on pgvector" in refused.err and "pgcopy" in refused.err, refused.err
        assert len(refused.err.strip().splitlines()) == 1
        assert not dest.exists()


def test_a_dry_run_names_no_copy_of_a_table_the_snapshot_does_not_hold(pg_deployment, cli):
    snapshot_id = snapshot(cli, pg_deployment)
    root = pg_deployment.paths.root / "snapshots" / snapshot_id / "pgvector"
    held = json.loads((root / "schema.json").read_text())["tables"]
    dry = cli("restore", snapshot_id, "--force", "--dry-run", config=pg_deployment.config)
    assert dry.code == 0, dry.err
    for table in ("mem0", "mem0_entities"):
        copied = f"snapshot's copy at {table} " in dry.out or f"aside to {table}_pre" in dry.out
        assert copied == (table in held) or table not in held and "no replacement" in dry.out, (
            dry.out
        )
