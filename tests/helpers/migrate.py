"""Build a migration's target config beside a test deployment, and read a target independently."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from memsync.demo import deployment as build

REPOSITORY = Path(__file__).resolve().parents[2]


def target_config(
    source: build.Paths,
    root: Path,
    *,
    embedder: str,
    dims: int,
    pg_url: str | None = None,
    history: Path | None = None,
) -> Path:
    """Write ``root/new.toml``: the source's mem0_dir, state and history.db, a new vector store.

    Embedded Qdrant at ``root/qdrant`` (or pgvector at ``pg_url``, its URL in a secret file).
    """
    root.mkdir(parents=True, exist_ok=True)
    store = build.vector_store_toml(root, root / "qdrant", pg_url, dims)
    text = f"""mem0_dir = "{source.mem0_dir}"
state_dir = "{source.state}"
plugins = ["memsync.demo.providers", "tests.helpers.migrate_plugin"]
app_python = "{sys.executable}"

[mem0]
history_db_path = "{history or source.history_db}"

{store}

[mem0.embedder]
provider = "{embedder}"

[mem0.llm]
provider = "memsync_echo"

[app]
python_path = ["{REPOSITORY}"]  # the tests' plugin (tests.helpers.migrate_plugin), as an app's
"""
    path = root / "new.toml"
    path.write_text(text, encoding="utf-8")
    return path


def qdrant_points(
    path: Path, collection: str = "mem0"
) -> dict[str, tuple[dict[str, Any], list[float]]]:
    """Every point of a free embedded Qdrant directory through qdrant-client: id -> (payload, vector)."""
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(path))
    try:
        return scroll_points(client, collection)
    finally:
        client.close()


def scroll_points(
    client: Any, collection: str = "mem0"
) -> dict[str, tuple[dict[str, Any], list[float]]]:
    """Every point of a collection through a qdrant-client (the app's own): id -> (payload, vector)."""
    found: dict[str, tuple[dict[str, Any], list[float]]] = {}
    offset = None
    while True:
        records, offset = client.scroll(
            collection, limit=256, offset=offset, with_payload=True, with_vectors=True
        )
        for record in records:
            vector = record.vector
            dense = vector.get("") if isinstance(vector, dict) else vector
            found[str(record.id)] = (dict(record.payload or {}), list(dense or []))
        if offset is None:
            return found


def entity_links(memory: Any, entity_ids: list[str]) -> dict[str, list[str]]:
    """``{entity id: linked_memory_ids}`` as mem0's entity store returns them."""
    found = {}
    for entity_id in entity_ids:
        record = memory.entity_store.get(vector_id=entity_id)
        found[entity_id] = list(record.payload["linked_memory_ids"]) if record else []
    return found
