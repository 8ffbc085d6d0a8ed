"""Where a changed embedder or a growing embedded store should send the user: ``memsync migrate``.

A collection-level ``dimension-mismatch`` over stored points names ``memsync migrate --to
NEW.toml`` (dry-run first); an empty collection of the wrong size and a single point of an odd
size do not. Doctor's ``store-size`` decision is judged on counts around its threshold.
"""

from __future__ import annotations

from memsync import check, findings
from memsync.doctor.status import OK, WARNING
from memsync.model import CollectionInfo, EntityLink
from memsync.stores.qdrant_embedded.doctor import (
    SLOW_OPEN_POINTS,
    STORE_SIZE_WARN_POINTS,
    judge_store_size,
)
from tests.helpers import values
from tests.helpers.values import T0, event, point

KEY = "mem0.vector_store.config.embedding_model_dims"
MIGRATE = "memsync migrate --to NEW.toml --dry-run"


def dimension_findings(inventory):
    return [f for f in check.find_problems(inventory, T0.date()) if f.code == "dimension-mismatch"]


def test_points_stored_under_the_old_size_name_migrate_dry_run_first():
    stored = values.inventory(
        [point("a", size=64), point("b", size=64)],
        [event("a"), event("b", rowid=2)],
        size=64,  # the collection was made at 64; the config now says 384
    )
    (found,) = dimension_findings(stored)
    assert (found.collection, found.memory_id, found.expected, found.observed) == (
        "mem0",
        None,
        384,
        64,
    )
    assert "holds 2 points of size 64" in found.message and "embedder changed" in found.message
    assert MIGRATE in found.fix
    assert found.fix.index("--dry-run") < found.fix.index("then without --dry-run")
    assert f"{KEY} = 64" in found.fix  # the config that describes the store as it is


def test_an_empty_collection_of_the_wrong_size_keeps_the_plain_fix():
    (found,) = dimension_findings(values.inventory([], [], size=64))
    assert found.fix == findings.spec("dimension-mismatch").fix
    assert "migrate" not in found.fix and "migrate" not in found.message


def test_a_single_odd_point_is_reembedded_by_reconcile_not_migrated():
    stored = values.inventory(
        [point("a"), point("b", size=64)], [event("a"), event("b", rowid=2)], size=384
    )
    (found,) = dimension_findings(stored)
    assert found.memory_id == "b" and "memsync reconcile" in found.fix
    assert "migrate" not in found.fix


def test_the_entity_collection_counts_its_own_entities():
    collections = {
        "mem0": CollectionInfo(name="mem0", vector_size=384, distance="Cosine"),
        "mem0_entities": CollectionInfo(name="mem0_entities", vector_size=64, distance="Cosine"),
    }
    linked = [EntityLink(entity_id="e1", text="Oslo", linked_memory_ids=("a",))]
    with_entities = values.inventory(
        [point("a")], [event("a")], entities=linked, collections=collections
    )
    (found,) = dimension_findings(with_entities)
    assert found.collection == "mem0_entities" and MIGRATE in found.fix
    without = values.inventory([point("a")], [event("a")], collections=collections)
    (found,) = dimension_findings(without)
    assert "migrate" not in found.fix


def test_store_size_is_ok_below_the_warning_and_names_pgvector_from_it():
    below = judge_store_size("/srv/qdrant", {"mem0": STORE_SIZE_WARN_POINTS - 1})
    assert below.status == OK and below.fix is None
    assert f"{STORE_SIZE_WARN_POINTS - 1:,} points" in below.message
    at = judge_store_size("/srv/qdrant", {"mem0": STORE_SIZE_WARN_POINTS - 10, "mem0_entities": 10})
    assert at.status == WARNING  # every collection is loaded on open: the total counts
    assert "docs/how-to/move-from-embedded-qdrant-to-postgres.md" in at.fix
    assert "pgvector" in at.fix and "memsync migrate --to NEW.toml --dry-run" in at.fix
    assert STORE_SIZE_WARN_POINTS < SLOW_OPEN_POINTS
