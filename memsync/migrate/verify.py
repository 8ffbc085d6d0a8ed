"""Verify a migration's target against the source capture it was copied from.

``compare`` is pure: same memory ids, payloads equal (every key), every target vector of the
target's dimension, vectors equal when they were copied rather than re-embedded, entity links
equal. ``search_sample`` asks the target's mem0 for a sample of memories by their own text
(each should be its own top hit). Each difference is one ``Difference`` naming the point.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memsync.model import EntityLink
from memsync.stores.mem0 import AppWriter
from memsync.stores.vector_store import StoredPoint

SAMPLE_SIZE = 20
SCOPE_KEYS = ("user_id", "agent_id", "run_id")


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the target differs: ``what`` (a stable word) for ``point_id``, and detail."""

    point_id: str
    what: str  # missing | extra | payload | dimension | vector | entity | search
    detail: str

    def to_json(self) -> dict[str, str]:
        """``{"point_id", "what", "detail"}``."""
        return {"point_id": self.point_id, "what": self.what, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Summary:
    """A point as verification needs it: payload, vector size, float32 digest of the vector."""

    payload: dict[str, Any]
    size: int | None
    digest: bytes | None


def summarize(stored: StoredPoint) -> Summary:
    """Keep the payload, the vector's size and a digest of its float32 values. Pure.

    float32: pgvector keeps 4-byte floats, embedded Qdrant the floats as given; a vector
    copied between them is equal at float32 precision.
    """
    vector = stored.vector
    if vector is None:
        return Summary(stored.payload, None, None)
    return Summary(stored.payload, len(vector), _digest(vector))


def _digest(vector: Sequence[float]) -> bytes:
    """A 16-byte digest of ``vector``'s float32 values. Pure."""
    packed = struct.pack(f"<{len(vector)}f", *vector)
    return hashlib.blake2b(packed, digest_size=16).digest()


def compare(
    source: Mapping[str, Summary],
    target: Mapping[str, Summary],
    dims: int,
    *,
    vectors_copied: bool,
) -> list[Difference]:
    """The differences between one collection's source and target points, sorted by id. Pure."""
    found = [Difference(i, "missing", "not in the target") for i in source if i not in target]
    found += [Difference(i, "extra", "in the target only") for i in target if i not in source]
    for point_id in sorted(set(source) & set(target)):
        before, after = source[point_id], target[point_id]
        if before.payload != after.payload:
            keys = sorted(
                k
                for k in set(before.payload) | set(after.payload)
                if before.payload.get(k) != after.payload.get(k)
            )
            found.append(Difference(point_id, "payload", f"keys differ: {', '.join(keys)}"))
        if after.size != dims:
            found.append(Difference(point_id, "dimension", f"{after.size} dimensions, not {dims}"))
        elif vectors_copied and before.digest != after.digest:
            found.append(Difference(point_id, "vector", "differs from the source's"))
    return sorted(found, key=lambda d: (d.point_id, d.what))


def compare_entities(
    source: Sequence[EntityLink], target: Sequence[EntityLink]
) -> list[Difference]:
    """Entities whose links differ (or that one side lacks), sorted by entity id. Pure."""
    before = {e.entity_id: e.linked_memory_ids for e in source}
    after = {e.entity_id: e.linked_memory_ids for e in target}
    return [
        Difference(
            entity_id, "entity", f"links {before.get(entity_id)} became {after.get(entity_id)}"
        )
        for entity_id in sorted(set(before) | set(after))
        if before.get(entity_id) != after.get(entity_id)
    ]


def pick_sample(
    points: Mapping[str, Summary], exclude: Iterable[str], size: int = SAMPLE_SIZE
) -> list[str]:
    """Up to ``size`` memory ids with a text and a scope, spread over the sorted ids. Pure."""
    excluded = set(exclude)
    eligible = [
        point_id
        for point_id, summary in sorted(points.items())
        if point_id not in excluded
        and isinstance(summary.payload.get("data"), str)
        and summary.payload.get("data")
        and any(summary.payload.get(key) for key in SCOPE_KEYS)
    ]
    if len(eligible) <= size:
        return eligible
    return [eligible[index * len(eligible) // size] for index in range(size)]


def search_sample(
    writer: AppWriter, points: Mapping[str, Summary], sample: Sequence[str]
) -> tuple[list[Difference], list[str]]:
    """Search the target for each sampled memory's own text within its scope.

    A memory passes when the top hit is itself, or a memory with the same text (mem0 never
    de-duplicates exact copies). A miss whose stored vector is exactly its text's embedding
    (equal at float32) is the target's approximate index missing it, not the migration: the
    point is where its text leads, and nothing can be nearer; pgvector's HNSW index
    (``ef_search`` 40 by default, pgvector 0.6) misses some at 100,000 points, as the app's own
    searches will. Those are returned apart. Reads only (one or two embeddings per memory).

    Returns:
        ``(differences, index_misses)``: the ``search`` differences, and the ids the index
        missed although their vectors are exact.
    """
    found: list[Difference] = []
    index_misses: list[str] = []
    for memory_id in sample:
        payload = points[memory_id].payload
        text = str(payload["data"])
        filters = {key: payload[key] for key in SCOPE_KEYS if payload.get(key)}
        hit = writer.top_hit(text, filters)
        if hit is not None and (hit[0] == memory_id or hit[1] == text):
            continue
        if _digest(writer.embed(text)) == points[memory_id].digest:
            index_misses.append(memory_id)
        elif hit is None:
            found.append(Difference(memory_id, "search", "its own text finds nothing"))
        else:
            found.append(Difference(memory_id, "search", f"its own text finds {hit[0]} first"))
    return found, index_misses
