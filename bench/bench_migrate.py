"""Benchmark ``memsync migrate`` against a raw copy of the same rows and a bare batch embedding.

Usage: ``python bench/bench_migrate.py [--sizes 20000,100000] [--reembed-sizes 20000]
[--out bench/out] [--save FILE]``

For each size it writes a source deployment in mem0's on-disk shape (as
``memsync.demo.bulk`` does: a collection created by QdrantClient, ``storage.sqlite`` filled in
bulk with pickled ``PointStruct``s and mem0 payloads, a history.db with mem0ai 2.2.1's schema),
but with real vectors: the offline ``memsync_hash`` embedder's (384 dims) of each memory's text,
so migrate's search sample finds each memory by its own text as in a real deployment. Then,
each in a fresh interpreter (``nice -n 10``; peak RSS is the process's own ``VmHWM``):

* without re-embedding (vectors copied), to a new embedded Qdrant directory and to a new
  pgvector table (its own PostgreSQL 16 with pgvector 0.6, ``memsync.demo.postgres``):
  ``memsync migrate --to NEW.toml --json`` (capture, plan, copy, verify, search sample, check),
  against **raw**: every point read from the source with qdrant-client (``scroll`` with
  vectors) and written into a bare target with the library calls mem0's own ``insert`` makes
  (qdrant-client ``upsert`` of ``PointStruct``s / psycopg ``executemany`` of the same INSERT,
  into a collection or table made as mem0 makes it), in batches of migrate's default size,
  no memsync: the floor;
* with re-embedding (``--reembed-sizes``, 20,000 by default: it is slow on 2 cores): migrate to
  the offline MiniLM (``memsync_minilm``, int8 ONNX) against **bare**: ``MiniLMOnnx.embed_texts``
  over the same texts in batches of migrate's batch size, and **one per call**:
  ``embed_texts([text])`` for the first ``SINGLE`` texts (what migrate's per-point
  ``embed(text, "add")`` costs without memsync around it).

Prints tables of wall time (s), points per second, peak RSS (MB) and ratios of the same run.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import pickle
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

DIMS = 384
BATCH = 64  # memsync.migrate.plan.DEFAULT_BATCH_SIZE
SINGLE = 2000  # texts embedded one per call for the per-call baseline
HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CHILD = r"""
import json, sys, time
kind, root, arg = sys.argv[1], sys.argv[2], sys.argv[3]
BATCH = int(sys.argv[4])
start = time.perf_counter()
extra = {}
reading = [0.0]  # seconds spent opening the source and scrolling it (raw)
def source_points():
    begun = time.perf_counter()
    from qdrant_client import QdrantClient
    client = QdrantClient(path=root + "/qdrant")
    offset = None
    while True:
        points, offset = client.scroll("mem0", limit=BATCH, offset=offset, with_vectors=True)
        reading[0] += time.perf_counter() - begun
        yield points
        begun = time.perf_counter()
        if offset is None:
            break
    client.close()
def texts():
    import pickle, sqlite3
    con = sqlite3.connect(root + "/qdrant/collection/mem0/storage.sqlite")
    return [pickle.loads(blob).payload["data"] for (blob,) in con.execute("SELECT point FROM points")]
if kind == "migrate":
    import contextlib, io
    from datetime import datetime, timezone
    from memsync.cli import main
    buffer, logs = io.StringIO(), io.StringIO()
    begun = datetime.now(timezone.utc)
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(logs):
        code = main(["migrate", "--to", arg, "--json", "--config", root + "/memsync.toml",
                     "--log-level", "info", "--log-format", "json"])
    done = json.loads(buffer.getvalue())
    copied_at = next(json.loads(line)["timestamp"] for line in logs.getvalue().splitlines()
                     if '"migrate_copied"' in line)
    extra = {"code": code, "copied": done["copied"], "re_embedded": done["re_embedded"],
             "verified": done["verified"], "check_errors": done["check_after"]["errors"],
             "differences": done["differences"][:5],
             "copy_end_s": (datetime.fromisoformat(copied_at.replace("Z", "+00:00"))
                            - begun).total_seconds()}
elif kind == "raw_qdrant":
    from qdrant_client import QdrantClient, models
    target = QdrantClient(path=arg)
    target.create_collection("mem0", vectors_config=models.VectorParams(
        size=384, distance=models.Distance.COSINE, on_disk=True),
        sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)})
    n = 0
    for points in source_points():
        target.upsert("mem0", points=[models.PointStruct(
            id=p.id, vector={"": p.vector}, payload=p.payload) for p in points])
        n += len(points)
    target.close()
    extra = {"copied": n, "read_s": reading[0]}
elif kind == "raw_pgvector":
    import psycopg
    from psycopg.types.json import Jsonb
    n = 0
    with psycopg.connect(arg) as connection:
        connection.execute("CREATE TABLE mem0 (id UUID PRIMARY KEY, vector vector(384), payload JSONB)")
        connection.execute("CREATE INDEX mem0_hnsw_idx ON mem0 USING hnsw (vector vector_cosine_ops)")
        connection.execute("CREATE INDEX mem0_text_lemmatized_idx ON mem0 "
                           "USING gin(to_tsvector('simple', payload->>'text_lemmatized'))")
        connection.commit()
        for points in source_points():
            with connection.cursor() as cursor:  # mem0ai 2.2.1 PGVector.insert's statement
                cursor.executemany("INSERT INTO mem0 (id, vector, payload) VALUES (%s, %s, %s)",
                                   [(p.id, p.vector, json.dumps(p.payload)) for p in points])
            connection.commit()
            n += len(points)
    extra = {"copied": n, "read_s": reading[0]}
elif kind in ("embed_batch", "embed_single"):
    from memsync.demo.providers import MiniLMOnnx
    every = texts()
    if kind == "embed_single":
        every = every[: int(arg)]
    MiniLMOnnx.embed_texts(["warm up"])
    start = time.perf_counter()  # the model loaded: the embedding alone
    size = BATCH if kind == "embed_batch" else 1
    for i in range(0, len(every), size):
        MiniLMOnnx.embed_texts(every[i : i + size])
    extra = {"copied": len(every)}
wall = time.perf_counter() - start
own = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps({"wall_s": wall, "peak_rss_mb": own, **extra}))
"""


def measure(kind: str, root: Path, arg: str, label: str = "") -> dict[str, Any]:
    """Run one measurement in a fresh interpreter (nice 10); return its JSON line."""
    started = time.perf_counter()
    result = subprocess.run(
        ["nice", "-n", "10", sys.executable, "-c", CHILD, kind, str(root), arg, str(BATCH)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if result.returncode != 0:
        raise SystemExit(f"{kind} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    print(
        f"  {kind} {label}: {found['wall_s']:.2f} s, {found['peak_rss_mb']:.0f} MB "
        f"(process {time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
    return found


def generate(root: Path, count: int) -> None:
    """Write a source deployment of ``count`` memories with memsync_hash vectors, and its config."""
    from qdrant_client import QdrantClient, models

    from memsync.demo.bulk import create_history_tables
    from memsync.demo.providers import HashEmbedding

    qdrant = root / "qdrant"
    client = QdrantClient(path=str(qdrant))
    client.create_collection(
        "mem0", vectors_config=models.VectorParams(size=DIMS, distance=models.Distance.COSINE)
    )
    client.close()
    embedder, rng = HashEmbedding(), random.Random(5)
    storage = sqlite3.connect(qdrant / "collection" / "mem0" / "storage.sqlite")
    db = sqlite3.connect(root / "mem0" / "history.db")
    create_history_tables(db)
    now = "2026-01-01T00:00:00+00:00"
    points, rows = [], []
    for index in range(count):
        memory_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        text = f"user fact number {index}: prefers tea {rng.randrange(10**9)}"
        payload = {
            "user_id": f"user-{index % 50}", "role": "user", "data": text,
            "hash": hashlib.md5(text.encode()).hexdigest(), "created_at": now,
            "updated_at": now, "text_lemmatized": text, "source": "bench",
        }  # fmt: skip
        vector = embedder.embed(text, "add")
        point = models.PointStruct(id=memory_id, vector={"": vector}, payload=payload)
        key = base64.b64encode(pickle.dumps(memory_id, protocol=4)).decode()
        points.append((key, pickle.dumps(point)))
        rows.append((str(uuid.uuid4()), memory_id, None, text, "ADD", now, now, 0, None, "user"))
        if len(points) >= 5000 or index == count - 1:
            with storage:
                storage.executemany("INSERT INTO points VALUES (?, ?)", points)
            with db:
                db.executemany("INSERT INTO history VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
            points, rows = [], []
    storage.close()
    db.close()
    write_config(root, root / "memsync.toml", root / "qdrant", None, "memsync_hash")


def write_config(root: Path, path: Path, qdrant: Path, pg_url: str | None, embedder: str) -> Path:
    """A memsync config of the source's history.db and state, with this store and embedder."""
    from memsync.demo.deployment import vector_store_toml

    store = vector_store_toml(path.with_suffix(""), qdrant, pg_url, DIMS)  # pg-url beside it
    path.write_text(
        f'mem0_dir = "{root / "mem0"}"\nstate_dir = "{root / "state"}"\n'
        f'plugins = ["memsync.demo.providers"]\n\n[mem0]\n'
        f'history_db_path = "{root / "mem0" / "history.db"}"\n\n{store}\n\n'
        f'[mem0.embedder]\nprovider = "{embedder}"\n\n[mem0.llm]\nprovider = "memsync_echo"\n'
        f'\n[app]\npython = "{sys.executable}"\n',  # the writes run in an app's interpreter
        encoding="utf-8",
    )
    return path


def run_size(out: Path, size: int, reembed: bool) -> dict[str, Any]:
    """Build one source, measure every migration and its baseline, clean up; the figures."""
    root = out / f"migrate-{size}"
    shutil.rmtree(root, ignore_errors=True)
    (root / "mem0").mkdir(parents=True)
    started = time.perf_counter()
    generate(root, size)
    print(f"generated {size:,} memories in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    results: dict[str, Any] = {"source_mb": _mb(root / "qdrant")}
    try:
        results["raw_qdrant"] = measure("raw_qdrant", root, str(root / "raw-qdrant"), "embedded")
        shutil.rmtree(root / "raw-qdrant")
        new = write_config(root, root / "to-qdrant.toml", root / "to-qdrant", None, "memsync_hash")
        results["migrate_qdrant"] = measure("migrate", root, str(new), "embedded")
        _finish(root, root / "to-qdrant")
        results.update(_pgvector(root))
        if reembed:
            results.update(_reembed(root, size))
        _verify(results, size)
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _pgvector(root: Path) -> dict[str, Any]:
    """raw and migrate into new tables of a PostgreSQL started for them (removed after)."""
    from memsync.demo import postgres

    server_dir = Path(tempfile.mkdtemp(prefix="memsync-bench-pg-"))  # short: the socket
    base, server = postgres.start(server_dir / "data")
    try:
        raw = measure("raw_pgvector", root, postgres.fresh_database(base, "raw"), "pgvector")
        url = postgres.fresh_database(base, "migrated")
        new = write_config(root, root / "to-pgvector.toml", root / "qdrant", url, "memsync_hash")
        migrated = measure("migrate", root, str(new), "pgvector")
        _finish(root, None)
        return {"raw_pgvector": raw, "migrate_pgvector": migrated}
    finally:
        postgres.stop(server)
        shutil.rmtree(server_dir, ignore_errors=True)


def _reembed(root: Path, size: int) -> dict[str, Any]:
    """Bare MiniLM batched and one per call, then migrate re-embedding with it."""
    found = {
        "embed_batch": measure("embed_batch", root, "all", f"{size:,} texts"),
        "embed_single": measure("embed_single", root, str(min(SINGLE, size)), "one per call"),
    }
    new = write_config(root, root / "to-minilm.toml", root / "to-minilm", None, "memsync_minilm")
    found["migrate_reembed"] = measure("migrate", root, str(new), "re-embedding (MiniLM)")
    _finish(root, root / "to-minilm")
    return found


def _finish(root: Path, target: Path | None) -> None:
    """Remove a migration's journal (the next one is another) and its embedded target."""
    (root / "state" / "migrate.json").unlink()
    if target is not None:
        shutil.rmtree(target)


def _mb(directory: Path) -> float:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 1e6


def _verify(results: dict[str, Any], size: int) -> None:
    for name, found in results.items():
        if name.startswith("migrate"):
            assert found["code"] == 0 and found["verified"], (name, found)
            assert found["check_errors"] == 0, (name, found)
        if isinstance(found, dict) and not name.startswith("embed"):
            assert found["copied"] == size, (name, found)


def _rate(found: dict[str, Any]) -> float:
    return float(found["copied"]) / found["wall_s"]


def table(rows: list[tuple[int, dict[str, Any]]]) -> None:
    """Print the figures and the ratios (the breakdowns when the run measured them)."""
    print(
        "| points | source MB | target | migrate s | copy part s | migrate points/s | raw s "
        "| raw read s | raw points/s | migrate / raw | copy part / raw write "
        "| migrate peak MB | raw peak MB |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for size, r in rows:
        for target in ("qdrant", "pgvector"):
            m, raw = r[f"migrate_{target}"], r[f"raw_{target}"]
            copy, read = m.get("copy_end_s"), raw.get("read_s")
            write = None if read is None else raw["wall_s"] - read
            print(
                f"| {size:,} | {r['source_mb']:,.0f} | {'embedded' if target == 'qdrant' else target} "
                f"| {m['wall_s']:.1f} | {_num(copy)} | {_rate(m):,.0f} | {raw['wall_s']:.1f} "
                f"| {_num(read)} | {_rate(raw):,.0f} | {m['wall_s'] / raw['wall_s']:.2f} "
                f"| {_num(copy / write if copy and write else None, 2)} "
                f"| {m['peak_rss_mb']:,.0f} | {raw['peak_rss_mb']:,.0f} |"
            )
    rows = [(size, r) for size, r in rows if "migrate_reembed" in r]
    if not rows:
        return
    print(
        "\n| points | migrate s | copy part s | migrate points/s | bare batched s | bare points/s "
        "| migrate / bare | one per call points/s | batched / one per call | migrate peak MB |"
        "\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for size, r in rows:
        m, bare, single = r["migrate_reembed"], r["embed_batch"], r["embed_single"]
        print(
            f"| {size:,} | {m['wall_s']:.1f} | {_num(m.get('copy_end_s'))} | {_rate(m):,.0f} "
            f"| {bare['wall_s']:.1f} | {_rate(bare):,.0f} | {m['wall_s'] / bare['wall_s']:.2f} "
            f"| {_rate(single):,.0f} | {_rate(bare) / _rate(single):.2f} "
            f"| {m['peak_rss_mb']:,.0f} |"
        )


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument(
        "--reembed-sizes", default="20000", help="sizes also migrated with re-embedding"
    )
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--save", help="also write every figure to this JSON file")
    args = parser.parse_args()
    os.environ["MEM0_TELEMETRY"] = "False"  # mem0 would open a second embedded Qdrant
    reembed = {int(s) for s in args.reembed_sizes.split(",") if s}
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        rows.append((size, run_size(Path(args.out), size, size in reembed)))
        table(rows)
    if args.save:
        Path(args.save).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
