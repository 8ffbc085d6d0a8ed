"""The migration's pure parts: refusals, the plan's counts, the comparison, the sample."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memsync.migrate.plan import Side, find_refusal, plan_migrate, re_embeds
from memsync.migrate.verify import Summary, compare, compare_entities, pick_sample
from memsync.model import EntityLink

SOURCE = Side(
    kind="embedded-qdrant", where="/srv/qdrant", location="/srv/qdrant", collection="mem0",
    embedder={"provider": "memsync_minilm"}, dims=384, history="/srv/mem0/history.db",
)  # fmt: skip
PG = replace(
    SOURCE,
    kind="pgvector",
    where="postgresql://app@db:5432/mem0 table mem0",
    location=None,
    container="table",
)


@pytest.mark.parametrize(
    ("target", "exists", "expected"),
    [
        (SOURCE, False, ("nothing to migrate", "change the new config's embedder")),
        (replace(SOURCE, embedder={"provider": "openai"}), False,
         ("is the live store", "name a new directory")),
        (replace(SOURCE, collection="mem0_v2"), False, ("is the live store", "name a new directory")),
        (replace(SOURCE, location="/srv/q2", where="/srv/q2", history="/x.db"), False,
         ("history.db", "history_db_path in the new config to /srv/mem0/history.db")),
        (replace(SOURCE, location="/srv/q2", where="/srv/q2"), True,
         ("already exists", "did not create")),
        (replace(SOURCE, location="/srv/q2", where="/srv/q2"), False, None),
        (PG, False, None),
        (PG, True, ("already exists", "did not create")),
    ],
    ids=["same", "same-dir-new-embedder", "same-dir-new-collection", "history", "exists",
         "new-dir", "pgvector", "pg-table-exists"],
)  # fmt: skip
def test_find_refusal_names_why_a_target_cannot_be_used(target, exists, expected):
    """Each refusal has its own hint (a changed history.db is not fixed by a new directory)."""
    refusal = find_refusal(SOURCE, target, target_exists=exists)
    if expected is None:
        assert refusal is None
    else:
        assert refusal is not None
        assert expected[0] in refusal[0] and expected[1] in refusal[1]


def test_the_same_table_on_the_same_server_is_the_live_store_for_pgvector():
    refusal = find_refusal(PG, replace(PG, dims=768), target_exists=True)
    assert refusal is not None and "is the live store" in refusal[0] and "new table" in refusal[1]


@pytest.mark.parametrize(
    ("target", "re_embed"),
    [
        (replace(PG, embedder={"provider": "memsync_minilm"}), False),
        (replace(PG, dims=768), True),
        (replace(PG, embedder={"provider": "openai"}), True),
    ],
    ids=["same-embedder", "other-dims", "other-embedder"],
)
def test_the_plan_re_embeds_only_when_the_embedder_or_its_size_changes(target, re_embed):
    plan = plan_migrate(SOURCE, target, memories=130, entities=5, payload_bytes=1000, batch_size=64)
    assert re_embeds(SOURCE, target) is plan.re_embed is re_embed
    assert plan.embedder_calls == (135 if re_embed else 0)
    assert plan.batches == 3 + 1
    assert plan.disk_bytes == 135 * target.dims * 8 + 1000


def _summary(payload, size=4, digest=b"a"):
    return Summary(payload, size, digest)


def test_compare_names_each_difference_by_point():
    source = {
        "a": _summary({"data": "x"}),
        "b": _summary({"data": "y"}),
        "c": _summary({"data": "z"}),
    }
    target = {
        "a": _summary({"data": "x"}),
        "b": _summary({"data": "y", "user_id": "u"}, size=3),
        "d": _summary({"data": "w"}),
    }
    found = [(d.point_id, d.what) for d in compare(source, target, 4, vectors_copied=True)]
    assert found == [("b", "dimension"), ("b", "payload"), ("c", "missing"), ("d", "extra")]


def test_compare_checks_vectors_only_when_they_were_copied():
    source, target = {"a": _summary({}, digest=b"1")}, {"a": _summary({}, digest=b"2")}
    assert [d.what for d in compare(source, target, 4, vectors_copied=True)] == ["vector"]
    assert compare(source, target, 4, vectors_copied=False) == []


def test_entity_links_that_differ_are_named():
    before = (EntityLink(entity_id="e1", text="Lisbon", linked_memory_ids=("a", "b")),)
    after = (EntityLink(entity_id="e1", text="Lisbon", linked_memory_ids=("a",)),)
    assert [d.point_id for d in compare_entities(before, after)] == ["e1"]
    assert compare_entities(before, before) == []


def test_the_sample_skips_memories_without_text_or_scope_and_spreads_over_the_ids():
    points = {f"{i:03}": _summary({"data": f"t{i}", "user_id": "u"}) for i in range(100)}
    points["x-no-scope"] = _summary({"data": "t"})
    points["y-no-text"] = _summary({"user_id": "u"})
    sample = pick_sample(points, exclude={"000"}, size=20)
    assert len(sample) == 20 and "000" not in sample
    assert not {"x-no-scope", "y-no-text"} & set(sample)
    assert sample[-1] > "080"  # spread, not the first twenty
