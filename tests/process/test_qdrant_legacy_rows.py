"""Embedded Qdrant files as older qdrant-client versions left them, read as qdrant-client 1.20 reads them.

Two faults of the field (issue 11), each built on a real mem0 deployment:

- one point under several row keys: older clients stored each spelling of a UUID (upper case,
  no hyphens, braces, ``urn:uuid:``) and each key pickle protocol (Python 3.14's default is 5)
  as its own row. qdrant-client 1.20 (``local/persistence.py: load``, ``local/utils.py:
  normalize_point_id``) keeps the row with the highest rowid among them and removes the others
  when it opens the store.
- a legacy ``storage.dbm`` point store (qdrant-client < 1.1.7) left beside a fresh, empty
  ``storage.sqlite`` by an upgrade that went wrong (qdrant-client issue #1456, PR #1442).

The oracle for "one point" is qdrant-client's own ``normalize_point_id``.
"""

from __future__ import annotations

import base64
import dbm
import hashlib
import json
import os
import pickle
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path

import pytest
from qdrant_client.local.utils import normalize_point_id

from memsync import config as config_module
from memsync import log
from memsync.demo import deployment as build
from memsync.stores.backends import vector_store_for
from tests.conftest import error_findings


@pytest.fixture(autouse=True)
def _logs_to_this_tests_stderr():
    """Earlier CLI tests leave structlog writing to their own (closed) captured stderr."""
    log.configure()


def storage_of(deployment, collection: str = "mem0") -> Path:
    return deployment.paths.qdrant / "collection" / collection / "storage.sqlite"


def key_of(point_id: str, protocol: int = 4) -> str:
    """A row key as qdrant-client wrote it: base64 of the pickled id (1.20: protocol 4)."""
    return base64.b64encode(pickle.dumps(point_id, protocol=protocol)).decode("ascii")


SPELLINGS = {
    "upper": lambda memory_id: memory_id.upper(),
    "hex": lambda memory_id: uuid.UUID(memory_id).hex,
    "braces": lambda memory_id: "{" + memory_id + "}",
    "urn": lambda memory_id: "urn:uuid:" + memory_id,
}


def current_point(storage: Path, memory_id: str):
    """The point as qdrant-client 1.20 loads it: the newest row among all spellings."""
    with closing(sqlite3.connect(storage)) as connection:
        for (blob,) in connection.execute("SELECT point FROM points ORDER BY rowid DESC"):
            point = pickle.loads(blob)
            if normalize_point_id(point.id) == memory_id:
                return point
    return None


def rows_of(storage: Path, memory_id: str) -> list[tuple[int, str]]:
    """(rowid, key) of every row qdrant-client 1.20 counts as the point ``memory_id``."""
    with closing(sqlite3.connect(storage)) as connection:
        return [
            (rowid, key)
            for rowid, key, blob in connection.execute("SELECT rowid, id, point FROM points")
            if normalize_point_id(pickle.loads(blob).id) == memory_id
        ]


def write_row(storage: Path, point, spelling: str, protocol: int, text: str, *, older: bool):
    """Write ``point`` again as an older client did: under ``spelling``, its key pickled with
    ``protocol``, its text ``text``; with ``older``, before every row there (a lower rowid)."""
    payload = dict(point.payload)
    payload["data"] = text
    payload["hash"] = hashlib.md5(text.encode("utf-8")).hexdigest()
    row = point.model_copy(update={"id": spelling, "payload": payload})
    with closing(sqlite3.connect(storage)) as connection, connection:
        if older:  # the rows there now were written after this one
            connection.execute("UPDATE points SET rowid = rowid + 1000000")
            rowid = int(connection.execute("SELECT min(rowid) FROM points").fetchone()[0]) - 1
        else:
            rowid = int(connection.execute("SELECT max(rowid) FROM points").fetchone()[0]) + 1
        connection.execute(
            "INSERT INTO points (rowid, id, point) VALUES (?, ?, ?)",
            (rowid, key_of(spelling, protocol), pickle.dumps(row)),
        )


def check(cli, deployment):
    deployment.close()
    result = cli("check", "--json", config=deployment.config)
    return result.code, result.json()


def store_of(deployment):
    return vector_store_for(config_module.load(deployment.config, os.environ))


# --- one point, several rows -----------------------------------------------------------------


def test_older_rows_under_other_spellings_are_the_same_point_and_check_is_clean(deployment, cli):
    target = deployment.seeded.live[0]
    deployment.close()
    storage = storage_of(deployment)
    point = current_point(storage, target)
    for name in ("upper", "hex", "braces"):
        write_row(storage, point, SPELLINGS[name](target), 4, f"older {name} text", older=True)
    write_row(storage, point, target, 5, "older text, key of protocol 5", older=True)
    assert len(rows_of(storage, target)) == 5
    code, report = check(cli, deployment)
    assert error_findings(report) == {} and code == 0, report["findings"]
    assert report["counts"]["points"] == len(deployment.seeded.live)
    store = store_of(deployment)
    for spelling in (target, target.upper(), uuid.UUID(target).hex):
        found = store.find_point(store.location, store.collection, spelling)
        assert found is not None and found.payload["data"] == point.payload["data"]


def test_the_newest_row_under_another_spelling_holds_the_current_text(deployment, cli):
    target = deployment.seeded.live[4]
    deployment.close()
    storage = storage_of(deployment)
    point = current_point(storage, target)
    text = point.payload["data"]
    # An older client wrote the canonical row first, then its last write of the memory went
    # to a new row under the upper-case spelling.
    with closing(sqlite3.connect(storage)) as connection, connection:
        connection.execute("DELETE FROM points WHERE id = ?", (key_of(target),))
    write_row(storage, point, target, 4, "an older text", older=True)
    write_row(storage, point, target.upper(), 4, text, older=False)
    code, report = check(cli, deployment)
    assert error_findings(report) == {} and code == 0, report["findings"]
    assert report["counts"]["points"] == len(deployment.seeded.live)


def newer_row_under_a_protocol_5_key(deployment) -> str:
    """Python 3.11 wrote "lives in Porto" under a protocol-4 key; the app then ran under
    Python 3.14 (protocol 5 by default) and its client failed to replace that row."""
    target = deployment.seeded.live[1]
    deployment.memory.update(target, "moved to Lisbon")
    deployment.close()
    storage = storage_of(deployment)
    point = current_point(storage, target)
    with closing(sqlite3.connect(storage)) as connection, connection:
        connection.execute("DELETE FROM points WHERE id = ?", (key_of(target),))
    write_row(storage, point, target, 4, "lives in Porto", older=True)
    write_row(storage, point, target, 5, "moved to Lisbon", older=False)
    return target


def test_the_newest_row_is_the_point_whatever_its_key_protocol(deployment, cli):
    target = newer_row_under_a_protocol_5_key(deployment)
    store = store_of(deployment)
    found = store.find_point(store.location, store.collection, target)
    assert found is not None and found.payload["data"] == "moved to Lisbon"
    code, report = check(cli, deployment)
    assert code == 0 and error_findings(report) == {}


def test_erase_removes_every_row_of_a_point(deployment, tmp_path):
    target = newer_row_under_a_protocol_5_key(deployment)
    store = store_of(deployment)
    copy = build.copy_qdrant(deployment.paths, tmp_path / "pre-restore-copy")
    assert store.erase_points(copy, [target.upper()]) == 2
    assert rows_of(copy / "collection" / "mem0" / "storage.sqlite", target) == []
    assert store.find_point(copy, store.collection, target) is None


@pytest.mark.filterwarnings(
    # expected: the planted legacy rows are what qdrant-client 1.20 removes when forget opens it
    "ignore:Removed .* outdated copies of points:UserWarning"
)
def test_forget_leaves_no_row_of_any_spelling(deployment, cli):
    target = deployment.seeded.live[2]
    deployment.close()
    storage = storage_of(deployment)
    point = current_point(storage, target)
    write_row(storage, point, SPELLINGS["urn"](target), 4, "older urn text", older=True)
    write_row(storage, point, target, 5, "older text, key of protocol 5", older=True)
    result = cli("forget", target, "--yes", "--no-snapshot", "--json", config=deployment.config)
    outcome = result.json()
    assert result.code == 0, outcome
    assert outcome["deleted"] == [target] and outcome["unproven"] == []
    # qdrant-client 1.20's load removed the outdated rows when mem0 opened the store, and
    # its delete removed the current one: no row of the point is left.
    assert rows_of(storage, target) == []
    code, report = check(cli, deployment)
    assert code == 0 and error_findings(report) == {}


def test_a_row_left_under_an_older_spelling_after_a_delete_is_a_resurrected_point(deployment, cli):
    target = deployment.seeded.live[3]
    deployment.close()
    storage = storage_of(deployment)
    point = current_point(storage, target)
    memory = deployment.reopen()
    memory.delete(target)  # history ends with DELETE
    deployment.close()
    # An older client deleted only the key it knew; the row it had written earlier under the
    # upper-case spelling stayed, and is now the newest copy of the point.
    write_row(storage, point, target.upper(), 4, point.payload["data"], older=True)
    code, report = check(cli, deployment)
    assert code == 3
    assert error_findings(report) == {"resurrected-point": {target}}

    result = cli("reconcile", "--json", "--no-snapshot", config=deployment.config)
    outcome = result.json()
    assert result.code == 0, outcome
    assert [(a["kind"], a["memory_id"]) for a in outcome["actions"]] == [("delete-point", target)]
    assert rows_of(storage, target) == []
    code, report = check(cli, deployment)
    assert code == 0 and error_findings(report) == {}
    memory = deployment.reopen()
    assert memory.get(target) is None


# --- a legacy dbm point store ----------------------------------------------------------------


def leave_dbm_beside_empty_sqlite(deployment, sqlite: str = "empty table") -> list[str]:
    """The memory collection's points in a dbm store as qdrant-client < 1.1.7 wrote it (key: the
    pickled id, value: the pickled PointStruct), beside the fresh, empty storage.sqlite of a
    first open after an upgrade that went wrong (``sqlite``: "empty table" as qdrant-client
    creates it, "0 bytes" as an interrupted first open leaves it, or "none"). Returns the dbm
    files' names."""
    deployment.close()
    storage = storage_of(deployment)
    with closing(sqlite3.connect(storage)) as connection:
        blobs = [blob for (blob,) in connection.execute("SELECT point FROM points")]
    with closing(dbm.open(str(storage.with_name("storage.dbm")), "c")) as legacy:
        for blob in blobs:
            legacy[pickle.dumps(pickle.loads(blob).id)] = blob
    storage.unlink()
    with closing(sqlite3.connect(storage)) as connection, connection:
        connection.execute("CREATE TABLE IF NOT EXISTS points (id TEXT PRIMARY KEY, point BLOB)")
    if sqlite == "0 bytes":
        storage.write_bytes(b"")
    elif sqlite == "none":
        storage.unlink()
    return sorted(p.name for p in storage.parent.glob("storage.dbm*"))


@pytest.mark.parametrize("sqlite", ["0 bytes", "none"])
def test_a_legacy_dbm_store_beside_an_empty_or_no_sqlite_file_is_named_not_damage(
    deployment, cli, sqlite
):
    names = leave_dbm_beside_empty_sqlite(deployment, sqlite)
    expected = ", ".join(f"collection/mem0/{name}" for name in names)
    before = storage_of(deployment).exists()
    code, report = check(cli, deployment)
    assert code == 3, report
    legacy = [f for f in report["findings"] if f["code"] == "legacy-point-store"]
    assert [(f["collection"], f["path"]) for f in legacy] == [("mem0", expected)], report
    assert "not lost" in legacy[0]["message"] and "storage.sqlite" in legacy[0]["fix"]
    doctor = cli("doctor", "--json", config=deployment.config)
    results = doctor.json()["results"]
    assert [r["status"] for r in results if r["code"] == "legacy-point-store"] == ["error"]
    text = doctor.out
    assert "damaged" not in text and "bad header" not in text and "restore" not in text, [
        r for r in results if r["status"] != "ok"
    ]
    for command in (("snapshot", "create"), ("forget", deployment.seeded.live[0], "--yes")):
        result = cli(*command, config=deployment.config)
        assert result.code == 11 and "legacy point store" in result.err, result.err
        assert "storage.dbm" in result.err and "damaged" not in result.err
    assert storage_of(deployment).exists() is before  # memsync changed nothing
    assert cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"] == []


def test_check_names_a_legacy_dbm_store(deployment, cli):
    names = leave_dbm_beside_empty_sqlite(deployment)
    assert names  # Python's dbm wrote its files (dbm.dumb: .dat, .dir, .bak)
    memory = deployment.reopen()  # qdrant-client 1.20 opens the empty sqlite: mem0 sees nothing
    assert memory.vector_store.client.count("mem0").count == 0
    code, report = check(cli, deployment)
    assert code == 3
    expected = tuple(f"collection/mem0/{name}" for name in names)
    legacy = [f for f in report["findings"] if f["code"] == "legacy-point-store"]
    assert [(f["collection"], f["severity"], f["path"]) for f in legacy] == [
        ("mem0", "error", ", ".join(expected))
    ]
    assert store_of(deployment).legacy_files() == {"mem0": expected}


def test_reconcile_deletes_and_records_nothing_while_a_legacy_dbm_store_exists(deployment, cli):
    live = set(deployment.seeded.live)
    leave_dbm_beside_empty_sqlite(deployment)
    with closing(sqlite3.connect(deployment.paths.history_db)) as connection:
        rows_before = connection.execute("SELECT count(*) FROM history").fetchone()[0]
    result = cli("reconcile", "--json", "--no-snapshot", "--record-lost", config=deployment.config)
    outcome = json.loads(result.out or result.err)
    with closing(sqlite3.connect(deployment.paths.history_db)) as connection:
        rows_after = connection.execute("SELECT count(*) FROM history").fetchone()[0]
        deleted = {
            memory_id
            for (memory_id,) in connection.execute(
                "SELECT memory_id FROM history WHERE event = 'DELETE'"
            )
        }
    assert rows_after == rows_before and not deleted & live
    assert result.code == 4, outcome
    assert {(a["kind"], a["code"]) for a in outcome["actions"]} == {
        ("report", "legacy-point-store")
    }


def test_forget_refuses_while_a_legacy_dbm_store_exists(deployment, cli):
    target = deployment.seeded.live[0]
    leave_dbm_beside_empty_sqlite(deployment)
    with closing(sqlite3.connect(deployment.paths.history_db)) as connection:
        rows_before = connection.execute("SELECT count(*) FROM history").fetchone()[0]
    result = cli("forget", target, "--yes", "--no-snapshot", "--json", config=deployment.config)
    assert result.code == 11, result.out + result.err
    assert "legacy point store" in result.err and "storage.dbm" in result.err
    with closing(sqlite3.connect(deployment.paths.history_db)) as connection:
        assert connection.execute("SELECT count(*) FROM history").fetchone()[0] == rows_before


def test_snapshot_create_refuses_while_a_legacy_dbm_store_exists(deployment, cli):
    leave_dbm_beside_empty_sqlite(deployment)
    result = cli("snapshot", "create", config=deployment.config)
    assert result.code == 11 and "storage.dbm" in result.err
    assert cli("snapshot", "list", "--json", config=deployment.config).json()["snapshots"] == []


def test_doctor_names_a_legacy_dbm_store_with_its_files_and_the_fix(deployment, cli):
    names = leave_dbm_beside_empty_sqlite(deployment)
    result = cli("doctor", "--json", config=deployment.config)
    legacy = [r for r in result.json()["results"] if r["code"] == "legacy-point-store"]
    assert [r["status"] for r in legacy] == ["error"]
    assert legacy[0]["path"] == ", ".join(
        str(deployment.paths.qdrant / "collection" / "mem0" / name) for name in names
    )
    assert "storage.sqlite" in legacy[0]["fix"]
    assert result.code != 0
