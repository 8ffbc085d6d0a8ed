"""Benchmark ``memsync migrate`` against the target's own bulk load and the bare embedder (issue 26).

Usage: ``python bench/bench_migrate.py [--sizes 10000] [--pairs 3] [--reembed-sizes 10000]
[--before CHECKOUT] [--out bench/out] [--save FILE]``

For each size it writes a source deployment in mem0's on-disk shape (as
``memsync.demo.bulk`` does: a collection created by QdrantClient, ``storage.sqlite`` filled in
bulk with pickled ``PointStruct``s and mem0 payloads, a history.db with mem0ai 2.2.1's schema),
but with real vectors: the offline ``memsync_hash`` embedder's (384 dims) of each memory's text,
so migrate's search sample finds each memory by its own text as in a real deployment. Then,
``--pairs`` times, pairs interleaved, each run in a fresh interpreter (not niced: on a shared
machine a niced run waits behind every other process; peak RSS is the process's own
``VmHWM``; CPU is the process's and its children's, the writer included):

* without re-embedding (vectors copied), into a new embedded Qdrant directory: ``memsync
  migrate --to NEW.toml --json`` (capture, plan, copy, verify, search sample, check) against
  **direct**: the source's rows read (``pickle.loads`` of ``storage.sqlite``), the collection
  made by qdrant-client as mem0 makes it, and every row written as qdrant-client's local mode
  pickles it, in one transaction. Target: migrate's CPU <= 2x direct's (median of the pairs);
* into a new pgvector table (its own PostgreSQL 16 with pgvector 0.6, ``memsync.demo.postgres``):
  migrate against **bulk**: the same rows read, ``COPY FROM`` (psycopg 3) into the table as
  mem0 makes it without its indexes, then mem0's HNSW and GIN indexes built. Target: migrate's
  wall time <= 2x bulk's (PostgreSQL's own CPU is another process);
* with re-embedding (``--reembed-sizes``), to the offline MiniLM (``memsync_minilm``, int8 ONNX)
  against **bare**: ``MiniLMOnnx.embed_texts`` over the same texts in batches of migrate's batch
  size, the model loaded first. Target: migrate's points per second (the whole command) >=
  0.9x bare's, on one pair (it is slow on 2 cores).

``--before CHECKOUT`` also runs migrate from another checkout of memsync (its directory is the
child's working directory) once per size and target: the figures before a change, same run.
Exits 1 when a target is missed, printing each ratio and its target.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import pickle
import random
import resource
import shutil
import sqlite3
import statistics
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
elif kind in ("direct_qdrant", "bulk_pgvector"):
    import pickle, sqlite3
    begun = time.perf_counter()
    source = sqlite3.connect(root + "/qdrant/collection/mem0/storage.sqlite")
    rows = [pickle.loads(blob) for (blob,) in source.execute("SELECT point FROM points")]
    source.close()
    extra = {"read_s": time.perf_counter() - begun}
    if kind == "direct_qdrant":  # the rows qdrant-client's local mode writes, one transaction
        from qdrant_client import QdrantClient, models
        from qdrant_client.local.persistence import CollectionPersistence
        target = QdrantClient(path=arg)
        target.create_collection("mem0", vectors_config=models.VectorParams(
            size=384, distance=models.Distance.COSINE, on_disk=True))
        target.close()
        storage = sqlite3.connect(arg + "/collection/mem0/storage.sqlite")
        with storage:
            storage.executemany("INSERT INTO points VALUES (?, ?)", [
                (CollectionPersistence.encode_key(p.id), sqlite3.Binary(pickle.dumps(
                    models.PointStruct(id=p.id, vector={"": p.vector[""]}, payload=p.payload))))
                for p in rows])
        storage.close()
    else:  # COPY into mem0ai 2.2.1's table, then its indexes
        import psycopg
        with psycopg.connect(arg) as connection:
            connection.execute("CREATE TABLE mem0 (id UUID PRIMARY KEY, vector vector(384), payload JSONB)")
            with connection.cursor() as cursor:
                with cursor.copy("COPY mem0 (id, vector, payload) FROM STDIN") as copy:
                    for p in rows:
                        vector = p.vector[""] if isinstance(p.vector, dict) else p.vector
                        copy.write_row((p.id, "[" + ",".join(map(repr, vector)) + "]",
                                        json.dumps(p.payload)))
            loaded = time.perf_counter()
            connection.execute("CREATE INDEX mem0_hnsw_idx ON mem0 USING hnsw (vector vector_cosine_ops)")
            connection.execute("CREATE INDEX mem0_text_lemmatized_idx ON mem0 "
                               "USING gin(to_tsvector('simple', payload->>'text_lemmatized'))")
            connection.commit()
            extra["index_s"] = time.perf_counter() - loaded
    extra["copied"] = len(rows)
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


def measure(kind: str, root: Path, arg: str, label: str = "", cwd: Path = REPO) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its JSON line, with ``cpu_s``.

    ``cpu_s``: user + system CPU of the process and every child it waited for (the writer in
    the app's interpreter included), from ``RUSAGE_CHILDREN`` around it.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(root), arg, str(BATCH)],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{kind} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    found["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(
        f"  {kind} {label}: {found['wall_s']:.2f} s wall, {found['cpu_s']:.2f} s CPU, "
        f"{found['peak_rss_mb']:.0f} MB (process {time.perf_counter() - started:.1f} s)",
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


def run_size(
    out: Path, size: int, pairs: int, reembed: bool, before: Path | None
) -> dict[str, Any]:
    """Build one source, measure every migration beside its baseline, pairs interleaved."""
    from memsync.demo import postgres

    root = out / f"migrate-{size}"
    shutil.rmtree(root, ignore_errors=True)
    (root / "mem0").mkdir(parents=True)
    started = time.perf_counter()
    generate(root, size)
    print(f"generated {size:,} memories in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    found: dict[str, Any] = {"source_mb": _mb(root / "qdrant"), "size": size}
    server_dir = Path(tempfile.mkdtemp(prefix="memsync-bench-pg-"))  # short: the socket
    base, server = postgres.start(server_dir / "data")
    try:
        checkouts = [("migrate", REPO)] + ([("before", before)] if before else [])
        for pair in range(pairs):
            for name, checkout in checkouts if pair == 0 else checkouts[:1]:
                new = write_config(
                    root, root / "to-qdrant.toml", root / "to-qdrant", None, "memsync_hash"
                )
                _add(
                    found,
                    f"{name}_qdrant",
                    measure("migrate", root, str(new), f"embedded ({name})", checkout),
                )
                _finish(root, root / "to-qdrant")
            _add(
                found,
                "direct_qdrant",
                measure("direct_qdrant", root, str(root / "direct"), "embedded"),
            )
            shutil.rmtree(root / "direct")
            _add(
                found,
                "bulk_pgvector",
                measure(
                    "bulk_pgvector", root, postgres.fresh_database(base, f"bulk{pair}"), "pgvector"
                ),
            )
            for name, checkout in checkouts if pair == 0 else checkouts[:1]:
                url = postgres.fresh_database(base, f"{name}{pair}")
                new = write_config(
                    root, root / "to-pgvector.toml", root / "qdrant", url, "memsync_hash"
                )
                _add(
                    found,
                    f"{name}_pgvector",
                    measure("migrate", root, str(new), f"pgvector ({name})", checkout),
                )
                _finish(root, None)
        if reembed:
            _add(found, "embed_batch", measure("embed_batch", root, "all", f"{size:,} texts"))
            new = write_config(
                root, root / "to-minilm.toml", root / "to-minilm", None, "memsync_minilm"
            )
            for name, checkout in checkouts:
                label = f"re-embedding (MiniLM, {name})"
                _add(found, f"{name}_reembed", measure("migrate", root, str(new), label, checkout))
                _finish(root, root / "to-minilm")
        _verify(found, size)
        return found
    finally:
        postgres.stop(server)
        shutil.rmtree(server_dir, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def _add(found: dict[str, Any], name: str, measured: dict[str, Any]) -> None:
    found.setdefault(name, []).append(measured)


def _finish(root: Path, target: Path | None) -> None:
    """Remove a migration's journal (the next one is another) and its embedded target."""
    (root / "state" / "migrate.json").unlink()
    if target is not None:
        shutil.rmtree(target)


def _mb(directory: Path) -> float:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 1e6


def _verify(found: dict[str, Any], size: int) -> None:
    for name, runs in found.items():
        for run in runs if isinstance(runs, list) else []:
            if "code" in run:
                assert run["code"] == 0 and run["verified"], (name, run)
                assert run["check_errors"] == 0, (name, run)
            if not name.startswith("embed"):
                assert run["copied"] == size, (name, run)


def _median_ratio(found: dict[str, Any], name: str, baseline: str, key: str) -> float:
    """The median over the pairs of ``name[key] / baseline[key]``."""
    pairs = zip(found[name], found[baseline], strict=False)
    return statistics.median(a[key] / b[key] for a, b in pairs)


TARGETS = (  # (what, measured, baseline, key, target, the ratio must be at most the target)
    ("migrate into embedded / direct write (CPU)", "migrate_qdrant", "direct_qdrant", "cpu_s", 2.0),
    ("migrate into pgvector / COPY + indexes after (wall)", "migrate_pgvector", "bulk_pgvector",
     "wall_s", 2.0),
)  # fmt: skip


def report(found: dict[str, Any]) -> list[str]:
    """Print every figure and ratio of one size; the targets it missed."""
    size, missed = found["size"], []
    print(f"\n{size:,} points (source {found['source_mb']:,.0f} MB)")
    for name, runs in found.items():
        if isinstance(runs, list):
            walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
            cpus = ", ".join(f"{r['cpu_s']:.1f}" for r in runs)
            peak = max(r["peak_rss_mb"] for r in runs)
            extra = ""
            for key, what in (("copy_end_s", "copy part"), ("index_s", "indexes")):
                if key in runs[0]:
                    extra = f"; {what} " + ", ".join(f"{r[key]:.1f}" for r in runs) + " s"
            print(f"  {name}: wall {walls} s; CPU {cpus} s; peak {peak:,.0f} MB{extra}")
    for what, name, baseline, key, target in TARGETS:
        if name not in found:  # --pairs 0: re-embedding alone
            continue
        ratio = _median_ratio(found, name, baseline, key)
        met = ratio <= target
        print(f"  {what}: {ratio:.2f}x (target <= {target:g}x) {'met' if met else 'MISSED'}")
        missed += [] if met else [what]
        if f"before_{name[8:]}" in found:
            print(
                f"    before: {found[f'before_{name[8:]}'][0][key] / found[baseline][0][key]:.2f}x"
            )
    if "migrate_reembed" in found:
        bare, migrated = found["embed_batch"][0], found["migrate_reembed"][0]
        ratio = (size / migrated["wall_s"]) / (size / bare["wall_s"])
        met = ratio >= 0.9
        print(
            f"  re-embedding: {size / migrated['wall_s']:.0f} points/s against the embedder's "
            f"batch rate {size / bare['wall_s']:.0f}/s: {ratio:.2f}x (target >= 0.9x) "
            f"{'met' if met else 'MISSED'}"
        )
        missed += [] if met else ["re-embedding"]
        if "before_reembed" in found:
            print(f"    before: {bare['wall_s'] / found['before_reembed'][0]['wall_s']:.2f}x")
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--reembed-sizes", default="10000", help="sizes also re-embedded")
    parser.add_argument("--before", type=Path, help="a checkout of memsync to measure too")
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--save", help="also write every figure to this JSON file")
    args = parser.parse_args()
    os.environ["MEM0_TELEMETRY"] = "False"  # mem0 would open a second embedded Qdrant
    reembed = {int(s) for s in args.reembed_sizes.split(",") if s}
    missed, everything = [], []
    for size in [int(s) for s in args.sizes.split(",")]:
        found = run_size(Path(args.out), size, args.pairs, size in reembed, args.before)
        everything.append(found)
        missed += [f"{size:,}: {what}" for what in report(found)]
    if args.save:
        Path(args.save).write_text(json.dumps(everything, indent=2))
    for what in missed:
        print(f"missed: {what}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
