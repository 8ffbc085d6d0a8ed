"""Generate large deployments in bulk, in mem0's on-disk shape, for benchmarks and tests.

mem0's own API adds about 100 memories a second here; these deployments have 20,000 or
100,000 points. The collection is created by ``QdrantClient`` (so meta.json is qdrant-client's
own), its ``storage.sqlite`` is filled with pickled ``PointStruct``s (384-dim vectors, mem0
payloads) and history.db gets mem0ai 2.2.1's schema with one ADD per point and an UPDATE for 10%.
"""

from __future__ import annotations

import base64
import hashlib
import pickle
import random
import sqlite3
import uuid
from datetime import UTC, datetime
from pathlib import Path

DIMS = 384


def create_history_tables(db: sqlite3.Connection) -> None:
    """mem0ai 2.2.1's ``history`` and ``messages`` tables in a new history.db."""
    db.execute(
        "CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, "
        "event TEXT, created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT)"
    )
    db.execute(
        "CREATE TABLE messages (id TEXT PRIMARY KEY, session_scope TEXT, role TEXT, content TEXT, "
        "name TEXT, created_at DATETIME)"
    )


def generate(root: Path, count: int) -> Path:
    """Write a deployment of ``count`` points under ``root``; return its memsync config."""
    from qdrant_client import QdrantClient, models

    qdrant, history = root / "qdrant", root / "history.db"
    client = QdrantClient(path=str(qdrant))
    client.create_collection(
        "mem0", vectors_config=models.VectorParams(size=DIMS, distance=models.Distance.COSINE)
    )
    client.close()
    rng = random.Random(5)
    storage = sqlite3.connect(qdrant / "collection" / "mem0" / "storage.sqlite")
    db = sqlite3.connect(history)
    create_history_tables(db)
    now = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    batch_points, batch_rows = [], []
    for index in range(count):
        memory_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        text = f"user fact number {index}: prefers tea {rng.randrange(10**9)}"
        updated = index % 10 == 0
        final = text + " (updated)" if updated else text
        payload = {
            "user_id": f"user-{index % 50}",
            "role": "user",
            "data": final,
            "hash": hashlib.md5(final.encode()).hexdigest(),
            "created_at": now,
            "updated_at": now,
            "text_lemmatized": final,
            "source": "bench",
        }
        vector = [rng.uniform(-0.1, 0.1) for _ in range(DIMS)]
        point = models.PointStruct(id=memory_id, vector={"": vector}, payload=payload)
        key = base64.b64encode(pickle.dumps(memory_id, protocol=4)).decode()
        batch_points.append((key, pickle.dumps(point)))
        batch_rows.append(
            (str(uuid.uuid4()), memory_id, None, text, "ADD", now, now, 0, None, "user")
        )
        if updated:
            batch_rows.append(
                (str(uuid.uuid4()), memory_id, text, final, "UPDATE", now, now, 0, None, "user")
            )
        if len(batch_points) >= 5000:
            _flush(storage, db, batch_points, batch_rows)
    _flush(storage, db, batch_points, batch_rows)
    storage.close()
    db.close()
    config = root / "memsync.toml"
    config.write_text(
        f'state_dir = "{root / "state"}"\n[mem0]\nhistory_db_path = "{history}"\n'
        f'[mem0.vector_store.config]\npath = "{qdrant}"\nembedding_model_dims = {DIMS}\n'
    )
    return config


def _flush(storage: sqlite3.Connection, db: sqlite3.Connection, points: list, rows: list) -> None:
    with storage:
        storage.executemany("INSERT INTO points VALUES (?, ?)", points)
    with db:
        db.executemany("INSERT INTO history VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    points.clear()
    rows.clear()
