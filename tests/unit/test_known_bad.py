"""One known-bad mem0ai table: doctor reports from it, forget refuses from it, the docs show it."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.doctor import judge_mem0_version
from memsync.errors import ConfigError
from memsync.forget import refuse_bad_mem0
from memsync.stores.versions import MEM0_KNOWN_BAD, known_bad_mem0

DOCTOR_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "commands" / "doctor.md"


@pytest.mark.parametrize("row", MEM0_KNOWN_BAD, ids=lambda row: f"{row.first}-{row.last}")
def test_each_row_is_judged_refused_as_marked_and_documented(row):
    assert row in known_bad_mem0(row.last) and row in known_bad_mem0(row.first)
    assert (row.status, row.problem, row.fix) in judge_mem0_version(row.last, on_disk=False)
    assert (
        (row.status, row.problem, row.fix) in judge_mem0_version(row.last, on_disk=True)
    ) is not row.harmless_with_on_disk
    if row.refuses_bulk_delete:
        with pytest.raises(ConfigError, match="upgrade mem0ai"):
            refuse_bad_mem0(row.last, bulk=True)
    elif not any(other.refuses_bulk_delete for other in known_bad_mem0(row.last)):
        refuse_bad_mem0(row.last, bulk=True)
    assert f"| {row.first} – {row.last} | {row.problem} |" in DOCTOR_PAGE.read_text()


def test_a_release_past_every_range_is_clean():
    assert known_bad_mem0("2.2.1") == [] and judge_mem0_version("2.2.1", on_disk=False) == []
