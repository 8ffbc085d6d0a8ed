"""What a migration would do: compare two configs' embedder and vector store. Pure.

``side_of(config)`` reads what matters from a loaded config (no I/O); ``find_refusal`` says why
a target cannot be used (None when it can); ``plan_migrate`` counts the work from the source
capture's counts. Nothing here opens a store or reads the clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsync.config import Config
from memsync.stores.backends import backend_of_kind, vector_store_for

DEFAULT_BATCH_SIZE = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """One deployment's vector store and embedder, as its config names them.

    Attributes:
        kind: the backend (``"embedded-qdrant"`` or ``"pgvector"``).
        where: the store for messages (a directory, or a server and table; no secret).
        location: the embedded store's directory, resolved; None for a server.
        collection: mem0's memory collection (or table).
        embedder: the ``[mem0] embedder`` table as configured (may hold secret references;
            never printed: ``embedder_provider`` is).
        dims: the vector size the config expects (``embedding_model_dims``).
        history: history.db's path.
        source: the config file naming this side (errors about its settings name it).
        unrunnable: why mem0 could not create this store as configured, and what to do
            (``VectorStore.refuse_dims``: pgvector's HNSW index over too many dimensions).
    """

    kind: str
    where: str
    location: str | None
    collection: str
    embedder: dict[str, Any]
    dims: int
    history: str
    source: str = ""
    unrunnable: tuple[str, str] | None = None

    @property
    def embedder_provider(self) -> str:
        """The embedder's provider name (mem0's default: ``"openai"``)."""
        return str(self.embedder.get("provider", "openai"))

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "where", "collection", "embedder", "dims", "history_db"}`` (no secret)."""
        return {
            "kind": self.kind,
            "where": self.where,
            "collection": self.collection,
            "embedder": self.embedder_provider,
            "dims": self.dims,
            "history_db": self.history,
        }


def side_of(config: Config) -> Side:
    """The ``Side`` a loaded config names. Pure (builds the store object, opens nothing)."""
    store = vector_store_for(config)
    location = store.location
    return Side(
        kind=store.kind,
        where=store.where,
        location=str(Path(location).resolve()) if location is not None else None,
        collection=store.collection,
        embedder=dict(config.mem0.get("embedder") or {}),
        dims=config.expected_dims[0][1],
        history=str(Path(config.history_db_path).resolve()),
        source=config.source,
        unrunnable=store.refuse_dims(config.expected_dims[0][1]),
    )


def find_target_refusal(target: Side) -> tuple[str, str] | None:
    """Why no app could run on the target as configured; None when it can. Pure.

    Checked before anything else (the journal, the target's server): the store's own refusal
    (``Side.unrunnable``), e.g. a pgvector table with an HNSW index over vectors of more than
    2,000 dimensions, which mem0 fails to create at every start.
    """
    return target.unrunnable


def re_embeds(source: Side, target: Side) -> bool:
    """Whether the target needs new vectors: its embedder or its vector size differs. Pure."""
    return source.embedder != target.embedder or source.dims != target.dims


def find_refusal(source: Side, target: Side, *, target_exists: bool) -> tuple[str, str] | None:
    """Why the target cannot take this migration and what to do; None when it can. Pure.

    Returns ``(message, hint)``: one line each.

    Refused: nothing differs; the target is the live store (embedded Qdrant: the same
    directory, which the app holds; pgvector: the same server and table); history.db differs
    (ids are kept, so both sides share it); the target already exists (``target_exists``:
    ``VectorStore.holds_data()`` of the target, asked by the caller unless it resumes its own).
    """
    if source.history != target.history:
        return (
            f"the new config's history.db {target.history} is not the current one "
            f"{source.history}: a migration keeps memory ids, so both must name the same file",
            f"set [mem0] history_db_path in the new config to {source.history}",
        )
    same_store = (source.kind == target.kind) and (
        source.location == target.location
        if source.location is not None
        else source.where == target.where
    )
    if same_store:
        if not re_embeds(source, target) and source.collection == target.collection:
            return (
                "the new config names the same embedder and vector store: nothing to migrate",
                "change the new config's embedder or vector store, the point of a migration",
            )
        new = "directory" if target.location is not None else "table"
        return (
            f"the target {target.where} is the live store: migrate into a new {new}",
            f"name a new {new} in the new config's [mem0.vector_store]",
        )
    if target_exists:
        return (
            f"the target {target.where} already exists or holds data: a migration writes "
            "only into a new one",
            "name a new directory or table in the new config (memsync never writes into a "
            "store it did not create)",
        )
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class MigratePlan:
    """The work of one migration.

    Attributes:
        source, target: both sides.
        memories, entities: points to copy from the memory and the entity collections.
        re_embed: whether every vector is computed again (else copied as it is).
        embedder_calls: calls to the target's embedder (one per point when re-embedding).
        batch_size, batches: points per written batch, and how many batches.
        disk_bytes: the target's estimated size in bytes.
    """

    source: Side
    target: Side
    memories: int
    entities: int
    re_embed: bool
    embedder_calls: int
    batch_size: int
    batches: int
    disk_bytes: int

    def to_json(self) -> dict[str, Any]:
        """The plan as the command's ``plan`` JSON object (docs/reference/commands/migrate.md)."""
        return {
            "source": self.source.to_json(),
            "target": self.target.to_json(),
            "memories": self.memories,
            "entities": self.entities,
            "re_embed": self.re_embed,
            "re_embedded_points": self.memories + self.entities if self.re_embed else 0,
            "embedder_calls": self.embedder_calls,
            "batch_size": self.batch_size,
            "batches": self.batches,
            "disk_bytes": self.disk_bytes,
        }


def plan_migrate(
    source: Side,
    target: Side,
    *,
    memories: int,
    entities: int,
    payload_bytes: int,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> MigratePlan:
    """Count the work of copying ``memories`` and ``entities`` points into the target. Pure.

    Args:
        source: the current deployment's side.
        target: the new side (``find_refusal`` found nothing).
        memories: points in the source capture's memory collection.
        entities: points in its entity collection.
        payload_bytes: the JSON size of their payloads together, in bytes.
        batch_size: points per written batch (> 0).
    """
    re_embed = re_embeds(source, target)
    points = memories + entities
    per_dimension = backend_of_kind(target.kind).bytes_per_dimension
    return MigratePlan(
        source=source,
        target=target,
        memories=memories,
        entities=entities,
        re_embed=re_embed,
        embedder_calls=points if re_embed else 0,
        batch_size=batch_size,
        batches=math.ceil(memories / batch_size) + math.ceil(entities / batch_size),
        disk_bytes=points * target.dims * per_dimension + payload_bytes,
    )
