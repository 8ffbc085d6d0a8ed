"""Large deployments for the app benchmarks (``bench_app.py``), shared by its app and commands.

A *template* per size is generated once with ``memsync.demo.bulk.generate`` (the generator of
``bench_check.py``: mem0's on-disk shape, 384-dim vectors, one ADD per point, an UPDATE for 10 %),
then ``expired`` of its points get ``expiration_date = 2025-01-01`` so ``memsync prune`` has
work. Every scenario runs on a fresh copy of the template (``fresh_copy``): the app adds
memories and prune deletes some, so no two scenarios share files.

Layout of a copy (``root``): ``qdrant/`` (embedded Qdrant), ``history.db``, ``mem0/`` (MEM0_DIR),
``state/``, ``snapshots/``, ``memsync.toml``, ``records/`` (what the app writes at exit).
"""

from __future__ import annotations

import json
import pickle
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

DIMS = 384  # memsync.demo.bulk's vectors; the hash embedder emits as many
EXPIRED_ON = "2025-01-01"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def storage_path(root: Path) -> Path:
    """The collection's ``storage.sqlite`` of a deployment at ``root``."""
    return root / "qdrant" / "collection" / "mem0" / "storage.sqlite"


def template(out: Path, size: int, expired: int) -> Path:
    """The template deployment of ``size`` points under ``out`` (generated when missing)."""
    root = out / f"app-template-{size}-{expired}"
    done = root / ".complete"
    if done.exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    from memsync.demo.bulk import generate

    started = time.perf_counter()
    root.mkdir(parents=True)
    generate(root, size)
    (root / "expired.json").write_text(json.dumps(mark_expired(root, expired)))
    done.write_text("ok\n")
    print(f"generated {size:,} points in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return root


def mark_expired(root: Path, count: int) -> list[str]:
    """Give ``count`` points, spread over the collection, an expiration date in the past."""
    connection = sqlite3.connect(storage_path(root))
    total = connection.execute("SELECT count(*) FROM points").fetchone()[0]
    step = max(1, total // max(count, 1))
    rows = connection.execute(
        "SELECT rowid, point FROM points WHERE rowid % ? = 0 LIMIT ?", (step, count)
    ).fetchall()
    ids = []
    with connection:
        for rowid, blob in rows:
            point = pickle.loads(blob)
            point.payload["expiration_date"] = EXPIRED_ON
            ids.append(str(point.id))
            connection.execute(
                "UPDATE points SET point = ? WHERE rowid = ?", (pickle.dumps(point), rowid)
            )
    connection.close()
    assert len(ids) == count, (len(ids), count)
    return ids


def fresh_copy(source: Path, root: Path) -> Path:
    """Copy the template ``source`` to ``root`` (replacing it); return ``root``."""
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(source, root)
    for name in ("mem0", "records", "state"):
        (root / name).mkdir(exist_ok=True)
    return root


def mem0_config(root: Path) -> dict[str, Any]:
    """The dict the benchmark app passes to ``mem0.Memory.from_config`` (hash embedder)."""
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "mem0",
                "path": str((root / "qdrant").resolve()),
                "embedding_model_dims": DIMS,
                "on_disk": True,
            },
        },
        "embedder": {"provider": "memsync_hash"},
        "llm": {"provider": "memsync_echo"},
        "history_db_path": str((root / "history.db").resolve()),
    }


def write_config(root: Path, app: str = "") -> Path:
    """Write ``root/memsync.toml`` for the copy at ``root`` (``app``: an ``[app]`` section)."""
    root = root.resolve()
    text = f"""mem0_dir = "{root / "mem0"}"
state_dir = "{root / "state"}"
plugins = ["memsync.demo.providers"]

[mem0]
history_db_path = "{root / "history.db"}"

[mem0.vector_store]
provider = "qdrant"

[mem0.vector_store.config]
collection_name = "mem0"
path = "{root / "qdrant"}"
embedding_model_dims = {DIMS}
on_disk = true

[mem0.embedder]
provider = "memsync_hash"

[mem0.llm]
provider = "memsync_echo"

[snapshot]
directory = "{root / "snapshots"}"
keep_last = 3
{app}"""
    path = root / "memsync.toml"
    path.write_text(text, encoding="utf-8")
    return path


def journal_modes(root: Path) -> dict[str, str]:
    """The journal mode of history.db and storage.sqlite (reads only)."""
    modes = {}
    for name, path in (("history.db", root / "history.db"), ("storage.sqlite", storage_path(root))):
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        modes[name] = connection.execute("PRAGMA journal_mode").fetchone()[0]
        connection.close()
    return modes
