"""Point ids as the vector store's client identifies them: one spelling per id. Pure.

mem0 writes a memory's id as a UUID string; history.db and every backend's reader compare ids
in this one spelling.
"""

from __future__ import annotations

import re
import uuid

# The spellings of a UUID qdrant-client 1.20.0 accepts as a point id (local/utils.py).
_UUID_HYPHENATED = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_UUID_SPELLING = re.compile(
    rf"(?:[0-9a-fA-F]{{32}}|{_UUID_HYPHENATED}|\{{{_UUID_HYPHENATED}\}}|urn:uuid:{_UUID_HYPHENATED})"
)
# A UUID already in its canonical spelling (lower case, hyphenated): its own normalised id.
_UUID_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalize_point_id(point_id: str | int) -> str:
    """The point id as qdrant-client 1.20.0 identifies it, as a string. Pure.

    A UUID in any spelling qdrant-client accepts becomes its canonical spelling (lower case,
    hyphenated); any other string is kept as is; an integer id becomes its decimal string.
    Mirrors ``qdrant_client/local/utils.py: normalize_point_id`` (qdrant-client 1.20.0).
    """
    if isinstance(point_id, int):
        return str(point_id)
    if _UUID_CANONICAL.fullmatch(point_id) is not None:  # mem0's own ids: no UUID to build
        return point_id
    if _UUID_SPELLING.fullmatch(point_id) is None:
        return point_id
    return str(uuid.UUID(point_id))
