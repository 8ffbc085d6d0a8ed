"""Every manifest field is typed and ranged when parsed: nothing wrongly typed gets past ``parse``."""

from __future__ import annotations

import copy

import pytest

from memsync.errors import UnavailableError
from memsync.stores.manifest import loads, parse, problem
from memsync.stores.manifest_schema import ID_PATTERN, valid_id
from tests.unit.test_manifest import DOCUMENT


def _changed(path, value):
    document = copy.deepcopy(DOCUMENT)
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("capture", "longest_read_s"), None, "capture.longest_read_s"),
        (("capture", "longest_read_s"), "abc", "capture.longest_read_s"),
        (("capture", "longest_read_s"), float("nan"), "capture.longest_read_s"),
        (("capture", "longest_read_s"), True, "capture.longest_read_s"),
        (("format",), [1], "format"),
        (("format",), True, "format"),
        (("format",), 1.0, "format"),
        (("collections",), {"mem0": 5}, "collections.mem0"),
        (("collections", "mem0", "vector_size"), "384", "collections.mem0.vector_size"),
        (("collections", "mem0", "points"), -1, "collections.mem0.points"),
        (("collections", "../x"), {}, "collections.../x"),
        (("created_at",), "9999-12-31T23:59:59-01:00", "created_at"),
        (("created_at",), "0001-01-01T00:00:00+01:00", "created_at"),
        (("capture", "vectors_at"), "9999-12-31T23:59:59-01:00", "capture.vectors_at"),
        (("capture", "history_finished_at"), 5, "capture.history_finished_at"),
        (("collection",), "../../x", "collection"),
        (("collection",), 7, "collection"),
        (("files", 0, "path"), "history.db\n", "files.0.path"),
        (("files", 0, "size"), True, "files.0.size"),
        (("files", 0, "sha256"), "A" * 64, "files.0.sha256"),
        (("files", 1, "stored_sha256"), None, "files.1"),
        (("history", "memories"), "45", "history.memories"),
        (("versions", "mem0ai"), 2, "versions.mem0ai"),
        (("check", "errors"), "0", "check.errors"),
        (("encryption",), "yes", "encryption"),
        (("signature",), 5, "signature"),
        (("mode",), None, "mode"),
        (("id",), "20261201T101530Z\n", "id"),
    ],
)
def test_a_wrongly_typed_or_ranged_field_is_a_one_line_problem_naming_it(path, value, field):
    stated = problem(_changed(path, value), None)
    assert stated is not None and "\n" not in stated
    assert field in stated, stated
    with pytest.raises(UnavailableError, match="not valid") as refused:
        parse(_changed(path, value), None, "snapshots/x/manifest.json")
    assert refused.value.exit_code == 11 and "snapshots/x" in refused.value.message


def test_a_deep_nest_is_not_json_rather_than_a_crash():
    with pytest.raises(UnavailableError, match="nested too deeply"):
        loads(b"[" * 100_000, None, "x")


def test_ids_and_layout_paths_end_at_the_end_of_the_text():
    assert ID_PATTERN.match("20261201T101530Z") and not ID_PATTERN.match("20261201T101530Z\n")
    assert not valid_id("20261201T101530Z\n")
    assert problem(DOCUMENT, "20261201T101530Z") is None
