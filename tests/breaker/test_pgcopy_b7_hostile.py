"""Breaker 7: hostile or damaged ``.pgcopy`` files whose manifest was rewritten to match."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.pg.test_restore_pgvector import ids, memsync, tables

HEAD = 19  # signature (11), flags (4), header extension length (4) of 0


def parse(data: bytes) -> list[list[bytes | None]]:
    """The rows of a binary COPY file with no header extension."""
    assert data[:11] == b"PGCOPY\n\xff\r\n\x00" and data[11:19] == bytes(8)
    at, rows = HEAD, []
    while True:
        (count,) = struct.unpack_from(">h", data, at)
        at += 2
        if count == -1:
            assert at == len(data)
            return rows
        row: list[bytes | None] = []
        for _ in range(count):
            (length,) = struct.unpack_from(">i", data, at)
            at += 4
            if length == -1:
                row.append(None)
            else:
                row.append(data[at : at + length])
                at += length
        rows.append(row)


def pack(rows: list[list[bytes | None]], head: bytes | None = None, tail: bytes = b"") -> bytes:
    out = bytearray(head if head is not None else b"PGCOPY\n\xff\r\n\x00" + bytes(8))
    for row in rows:
        out += struct.pack(">h", len(row))
        for value in row:
            out += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    out += struct.pack(">h", -1) + tail
    return bytes(out)


def write(root: Path, relative: str, data: bytes) -> None:
    """Rewrite a snapshot file and its manifest entry, as a tamperer would."""
    (root / relative).write_bytes(data)
    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == relative:
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def columns(root: Path) -> list[str]:
    schema = json.loads((root / "pgvector" / "schema.json").read_text())
    return [c["name"] for c in schema["tables"]["mem0"]["columns"]]


def _vector(dims: int, values: list[float]) -> bytes:
    return struct.pack(">hh", dims, 0) + struct.pack(f">{len(values)}f", *values)


def _set(rows, names, number, column, value):
    rows[number][names.index(column)] = value


Damage = Callable[[list, list], bytes]


def null_id(rows, names):
    _set(rows, names, 3, "id", None)
    return pack(rows)


def null_payload(rows, names):
    _set(rows, names, 3, "payload", None)
    return pack(rows)


def nan_vector(rows, names):
    vector = rows[3][names.index("vector")]
    (dims,) = struct.unpack_from(">h", vector)
    _set(rows, names, 3, "vector", _vector(dims, [float("nan")] * dims))
    return pack(rows)


def inf_vector(rows, names):
    vector = rows[3][names.index("vector")]
    (dims,) = struct.unpack_from(">h", vector)
    _set(rows, names, 3, "vector", _vector(dims, [float("inf")] * dims))
    return pack(rows)


def dims_not_vector_n(rows, names):
    vector = rows[3][names.index("vector")]
    (dims,) = struct.unpack_from(">h", vector)
    _set(rows, names, 3, "vector", _vector(dims - 1, [0.5] * (dims - 1)))
    return pack(rows)


def dims_disagree_bytes(rows, names):
    vector = bytearray(rows[3][names.index("vector")])
    vector[0:2] = struct.pack(">h", 3)
    _set(rows, names, 3, "vector", bytes(vector))
    return pack(rows)


def vector_unused_nonzero(rows, names):
    vector = bytearray(rows[3][names.index("vector")])
    vector[2:4] = struct.pack(">h", 7)
    _set(rows, names, 3, "vector", bytes(vector))
    return pack(rows)


def jsonb_version_2(rows, names):
    payload = rows[3][names.index("payload")]
    _set(rows, names, 3, "payload", b"\x02" + payload[1:])
    return pack(rows)


def payload_not_object(rows, names):
    _set(rows, names, 3, "payload", b"\x01[1,2]")
    return pack(rows)


def payload_bad_json(rows, names):
    _set(rows, names, 3, "payload", b"\x01{not json")
    return pack(rows)


def short_uuid(rows, names):
    _set(rows, names, 3, "id", b"\x01" * 15)
    return pack(rows)


def duplicate_id(rows, names):
    _set(rows, names, 3, "id", rows[2][names.index("id")])
    return pack(rows)


def wrong_count_mid(rows, names):
    rows[5] = rows[5][:2]
    return pack(rows)


def huge_length(rows, names):
    data = bytearray(pack(rows[:4]))
    data = data[:-2]
    data += struct.pack(">h", 3) + struct.pack(">i", 0x7FFFFFFF) + b"x" * 10
    return bytes(data)


def field_max_length(rows, names):
    data = bytearray(pack(rows[:4]))[:-2]
    data += struct.pack(">h", 3) + struct.pack(">i", 1 << 30) + b"x" * 10
    return bytes(data)


def negative_length(rows, names):
    data = bytearray(pack(rows[:4]))[:-2]
    data += struct.pack(">h", 3) + struct.pack(">i", -5) + b"x" * 10
    return bytes(data)


def header_extension(rows, names):
    head = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 6) + b"abcdef"
    return pack(rows, head=head)


def huge_header_extension(rows, names):
    head = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0x7FFFFFFF)
    return pack(rows, head=head)


def oids_flag(rows, names):
    head = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 1 << 16, 0)
    return pack(rows, head=head)


def bytes_after_trailer(rows, names):
    return pack(rows, tail=b"\x00\x03")


def no_trailer(rows, names):
    return pack(rows)[:-2]


HELD = [
    dims_disagree_bytes,
    jsonb_version_2,
    payload_bad_json,
    short_uuid,
    wrong_count_mid,
    huge_length,
    field_max_length,
    negative_length,
    oids_flag,
    bytes_after_trailer,
]


def snapshot_root(deployment) -> tuple[str, Path]:
    deployment.close()
    created = memsync(deployment, "snapshot", "create", "--json")
    assert created.returncode == 0, created.stderr
    snapshot_id = json.loads(created.stdout)["id"]
    return snapshot_id, deployment.paths.root / "snapshots" / snapshot_id


def damaged(deployment, damage) -> tuple[str, Path]:
    snapshot_id, root = snapshot_root(deployment)
    relative = "pgvector/mem0.pgcopy"
    write(root, relative, damage(parse((root / relative).read_bytes()), columns(root)))
    return snapshot_id, root


def outcomes(deployment, snapshot_id) -> list[str]:
    """What went wrong: restore (exit 11, one line, nothing changed), then verify (exit 3, a
    finding naming the file). Restore runs first: the tamperer's manifest takes its hashed path,
    the rows go to PostgreSQL's own binary COPY reader undecoded."""
    url = deployment.paths.pg_url
    before_tables, before_ids = tables(url), ids(url, "mem0")
    history = deployment.paths.history_db.read_bytes()
    wrong = []
    restored = memsync(deployment, "restore", snapshot_id, "--force")
    if restored.returncode != 11 or "Traceback" in restored.stderr:
        wrong.append(f"restore exit {restored.returncode}: {restored.stderr[-600:]}")
    elif len(restored.stderr.strip().splitlines()) != 1:
        wrong.append(f"restore said: {restored.stderr[-600:]}")
    if tables(url) != before_tables or ids(url, "mem0") != before_ids:
        wrong.append(f"store changed: {tables(url) ^ before_tables}")
    if deployment.paths.history_db.read_bytes() != history:
        wrong.append("history.db changed")
    verified = memsync(deployment, "snapshot", "verify", snapshot_id, "--json")
    if verified.returncode != 3 or "Traceback" in verified.stderr:
        wrong.append(f"verify exit {verified.returncode}: {verified.stderr[-300:]}")
    else:
        bad = [f for f in json.loads(verified.stdout)["findings"] if f["severity"] == "error"]
        if not any("mem0.pgcopy" in (f["message"] or "") for f in bad):
            wrong.append(f"verify names no file: {[(f['code'], f['message'][:80]) for f in bad]}")
    return wrong


@pytest.mark.parametrize("damage", HELD, ids=[d.__name__ for d in HELD])
def test_a_hostile_pgcopy_fails_verify_and_restore_naming_it_and_changes_nothing(
    pg_deployment, damage
):
    snapshot_id, _root = damaged(pg_deployment, damage)
    assert outcomes(pg_deployment, snapshot_id) == []


UNLOADABLE = [nan_vector, inf_vector, vector_unused_nonzero]


@pytest.mark.parametrize("damage", UNLOADABLE, ids=[d.__name__ for d in UNLOADABLE])
def test_verify_fails_a_pgcopy_vector_that_pgvector_refuses_to_load(pg_deployment, damage):
    snapshot_id, _root = damaged(pg_deployment, damage)
    verified = memsync(pg_deployment, "snapshot", "verify", snapshot_id, "--json")
    assert verified.returncode == 3, verified.stdout[-400:]
    bad = [f for f in json.loads(verified.stdout)["findings"] if f["severity"] == "error"]
    assert any("mem0.pgcopy row 4" in (f["message"] or "") for f in bad), bad


NAMELESS = [nan_vector, dims_not_vector_n, null_id, wrong_count_mid, payload_bad_json]


@pytest.mark.parametrize("damage", NAMELESS, ids=[d.__name__ for d in NAMELESS])
def test_restore_of_a_pgcopy_the_server_refuses_names_the_file_and_row(pg_deployment, damage):
    snapshot_id, _root = damaged(pg_deployment, damage)
    url = pg_deployment.paths.pg_url
    before_tables, before_ids = tables(url), ids(url, "mem0")
    restored = memsync(pg_deployment, "restore", snapshot_id, "--force")
    assert restored.returncode == 11, restored.stderr
    assert "Traceback" not in restored.stderr
    assert tables(url) == before_tables and ids(url, "mem0") == before_ids
    assert len(restored.stderr.strip().splitlines()) == 1
    assert "mem0.pgcopy" in restored.stderr, restored.stderr
    if damage is null_id:  # refused by the primary key built after the load: no row to name
        assert "contains null values" in restored.stderr, restored.stderr
        return
    assert "row 4" in restored.stderr or "row 6" in restored.stderr, restored.stderr


WRONG_HINT = [jsonb_version_2, short_uuid, huge_length]


@pytest.mark.parametrize("damage", WRONG_HINT, ids=[d.__name__ for d in WRONG_HINT])
def test_restore_of_a_damaged_pgcopy_blames_the_snapshot_not_the_role(pg_deployment, damage):
    snapshot_id, _root = damaged(pg_deployment, damage)
    restored = memsync(pg_deployment, "restore", snapshot_id, "--force")
    assert restored.returncode == 11, restored.stderr
    assert "needs CREATE on the schema" not in restored.stderr, restored.stderr
    assert "snapshot verify" in restored.stderr, restored.stderr


def test_a_header_extension_postgresql_skips_is_read_and_restored(pg_deployment):
    """PostgreSQL's format lets a writer add header extension bytes a reader skips."""
    url = pg_deployment.paths.pg_url
    snapshot_id, _root = damaged(pg_deployment, header_extension)
    before = ids(url, "mem0")
    verified = memsync(pg_deployment, "snapshot", "verify", snapshot_id, "--json")
    assert verified.returncode == 0, verified.stdout[-400:]
    restored = memsync(pg_deployment, "restore", snapshot_id, "--force")
    assert restored.returncode == 0, restored.stderr
    assert ids(url, "mem0") == before


def test_a_huge_header_extension_is_a_finding_not_a_2_gb_allocation(pg_deployment):
    import subprocess
    import sys

    from tests.pg.test_restore_pgvector import ROOT

    snapshot_id, _root = damaged(pg_deployment, huge_header_extension)
    limited = 'ulimit -v 1500000; exec "$@"'  # 1.5 GB: verify of a whole snapshot fits in it
    argv = [sys.executable, "-m", "memsync", "snapshot", "verify", snapshot_id, "--json"]
    argv += ["--config", str(pg_deployment.config)]
    verified = subprocess.run(
        ["bash", "-c", limited, "verify", *argv], cwd=ROOT, capture_output=True, text=True
    )
    assert "MemoryError" not in verified.stderr, verified.stderr
    assert verified.returncode == 3, verified.stderr
    bad = [f for f in json.loads(verified.stdout)["findings"] if f["severity"] == "error"]
    assert any("mem0.pgcopy" in (f["message"] or "") for f in bad), bad


def test_a_whole_snapshot_verifies_within_the_limit_that_test_uses(pg_deployment):
    """The control of the test above: an undamaged snapshot passes under the same limit."""
    import subprocess
    import sys

    from tests.pg.test_restore_pgvector import ROOT

    snapshot_id, _root = damaged(pg_deployment, header_extension)
    argv = [sys.executable, "-m", "memsync", "snapshot", "verify", snapshot_id]
    argv += ["--config", str(pg_deployment.config)]
    verified = subprocess.run(
        ["bash", "-c", 'ulimit -v 1500000; exec "$@"', "verify", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert verified.returncode == 0, verified.stderr
