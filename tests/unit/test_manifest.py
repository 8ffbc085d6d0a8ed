"""The manifest model: round trip byte for byte, unknown fields kept, newer formats refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memsync.errors import UnavailableError
from memsync.model import CaptureWindow
from memsync.stores.manifest import (
    FileEntry,
    Manifest,
    ManifestTooNew,
    loads,
    parse,
    sign,
    signature_ok,
)

AT = datetime(2026, 12, 1, 10, 15, 30, 250000, tzinfo=UTC)
DOCUMENT = {
    "format": 1,
    "id": "20261201T101530Z",
    "created_at": "2026-12-01T10:15:30.250000Z",
    "mode": "embedded",
    "collection": "mem0",
    "versions": {
        "memsync": "0.1.0",
        "mem0ai": "2.2.1",
        "qdrant-client": "1.20.0",
        "sqlite": "3.45.1",
    },
    "capture": {
        "vectors_at": "2026-12-01T10:15:30.250000Z",
        "vectors_finished_at": "2026-12-01T10:15:31Z",
        "history_at": "2026-12-01T10:15:31.500000Z",
        "history_finished_at": "2026-12-01T10:15:32Z",
        "longest_read_s": 0.1234,
    },
    "files": [
        {"path": "history.db", "size": 8192, "sha256": "a" * 64},
        {
            "path": "qdrant/meta.json",
            "size": 120,
            "sha256": "b" * 64,
            "stored_size": 160,
            "stored_sha256": "c" * 64,
        },
    ],
    "collections": {"mem0": {"vector_size": 384, "distance": "Cosine", "points": 40}},
    "history": {"rows": 50, "memories": 45},
    "integrity": {"history.db": "ok", "points_decoded": True, "vector_sizes_ok": True},
    "check": {
        "points": 40,
        "history_memories": 45,
        "errors": 0,
        "warnings": 1,
        "infos": 0,
        "findings": [],
    },
    "encryption": {"algorithm": "AES-256-GCM STREAM, 1 MiB chunks"},
}


def test_a_format_1_document_round_trips_key_for_key_and_byte_for_byte():
    manifest = parse(DOCUMENT, "20261201T101530Z", "test")
    assert manifest.to_json() == DOCUMENT
    assert loads(manifest.to_bytes(), None, "test") == manifest
    assert manifest.to_bytes() == (json.dumps(DOCUMENT, indent=2, sort_keys=True) + "\n").encode()
    assert manifest.encrypted and manifest.points == 40 and manifest.size_bytes == 8192 + 120
    assert manifest.entry("qdrant/meta.json") == FileEntry(
        path="qdrant/meta.json", size=120, sha256="b" * 64, stored_size=160, stored_sha256="c" * 64
    )
    assert manifest.stored_bytes == 8192 + 160


def test_fields_a_newer_memsync_added_are_kept_and_signed():
    document = {**DOCUMENT, "future_field": {"x": 1}}
    manifest = parse(document, None, "test")
    assert manifest.to_json() == document
    signed = {**document, "signature": sign(document, b"k" * 16)}
    assert signature_ok(parse(signed, None, "test"), b"k" * 16)
    assert not signature_ok(parse({**signed, "collection": "other"}, None, "test"), b"k" * 16)


def test_a_newer_format_is_refused_with_an_upgrade_hint():
    with pytest.raises(ManifestTooNew, match="format 7") as refused:
        parse({**DOCUMENT, "format": 7}, None, "s3://bucket/x/manifest.json")
    assert refused.value.exit_code == 11 and "upgrade memsync" in (refused.value.hint or "")
    assert "\n" not in refused.value.message


@pytest.mark.parametrize(
    "change",
    [
        {"format": 0},
        {"id": "nope"},
        {"files": []},
        {"capture": {}},
        {"files": [{"path": "../x", "size": 1, "sha256": "a" * 64}]},
    ],
)
def test_damaged_or_foreign_documents_are_unavailable(change):
    with pytest.raises(UnavailableError, match="not valid"):
        parse({**DOCUMENT, **change}, None, "test")


def test_a_built_manifest_writes_todays_keys():
    window = CaptureWindow(
        vectors_at=AT,
        vectors_finished_at=AT,
        history_at=AT,
        history_finished_at=AT,
        longest_read_s=0.5,
    )
    manifest = Manifest(
        id="20261201T101530Z",
        created_at=AT,
        collection="mem0",
        capture=window,
        files=(FileEntry(path="history.db", size=1, sha256="d" * 64),),
    )
    assert set(manifest.to_json()) == {
        "format",
        "id",
        "created_at",
        "mode",
        "collection",
        "versions",
        "capture",
        "files",
        "collections",
        "history",
        "integrity",
        "check",
        "encryption",
    }
    assert manifest.to_json()["files"] == [{"path": "history.db", "size": 1, "sha256": "d" * 64}]


def test_a_capture_not_quiesced_keeps_its_reason_and_a_reason_must_be_text():
    reason = "pid 7 (python worker.py) had history.db open for writing outside the agent's gate"
    capture = {**DOCUMENT["capture"], "quiesced": False, "not_quiesced": reason}
    document = {**DOCUMENT, "capture": capture}
    manifest = parse(document, None, "test")
    assert manifest.quiesced is False and manifest.not_quiesced == reason
    assert manifest.to_json() == document
    with pytest.raises(UnavailableError, match="not valid"):
        parse({**DOCUMENT, "capture": {**capture, "not_quiesced": 7}}, None, "test")


def test_a_safety_label_round_trips_and_a_manifest_without_one_is_an_ordinary_snapshot():
    assert parse(DOCUMENT, None, "test").label is None  # every manifest older than issue 24
    assert not parse(DOCUMENT, None, "test").safety
    document = {**DOCUMENT, "label": {"kind": "safety", "by": "reconcile"}}
    manifest = parse(document, None, "test")
    assert manifest.safety and manifest.label == {"kind": "safety", "by": "reconcile"}
    assert manifest.to_json() == document
    for wrong in ({"kind": 1}, {"by": "reconcile"}, {"kind": ""}, "safety"):
        with pytest.raises(UnavailableError, match="label"):
            parse({**DOCUMENT, "label": wrong}, None, "test")
