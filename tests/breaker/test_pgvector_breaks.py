"""Breaking memsync on pgvector the way users and the field do: real PostgreSQL, real CLI, real signals."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memsync.stores.pgvector.connect import READ_LOCK_TIMEOUT_S
from tests.helpers.pg import as_csv_snapshot
from tests.pg.test_restore_pgvector import ROOT, ids, memsync, snapshot, tables


def tamper(deployment: Any, snapshot_id: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit the snapshot's ``pgvector/schema.json`` and rewrite its manifest entry to match.

    What someone with write access to the snapshot store can do when snapshots are not signed.
    """
    root = deployment.paths.root / "snapshots" / snapshot_id
    schema_path = root / "pgvector" / "schema.json"
    document = json.loads(schema_path.read_text())
    edit(document)
    data = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    schema_path.write_bytes(data)
    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "pgvector/schema.json":
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _type_injection(document: dict[str, Any]) -> None:
    column = document["tables"]["mem0"]["columns"][-1]
    column["type"] += "); DROP TABLE victim; CREATE TABLE planted (y int"


def _default_injection(document: dict[str, Any]) -> None:
    column = document["tables"]["mem0"]["columns"][-1]
    column["type"] += " DEFAULT '{}'::jsonb"


def _index_injection(document: dict[str, Any]) -> None:
    indexes = document["tables"]["mem0"]["indexes"]
    indexes[0] += "; DROP TABLE victim; CREATE TABLE planted (y int)"


def _no_columns(document: dict[str, Any]) -> None:
    del document["tables"]["mem0"]["columns"]


def _file_outside(document: dict[str, Any]) -> None:
    document["tables"]["mem0"]["file"] = "/etc/passwd"


@pytest.mark.parametrize(
    "edit", [_type_injection, _default_injection, _index_injection, _no_columns, _file_outside]
)
def test_a_tampered_schema_json_runs_no_sql_of_its_own_and_changes_nothing(
    pg_deployment, cli, edit
):
    """restore builds DDL from schema.json: a tampered one must be refused, not executed."""
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE victim (x int)")
    before_tables, before_ids = tables(url), ids(url, "mem0")
    history = pg_deployment.paths.history_db.read_bytes()
    tamper(pg_deployment, snapshot_id, edit)
    verified = memsync(pg_deployment, "snapshot", "verify", snapshot_id, "--json")
    assert verified.returncode in (3, 11), verified.stdout + verified.stderr  # 11: unreadable
    if verified.returncode == 3:
        failed = [
            f for f in json.loads(verified.stdout)["findings"] if f["code"] == "integrity-failed"
        ]
        assert failed and failed[0]["path"] == "pgvector/schema.json", failed
        # a binary export is read by schema.json's columns: without them, it is named too
        assert all(
            f["path"] == "pgvector/schema.json" or "schema.json lists no columns" in f["message"]
            for f in failed
        ), failed
    result = memsync(pg_deployment, "restore", snapshot_id, "--force")
    assert result.returncode == 11, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "schema" in result.stderr
    assert tables(url) == before_tables  # victim kept, nothing planted, no staged table left
    assert ids(url, "mem0") == before_ids
    assert pg_deployment.paths.history_db.read_bytes() == history


def start(deployment: Any, *argv: str) -> subprocess.Popen[str]:
    """``memsync ARGV --config ...`` started in a subprocess (stdout and stderr piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "memsync", *argv, "--config", str(deployment.config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow(
    reason="waits out the production lock_timeout of memsync's PostgreSQL reads (30 s): the wait is the subject"
)
def test_a_table_locked_by_another_session_fails_reads_in_time_naming_the_session(
    pg_deployment,
):
    """An ACCESS EXCLUSIVE lock (a migration, LOCK TABLE, someone's VACUUM FULL) held open:
    check and snapshot used to wait for ever; doctor too (pg_total_relation_size)."""
    url = pg_deployment.paths.pg_url
    pg_deployment.close()
    with psycopg.connect(url, application_name="migration") as holder:
        holder.execute("LOCK TABLE mem0 IN ACCESS EXCLUSIVE MODE")
        began = time.monotonic()
        check = start(pg_deployment, "check")
        create = start(pg_deployment, "snapshot", "create")
        doctor = start(pg_deployment, "doctor", "--json")
        doctor_out, doctor_err = doctor.communicate(timeout=60)
        doctor_s = time.monotonic() - began
        outcomes = [p.communicate(timeout=120) + (p.returncode,) for p in (check, create)]
        waited_s = time.monotonic() - began
        holder_pid = holder.info.backend_pid
    # doctor answers (its own reads do not wait; its check does, as check does) and says why
    assert doctor_s < READ_LOCK_TIMEOUT_S + 20 and "Traceback" not in doctor_err
    results = {r["code"]: r for r in json.loads(doctor_out)["results"]}
    assert results["pg-table"]["status"] == "ok", results["pg-table"]
    assert f"pid {holder_pid} (migration" in results["check"]["message"]
    assert waited_s < READ_LOCK_TIMEOUT_S + 60
    for out, err, code in outcomes:
        assert code == 75 and out == "", err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "mem0" in err and f"pid {holder_pid} (migration" in err
    assert not list((pg_deployment.paths.root / "snapshots").glob("*/manifest.json"))


def named_deployment(tmp_path, pg_server, collection, deleted=0):
    """(url, deployment with ``.config``, memory ids) of 5 memories in table ``collection``."""
    from mem0 import Memory

    from memsync.demo import deployment as build
    from memsync.demo import postgres

    database = "n_" + hashlib.sha256(collection.encode()).hexdigest()[:16]
    url = postgres.fresh_database(pg_server, database)
    paths = build.Paths(tmp_path / "dep", pg_url=url)
    config = build.write_memsync_config(paths, embedder="memsync_hash")
    named = f'collection_name = "{collection}"'
    config.write_text(config.read_text().replace('collection_name = "mem0"', named))
    build.open_memory(paths, embedder="memsync_hash").close()  # MEM0_DIR, providers
    settings = build.mem0_config(paths, "memsync_hash")
    settings["vector_store"]["config"]["collection_name"] = collection
    memory = Memory.from_config(settings)
    made = [
        memory.add(f"fact {n}", user_id="ana", infer=False)["results"][0]["id"] for n in range(5)
    ]
    for memory_id in made[:deleted]:
        memory.delete(memory_id)
    build.close_memory(memory)
    return url, type("D", (), {"config": config})(), made


def test_a_collection_name_postgres_would_fold_or_reject_unquoted_works_end_to_end(
    tmp_path, pg_server
):
    """``My-Mem.0``: mem0 quotes it (sql.Identifier); every memsync statement must too."""
    odd = "My-Mem.0"
    url, deployment, made = named_deployment(tmp_path, pg_server, odd, deleted=1)
    checked = memsync(deployment, "check", "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["counts"]["points"] == 4
    created = memsync(deployment, "snapshot", "create", "--json")
    assert created.returncode == 0, created.stderr
    snapshot_id = json.loads(created.stdout)["id"]
    assert json.loads(created.stdout)["collections"][odd]["points"] == 4
    restored = memsync(deployment, "restore", snapshot_id, "--force", "--json")
    assert restored.returncode == 0, restored.stderr
    aside = f"{odd}_pre_restore_{snapshot_id.lower()}"
    assert tables(url) == {odd, aside}
    erased = memsync(deployment, "forget", made[1], "--erase", "--yes", "--json")
    assert erased.returncode == 0, erased.stderr
    assert made[1] not in ids(url, odd) and made[1] not in ids(url, aside)
    assert memsync(deployment, "check").returncode == 0


@pytest.mark.parametrize(
    ("secret", "sslmode", "said"),
    [
        ("", "", "the secret is empty"),  # libpq would try its default local server
        ("this is = = garbage", 'sslmode = "require"', "not a libpq connection string"),
        ("postgresql://ana:my secret@db.internal/mem0", "", "not a libpq connection string"),
    ],
)
def test_a_bad_connection_string_is_a_config_error_that_never_shows_the_password(
    pg_deployment, secret, sslmode, said
):
    pg_deployment.close()
    (pg_deployment.paths.root / "pg-url").write_text(secret + "\n")
    config = pg_deployment.config
    config.write_text(
        config.read_text().replace("embedding_model_dims", f"{sslmode}\nembedding_model_dims")
    )
    for argv in (["check"], ["snapshot", "create"], ["forget", "--user", "ana", "--yes"]):
        result = memsync(pg_deployment, *argv)
        assert result.returncode == 10, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and said in result.stderr
        assert "my secret" not in result.stderr and "Traceback" not in result.stderr


def _rewrite(root: Path, relative: str, data: str | bytes | None) -> None:
    """Rewrite (None: delete) a snapshot file and make the manifest agree, as a tamperer would."""
    manifest = json.loads((root / "manifest.json").read_text())
    if data is None:
        (root / relative).unlink()
        manifest["files"] = [e for e in manifest["files"] if e["path"] != relative]
    else:
        data = data.encode() if isinstance(data, str) else data
        (root / relative).write_bytes(data)
        for entry in manifest["files"]:
            if entry["path"] == relative:
                entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _extra_column(text: str) -> str:
    lines = text.split("\n")
    return "\n".join(f"{line},x" if line else line for line in lines)


def _fields_added(data: bytes) -> bytes:
    """The first row's field count raised to 4 (a tool's extra column) in a binary export."""
    assert data[19:21] == b"\x00\x03"  # after the 19-byte header: the first row's 3 fields
    return data[:20] + b"\x04" + data[21:]


# (layout, what the tamperer does to the export's content: None deletes the file, and the
# message verify gives, when one is checked)
DAMAGES = {
    "csv-extra-column": ("csv", lambda data: _extra_column(data.decode()), None),
    "csv-columns-swapped": (
        "csv",
        lambda data: data.decode().replace("id,vector,payload", "vector,id,payload", 1),
        None,
    ),
    "csv-deleted": ("csv", lambda data: None, None),
    "binary-fields-added": (
        "binary",
        _fields_added,
        "rows of 4 fields, but its schema.json records 3 columns",
    ),
    "binary-deleted": ("binary", lambda data: None, None),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_an_export_that_does_not_match_its_schema_fails_verify_and_restore_changes_nothing(
    pg_deployment, damage
):
    layout, change, said = DAMAGES[damage]
    url = pg_deployment.paths.pg_url
    pg_deployment.close()
    created = memsync(pg_deployment, "snapshot", "create", "--json")
    snapshot_id = json.loads(created.stdout)["id"]
    root = pg_deployment.paths.root / "snapshots" / snapshot_id
    relative = "pgvector/mem0.pgcopy"
    if layout == "csv":
        as_csv_snapshot(root, url)  # as memsync 0.2 wrote it
        relative = "pgvector/mem0.csv"
    _rewrite(root, relative, change((root / relative).read_bytes()))
    before_tables, before_ids = tables(url), ids(url, "mem0")
    verified = memsync(pg_deployment, "snapshot", "verify", snapshot_id, "--json")
    assert verified.returncode == 3, verified.stdout + verified.stderr
    failed = [f for f in json.loads(verified.stdout)["findings"] if f["code"] == "integrity-failed"]
    assert [f["path"] for f in failed] == [relative], failed
    assert said is None or said in failed[0]["message"], failed
    restored = memsync(pg_deployment, "restore", snapshot_id, "--force")
    assert restored.returncode == 11, restored.stderr
    assert len(restored.stderr.strip().splitlines()) == 1 and "Traceback" not in restored.stderr
    assert tables(url) == before_tables and ids(url, "mem0") == before_ids


def test_mem0s_tables_in_another_schema_by_the_connection_strings_search_path(tmp_path, pg_server):
    """``options=-c search_path=app,public`` in the app's connection string: mem0 creates and
    uses ``app.mem0``. memsync's read-only sessions replaced those options with their own, so
    check said collection-missing and snapshot create made snapshots without the table."""
    from psycopg.conninfo import make_conninfo

    from memsync.demo import deployment as build
    from memsync.demo import postgres

    url = postgres.fresh_database(pg_server, "search_path_schema")
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE SCHEMA app")
    paths = build.Paths(
        tmp_path / "dep", pg_url=make_conninfo(url, options="-c search_path=app,public")
    )
    config = build.write_memsync_config(paths, embedder="memsync_hash")
    memory = build.open_memory(paths, embedder="memsync_hash")
    made = [
        memory.add(f"fact {n}", user_id="ana", infer=False)["results"][0]["id"] for n in range(5)
    ]
    build.close_memory(memory)
    deployment = type("D", (), {"config": config})()
    checked = memsync(deployment, "check", "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["counts"]["points"] == 5, (
        checked.stdout
    )
    created = memsync(deployment, "snapshot", "create", "--json")
    assert (
        created.returncode == 0 and json.loads(created.stdout)["collections"]["mem0"]["points"] == 5
    )
    snapshot_id = json.loads(created.stdout)["id"]
    restored = memsync(deployment, "restore", snapshot_id, "--force", "--json")
    assert restored.returncode == 0, restored.stderr
    with psycopg.connect(url) as connection:
        where = connection.execute(
            "SELECT schemaname, tablename FROM pg_tables WHERE tablename LIKE 'mem0%'"
        ).fetchall()
        assert set(where) == {("app", "mem0"), ("app", f"mem0_pre_restore_{snapshot_id.lower()}")}
        restored_ids = {r[0] for r in connection.execute("SELECT id::text FROM app.mem0")}
    assert restored_ids == set(made)
    assert memsync(deployment, "check").returncode == 0


def test_erasure_reaches_the_pre_restore_table_of_a_long_collection_name(tmp_path, pg_server):
    """A name whose ``_pre_restore_`` passes 54 bytes (42 bytes and more) was cut, with the
    marker, and hashed: erasure and doctor never found the tables moved aside."""
    long_name = "customer_support_agent_memories_production_eu"  # 45 bytes
    url, deployment, made = named_deployment(tmp_path, pg_server, long_name)
    created = memsync(deployment, "snapshot", "create", "--json")
    snapshot_id = json.loads(created.stdout)["id"]
    for _ in range(2):  # the second restore's aside needs its uniqueness number too
        restored = memsync(deployment, "restore", snapshot_id, "--force", "--json")
        assert restored.returncode == 0, restored.stderr
    aside = sorted(tables(url) - {long_name})
    assert len(aside) == 2 and all(len(name.encode()) <= 63 for name in aside)
    assert all(made[0] in ids(url, name) for name in aside)
    erased = memsync(deployment, "forget", made[0], "--erase", "--yes", "--json")
    assert erased.returncode == 0, erased.stderr
    purged = set(json.loads(erased.stdout)["erased"]["purged"])
    assert set(aside) <= purged, purged
    assert all(made[0] not in ids(url, name) for name in [long_name, *aside])
    doctor = json.loads(memsync(deployment, "doctor", "--json").stdout)
    listed = {r["path"] for r in doctor["results"] if r["code"] == "pre-restore-copy"}
    assert {f"table {name}" for name in aside} <= listed, listed
