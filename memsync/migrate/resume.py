"""A resumed migration's target, brought level with the new source capture before the copy.

A re-run captures the source again; since the last run the app may have deleted or updated
memories (and their entity links). Target points the new capture no longer has are deleted
from the target, and target points whose payload differs from the capture's are deleted so
the copy writes them again (re-embedded when the plan re-embeds). Only the target is written:
it is the migration's own new store. The rest are kept and skipped by the copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync.migrate.copy import target_writes
from memsync.stores.mem0 import AppWriter
from memsync.stores.vector_store import VectorCapture, VectorStore


@dataclass(slots=True)
class Resumed:
    """What the target held when a migration resumed.

    Attributes:
        have: ids the target holds as the source capture has them (the copy skips them).
        removed: ids deleted from the target: the source no longer has them.
        replaced: ids deleted from the target because the source changed them (copied again).
    """

    have: set[str] = field(default_factory=set)
    removed: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


def catch_up(
    writer: AppWriter,
    source_store: VectorStore,
    source: VectorCapture,
    target_store: VectorStore,
    dest: Path,
) -> Resumed:
    """Capture the target into ``dest`` (inventory only) and delete its stale points.

    Call inside ``open_memory(new_config)``: opening the target through mem0 rolls back a
    hot journal a killed write left, so the capture reads a consistent target.

    Raises:
        TryLaterError: (exit 75) the target's disk is full.
        UnavailableError: (exit 11) the target or a capture is unreadable.
    """
    copy = target_store.capture(dest, vectors=False)
    found = Resumed()
    for source_name, target_name, entities in (
        (source_store.collection, target_store.collection, False),
        (source_store.entities_collection, target_store.entities_collection, True),
    ):
        # both sides read as ``iter_points`` reads them (a target capture has no vectors)
        payloads = {
            p.id: _comparable(p.payload) for p in source_store.iter_points(source, source_name)
        }
        stale = []
        for point in target_store.iter_points(copy, target_name):  # payloads, vector sizes
            point_id = point.id
            if point_id not in payloads:
                found.removed.append(point_id)
            elif payloads[point_id] != _comparable(point.payload):
                found.replaced.append(point_id)
            else:
                found.have.add(point_id)
                continue
            stale.append(point_id)
        if stale:
            with target_writes(target_store.where):
                writer.delete_points(stale, entities=entities)
    return found


# mem0 derives it from ``data`` on insert; embedded Qdrant's ``iter_points`` leaves it out,
# pgvector's keeps it: compared with it, every point of a pgvector target looked changed and
# every re-run (the switch's catch-up too) deleted and copied the whole target again.
DERIVED_KEYS = frozenset({"text_lemmatized"})


def _comparable(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` without the keys mem0 derives on insert. Pure."""
    return {key: value for key, value in payload.items() if key not in DERIVED_KEYS}
