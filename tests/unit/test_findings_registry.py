"""The finding-code registry is the one vocabulary: docs, emitters, planner and findings agree with it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from memsync import check, findings, snapshot
from memsync.findings import REGISTRY, Repair, Source
from memsync.model import (
    CaptureWindow,
    EntityLink,
    Inventory,
    MessageScope,
    Severity,
    payload_hash,
)
from memsync.reconcile.actions import KNOWN_KINDS, Action, ActionKind
from memsync.reconcile.plan import DAMAGE_CODES, POLICY_CODES, RULES, plan_reconcile
from tests.helpers import values
from tests.helpers.values import T0, event, point

ROOT = Path(__file__).resolve().parents[2]
FINDINGS_MD = ROOT / "docs" / "reference" / "findings.md"
SECTION = re.compile(r"^### `([a-z-]+)`\n(.*?)(?=^##|\Z)", re.MULTILINE | re.DOTALL)
ENTRY = re.compile(
    r"\*\*Severity:\*\* (\w+)\. \*\*Emitted by:\*\* `([a-z ]+)`\. \*\*Reconcile:\*\* (\w+)"
)

WINDOW = CaptureWindow(
    vectors_at=T0, vectors_finished_at=T0, history_at=T0, history_finished_at=T0, longest_read_s=0.1
)
DIMS = (("embedding_model_dims", 384),)


def documented() -> dict[str, tuple[str, str, str]]:
    """Per ``### `code``` section of findings.md: (severity, emitter, reconcile class) of its entry line."""
    sections = {}
    for code, body in SECTION.findall(FINDINGS_MD.read_text(encoding="utf-8")):
        entry = ENTRY.search(body)
        assert entry is not None, f"section {code} has no **Severity:** ... entry line"
        sections[code] = (entry.group(1), entry.group(2), entry.group(3))
    return sections


def test_every_registered_code_has_a_section_and_every_section_a_code():
    assert sorted(documented()) == sorted(REGISTRY)


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_a_section_states_the_registry_entry(code):
    spec = REGISTRY[code]
    assert documented()[code] == (spec.severity.value, spec.source.value, spec.repair.value)


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_anchor_points_at_the_section(code):
    assert REGISTRY[code].anchor == f"docs/reference/findings.md#{code}"
    assert f"### `{code}`" in FINDINGS_MD.read_text(encoding="utf-8")


def test_check_codes_are_the_registry_check_codes():
    assert check.FINDING_CODES == {
        c: s.severity for c, s in REGISTRY.items() if s.source is Source.CHECK
    }
    assert (
        len(check.FINDING_CODES) == 17
    )  # issue 11 added private-tmp-mismatch and legacy-point-store; issue 24 app-undecodable


def test_snapshot_verify_codes_are_registered_as_verify_errors():
    for code in snapshot.VERIFY_CODES:
        assert (REGISTRY[code].source, REGISTRY[code].severity) == (Source.VERIFY, Severity.ERROR)
    assert set(findings.codes(Source.VERIFY)) == set(snapshot.VERIFY_CODES)


def test_forget_codes_are_registered():
    assert findings.codes(Source.FORGET) == ("memory-not-found",)


EMITTED = re.compile(
    r"""(?:findings\.make|_problem|_finding)\(\s*(?:inventory,\s*)?"([a-z][a-z-]+)"   # a builder's code
    |"code":\s*"([a-z][a-z-]+)"                                                    # a hand-built finding
    |code\s*=\s*"([a-z][a-z-]+)"(?:\s+if\s.*?else\s+"([a-z][a-z-]+)")?             # code="..." (or a choice)
    """,
    re.VERBOSE,
)


def test_every_code_memsync_source_emits_is_registered():
    emitted = set()
    for path in sorted((ROOT / "memsync").rglob("*.py")):
        if (
            "doctor" in path.relative_to(ROOT).parts
            or path.name == "doctor.py"
            or path.parts[-2] == "demo"
        ):
            continue  # doctor's result codes are their own vocabulary (docs/reference/commands/doctor.md)
        for match in EMITTED.finditer(path.read_text(encoding="utf-8")):
            emitted |= {code for code in match.groups() if code}
    assert {
        "orphan-point",
        "manifest-missing",
        "memory-not-found",
    } <= emitted  # the scan sees all three
    assert emitted - set(REGISTRY) == set()


def test_every_repaired_code_has_exactly_one_planner_rule():
    assert DAMAGE_CODES == findings.repaired(Repair.DAMAGE) and POLICY_CODES == findings.repaired(
        Repair.POLICY
    )
    assert not DAMAGE_CODES & POLICY_CODES
    assert set(RULES) == DAMAGE_CODES | POLICY_CODES
    assert all(REGISTRY[code].source is Source.CHECK for code in RULES)


def test_action_kinds_keep_their_journal_strings():
    assert KNOWN_KINDS == {
        "delete-point",
        "restore-point",
        "record-event",
        "update-point",
        "relink-entity",
        "delete-messages",
        "report",
    }
    loaded = Action(index=0, kind="delete-point", code="resurrected-point", memory_id="a", why="")
    assert loaded.kind is ActionKind.DELETE_POINT and loaded.kind == "delete-point"
    unknown = Action(index=0, kind="teleport", code="x", memory_id=None, why="")
    assert unknown.kind == "teleport"


def test_make_takes_severity_and_default_fix_from_the_registry():
    made = findings.make("dangling-entity-link", "m", memory_id="a")
    assert (made.severity, made.fix) == (Severity.WARNING, REGISTRY["dangling-entity-link"].fix)
    assert findings.make("orphan-point", "m", fix="custom").fix == "custom"
    with pytest.raises(KeyError):
        findings.make("not-a-code", "m")


def test_finding_json_keeps_every_key_and_adds_the_structured_ones():
    made = findings.make("dimension-mismatch", "m", collection="mem0", expected=384, observed=5)
    assert list(made.to_json()) == [
        "code",
        "severity",
        "collection",
        "memory_id",
        "path",
        "message",
        "fix",
        "scope",
        "expected",
        "observed",
    ]
    assert (made.to_json()["expected"], made.to_json()["observed"]) == (384, 5)


@pytest.mark.parametrize(
    "text", ["a fact", "Zoë likes 寿司", ""], ids=["ascii", "unicode", "empty"]
)
def test_payload_hash_is_mem0s_md5_of_utf8(text):
    assert (
        payload_hash(text) == hashlib.md5(text.encode()).hexdigest()
    )  # mem0ai 2.2.1 Memory._create_memory


def test_payload_hash_of_a_lone_surrogate_is_a_digest_not_an_error():
    assert re.fullmatch(r"[0-9a-f]{32}", payload_hash("bad \ud800 text"))


# --- structured fields: what a consumer (reconcile) reads instead of a message ---------------


def inventory(points=(), events=(), scopes=(), entities=(), size=384) -> Inventory:
    return values.inventory(
        points, events, scopes=scopes, entities=entities, size=size, dims=DIMS, window=WINDOW
    )


def fields(found):
    return [(f.code, f.memory_id, f.scope, f.expected, f.observed) for f in found]


def test_findings_carry_scope_and_the_values_they_compare():
    stored = inventory(
        [point("a", "new text"), point("b", hash="0" * 32), point("c", size=5)],
        [event("a", new="old text"), event("b", rowid=2), event("c", rowid=3), event("d", rowid=4)],
    )
    assert fields(check.find_problems(stored, T0.date())) == [
        ("dimension-mismatch", "c", "user_id=u", 384, 5),
        ("hash-mismatch", "b", "user_id=u", payload_hash("a fact"), "0" * 32),
        ("missing-point", "d", None, "ADD", None),
        ("text-mismatch", "a", "user_id=u", payload_hash("old text"), payload_hash("new text")),
    ]


def test_collection_dimension_mismatch_carries_config_and_collection_sizes():
    found = check.find_problems(inventory([], [], size=1536), T0.date())
    assert fields(found) == [("dimension-mismatch", None, None, 384, 1536)]


def test_orphan_messages_and_dangling_links_carry_scope_count_and_entity():
    scopes = [MessageScope(scope="user_id=gone", row_count=3, newest_at=None)]
    links = [EntityLink(entity_id="e1", text="Oslo", linked_memory_ids=("x",))]
    found = check.find_problems(
        inventory([point("a")], [event("a")], scopes=scopes, entities=links), T0.date()
    )
    assert fields(found) == [
        ("dangling-entity-link", "x", None, None, "e1"),
        ("orphan-messages", None, "user_id=gone", None, 3),
    ]


@pytest.mark.parametrize(
    "scope",
    ["user_id=o'brien", "user_id=back\\slash", "user_id=x remain y", ""],
    ids=["quote", "backslash", "message-words", "empty"],
)
def test_reconcile_deletes_exactly_the_scope_the_finding_carries(scope):
    stored = inventory(
        [point("a")], [event("a")], [MessageScope(scope=scope, row_count=1, newest_at=None)]
    )
    planned = plan_reconcile(
        check.find_problems(stored, T0.date()),
        stored,
        {},
        only=frozenset({"orphan-messages"}),
        record_lost=False,
        now=T0,
        new_id=lambda: "memsync-id",
    )
    assert [(a.kind, a.params) for a in planned] == [(ActionKind.DELETE_MESSAGES, {"scope": scope})]
