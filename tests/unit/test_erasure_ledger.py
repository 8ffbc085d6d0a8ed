"""The erasure ledger keeps ids and a digest of the scope, never the scope's plain value."""

from __future__ import annotations

from datetime import UTC, datetime

from memsync.erase import ledger
from memsync.erase.copies import selector

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_ledger_finds_a_scope_by_digest_and_never_stores_it(tmp_path):
    ledger.record(tmp_path, ["m2", "m1"], {"user_id": "alice"}, NOW)
    ledger.record(tmp_path, ["m3"], {"user_id": "bob"}, NOW)
    ledger.record(tmp_path, ["m4"], None, NOW)
    assert ledger.erased_ids(tmp_path, {"user_id": "alice"}) == {"m1", "m2"}
    assert ledger.erased_ids(tmp_path, {"agent_id": "alice"}) == set()
    assert ledger.erased_ids(tmp_path) == {"m1", "m2", "m3", "m4"}
    stored = (tmp_path / ledger.LEDGER).read_text()
    assert "alice" not in stored and "bob" not in stored
    assert ledger.digest("alice") in stored


def test_an_empty_erasure_writes_nothing(tmp_path):
    ledger.record(tmp_path, [], {"user_id": "alice"}, NOW)
    assert not (tmp_path / ledger.LEDGER).exists()
    assert ledger.erased_ids(tmp_path) == set()


def test_an_unreadable_ledger_is_an_error_not_an_empty_one(tmp_path):
    import pytest

    from memsync.errors import UnavailableError

    (tmp_path / ledger.LEDGER).write_text("{not json")
    with pytest.raises(UnavailableError, match="erasure ledger"):
        ledger.erased_ids(tmp_path)


def test_the_removal_command_names_the_scope_or_the_ids():
    assert selector(["b", "a"], {"user_id": "zed"}) == "--user zed"
    assert selector(["b", "a"], {}) == "a b"
