"""Every pgvector fault the field produces, made on a real PostgreSQL, seen by ``check --json``."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsync import check
from memsync.config import load
from memsync.demo import deployment as build
from memsync.demo import pg_faults
from memsync.deployment import Deployment
from memsync.model import CheckReport
from tests.helpers.pg import as_csv_snapshot


def findings(cli, deployment) -> tuple[int, list[dict]]:
    result = cli("check", "--json", config=deployment.config)
    return result.code, result.json()["findings"]


def pairs(found: list[dict]) -> set[tuple[str, str | None]]:
    """(code, memory_id) of the errors (the seeded deployment has expired-memory warnings)."""
    return {(f["code"], f.get("memory_id")) for f in found if f["severity"] == "error"}


def test_a_history_write_failing_during_a_delete_leaves_a_missing_point(pg_deployment, cli):
    victim = pg_deployment.seeded.live[3]
    build.delete_with_failing_history(pg_deployment.memory, pg_deployment.paths, victim)
    assert victim not in build.point_ids(pg_deployment.memory)  # the row went, history did not
    code, found = findings(cli, pg_deployment)
    assert code == 3
    assert pairs(found) == {("missing-point", victim)}, json.dumps(found)[:2000]


def test_pg_restore_of_an_older_table_under_a_newer_history_resurrects_deletions(
    pg_deployment, cli, tmp_path
):
    dump = pg_faults.dump_table(pg_deployment.paths, tmp_path / "mem0.dump")
    memory = pg_deployment.memory
    deleted = pg_deployment.seeded.live[:2]
    for memory_id in deleted:
        memory.delete(memory_id)
    added = memory.add("moved to the harbour flat", user_id="alice", infer=False)["results"]
    (added_id,) = [item["id"] for item in added]
    pg_faults.restore_table(pg_deployment.paths, dump)
    code, found = findings(cli, pg_deployment)
    assert code == 3
    expected = {("resurrected-point", m) for m in deleted} | {("missing-point", added_id)}
    assert pairs(found) == expected, json.dumps(found)[:2000]


def test_history_rows_deleted_by_hand_leave_an_orphan_point(pg_deployment, cli):
    victim = pg_deployment.seeded.live[5]
    assert build.delete_history_rows(pg_deployment.paths, victim) >= 1
    code, found = findings(cli, pg_deployment)
    assert code == 3
    assert pairs(found) == {("orphan-point", victim)}, json.dumps(found)[:2000]


def test_a_dropped_memory_table_is_collection_missing(pg_deployment, cli):
    pg_faults.drop_table(pg_deployment.paths)
    code, found = findings(cli, pg_deployment)
    assert code == 3
    assert [f["code"] for f in found if f["severity"] == "error"] == ["collection-missing"], (
        json.dumps(found)[:2000]
    )
    message = found[0]["message"]
    assert "table" in message and "Qdrant" not in message, message


def test_a_table_re_created_under_another_embedder_is_a_dimension_mismatch(pg_deployment, cli):
    pg_deployment.close()
    pg_faults.drop_table(pg_deployment.paths, pg_faults.ENTITIES)  # absent offline (no spaCy)
    pg_faults.drop_table(pg_deployment.paths)
    other = pg_faults.memory_with_dims(pg_deployment.paths, 64)  # mem0 creates vector(64)
    try:
        other.add("speaks Korean at home", user_id="bob", infer=False)
    finally:
        build.close_memory(other)
    code, found = findings(cli, pg_deployment)
    assert code == 3
    table_level = [f for f in found if f["code"] == "dimension-mismatch" and not f["memory_id"]]
    assert [(f["collection"], f["expected"], f["observed"]) for f in table_level] == [
        ("mem0", 384, 64)  # vector(64) declared, embedding_model_dims = 384 configured
    ], json.dumps(found)[:2000]
    # the rows of the old embedder are gone with the dropped table: each live memory is missing
    missing = {f["memory_id"] for f in found if f["code"] == "missing-point"}
    assert set(pg_deployment.seeded.live) <= missing


def test_rows_of_another_size_in_an_untyped_vector_column_are_dimension_mismatches(
    pg_deployment, cli
):
    pg_deployment.close()
    pg_faults.untype_vector_column(pg_deployment.paths)
    other = pg_faults.memory_with_dims(pg_deployment.paths, 64)  # the embedder switched
    try:
        added = other.add("speaks Korean at home", user_id="bob", infer=False)["results"]
    finally:
        build.close_memory(other)
    (added_id,) = [item["id"] for item in added]
    code, found = findings(cli, pg_deployment)
    assert code == 3
    per_row = {
        (f["memory_id"], f["expected"], f["observed"])
        for f in found
        if f["code"] == "dimension-mismatch" and f["memory_id"]
    }
    assert per_row == {(added_id, 384, 64)}, json.dumps(found)[:2000]


def test_uuids_spelled_in_capitals_in_history_are_the_same_memory(pg_deployment, cli):
    victim = pg_deployment.seeded.live[7]
    pg_deployment.memory.update(victim.upper(), "now prefers green tea")  # e.g. a .NET client
    gone = pg_deployment.seeded.live[8]
    pg_deployment.memory.delete(gone.upper())
    code, found = findings(cli, pg_deployment)
    assert code == 0, json.dumps(found)[:2000]
    assert pairs(found) == set()
    assert not [f for f in found if f["memory_id"] in {victim, gone, victim.upper(), gone.upper()}]


def delete_while_the_export_waits(deployment, victim: str) -> CheckReport:
    """``check`` (no settling) whose export waits after its snapshot while the app deletes."""
    memory = deployment.reopen()  # a fresh app: its entity store is not touched by delete
    config = load(deployment.config, os.environ)
    reports: list[object] = []

    def run() -> None:
        try:
            reports.append(
                check.run_check(Deployment.open(config), datetime.now(UTC), settle=False)
            )
        except Exception as error:  # noqa: BLE001 - shown by the assertion below
            reports.append(error)

    with pg_faults.export_paused(deployment.paths):
        checker = threading.Thread(target=run)
        checker.start()
        deadline = time.monotonic() + 20
        while not pg_faults.waiting_on_lock(deployment.paths):
            assert time.monotonic() < deadline, "the export never started"
            time.sleep(0.05)
        memory.delete(victim)  # after the export's snapshot: the export still has the row
    checker.join(30)
    (report,) = reports
    assert isinstance(report, CheckReport), repr(report)
    return report


def test_a_delete_between_the_vectors_export_and_the_history_copy_is_in_flight(pg_deployment, cli):
    victim = pg_deployment.seeded.live[9]
    report = delete_while_the_export_waits(pg_deployment, victim)  # history.db in rollback mode
    (finding,) = [f for f in report.findings if f.severity.value != "warning"]
    assert (finding.code, finding.memory_id) == ("in-flight", victim)
    assert finding.message.startswith("resurrected-point explained by a write inside")
    code, found = findings(cli, pg_deployment)  # settled: the delete is in both stores now
    assert code == 0 and pairs(found) == set(), json.dumps(found)[:2000]
    assert "in-flight" not in {f["code"] for f in found}


def test_a_wal_history_is_read_before_the_export_so_the_delete_is_in_neither(pg_deployment):
    pg_deployment.close()
    with sqlite3.connect(pg_deployment.paths.history_db) as connection:
        assert connection.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    victim = pg_deployment.seeded.live[9]
    report = delete_while_the_export_waits(pg_deployment, victim)
    assert [f for f in report.findings if f.severity.value != "warning"] == []
    assert report.points == len(pg_deployment.seeded.live)  # the pair is of one instant
    assert report.window.history_at <= report.window.vectors_at  # history pinned first


def _checksums_of_damaged_file(root: Path, relative: str) -> None:
    """Make the manifest agree with a damaged file (damaged before it was hashed, by a bug)."""
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for entry in manifest["files"]:
        if entry["path"] == relative:
            data = (root / relative).read_bytes()
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


def _snapshot_in(pg_deployment, cli, layout: str) -> tuple[Path, Path]:
    """A fresh snapshot's root and its memory table's export: binary, or memsync 0.2's CSV."""
    created = cli("snapshot", "create", "--json", config=pg_deployment.config)
    assert created.code == 0, created.err
    root = Path(created.json()["path"])
    if layout == "csv":
        as_csv_snapshot(root, pg_deployment.paths.pg_url)
        return root, root / "pgvector" / "mem0.csv"
    return root, root / "pgvector" / "mem0.pgcopy"


def test_a_corrupted_export_row_in_a_snapshot_is_named_by_file_and_line(pg_deployment, cli):
    root, export = _snapshot_in(pg_deployment, cli, "csv")  # a snapshot of memsync 0.2
    lines = export.read_text().splitlines(keepends=True)
    assert lines[4].endswith('}"\n')
    lines[4] = lines[4][: -len('}"\n')] + '"\n'  # line 5's payload loses its closing brace
    export.write_text("".join(lines))
    _checksums_of_damaged_file(root, "pgvector/mem0.csv")
    result = cli("snapshot", "verify", "--json", str(root), config=pg_deployment.config)
    assert result.code == 3, result.out + result.err
    (finding,) = [f for f in result.json()["findings"] if f["code"] == "point-undecodable"]
    assert finding["path"].endswith("pgvector/mem0.csv")
    assert "pgvector/mem0.csv line 5" in finding["message"], finding["message"]
    assert "\n" not in finding["message"] and "verify-" not in finding["message"]


def test_a_corrupted_binary_export_row_in_a_snapshot_is_named_by_file_and_row(pg_deployment, cli):
    root, export = _snapshot_in(pg_deployment, cli, "binary")
    data = bytearray(export.read_bytes())
    at = -1
    for _ in range(5):  # the fifth row's jsonb payload: version 1, then its JSON text
        at = data.index(b'\x01{"', at + 1)
    data[at + 1] = ord("[")  # its object opens as an array: not JSON any more
    export.write_bytes(bytes(data))
    _checksums_of_damaged_file(root, "pgvector/mem0.pgcopy")
    result = cli("snapshot", "verify", "--json", str(root), config=pg_deployment.config)
    assert result.code == 3, result.out + result.err
    (finding,) = [f for f in result.json()["findings"] if f["code"] == "point-undecodable"]
    assert finding["path"].endswith("pgvector/mem0.pgcopy")
    assert "pgvector/mem0.pgcopy row 5" in finding["message"], finding["message"]
    assert "payload is not JSON" in finding["message"], finding["message"]


@pytest.mark.parametrize("layout", ["binary", "csv"])
def test_a_truncated_export_in_a_snapshot_is_a_checksum_mismatch(pg_deployment, cli, layout):
    root, export = _snapshot_in(pg_deployment, cli, layout)
    export.write_bytes(export.read_bytes()[: export.stat().st_size // 2])
    result = cli("snapshot", "verify", "--json", str(root), config=pg_deployment.config)
    assert result.code == 3, result.out + result.err
    found = {(f["code"], Path(f["path"]).name) for f in result.json()["findings"]}
    assert ("checksum-mismatch", export.name) in found, found


def test_an_export_cut_inside_a_row_is_named_by_file_and_line(pg_deployment, cli):
    root, export = _snapshot_in(pg_deployment, cli, "csv")
    lines = export.read_text().splitlines(keepends=True)
    cut = "".join(lines[:6]) + lines[6][: len(lines[6]) // 2]  # inside line 7's quoted payload
    export.write_text(cut)
    _checksums_of_damaged_file(root, "pgvector/mem0.csv")
    result = cli("snapshot", "verify", "--json", str(root), config=pg_deployment.config)
    assert result.code == 3, result.out + result.err
    (finding,) = [f for f in result.json()["findings"] if f["code"] == "integrity-failed"]
    assert finding["path"].endswith("pgvector/mem0.csv")
    assert finding["message"].startswith("pgvector export mem0.csv ends at line 7 after 6 rows")
    assert "\n" not in finding["message"]


@pytest.mark.parametrize("where", ["inside-row-7", "after-row-6"])
def test_a_binary_export_cut_is_named_by_file_and_row(pg_deployment, cli, where):
    root, export = _snapshot_in(pg_deployment, cli, "binary")
    data = export.read_bytes()
    starts = [i for i in range(19, len(data) - 1) if data[i : i + 6] == b"\x00\x03\x00\x00\x00\x10"]
    row_7 = starts[6]  # each row: 3 fields, then the id's length (16 bytes: a uuid)
    export.write_bytes(data[: row_7 + 40] if where == "inside-row-7" else data[:row_7])
    _checksums_of_damaged_file(root, "pgvector/mem0.pgcopy")
    result = cli("snapshot", "verify", "--json", str(root), config=pg_deployment.config)
    assert result.code == 3, result.out + result.err
    (finding,) = [f for f in result.json()["findings"] if f["code"] == "integrity-failed"]
    assert finding["path"].endswith("pgvector/mem0.pgcopy")
    said = "row 7 is truncated" if where == "inside-row-7" else "ends before row 7 and before"
    assert said in finding["message"], finding["message"]
    assert "\n" not in finding["message"]
