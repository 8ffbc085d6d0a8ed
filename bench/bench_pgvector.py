"""Benchmark memsync on Postgres with pgvector against pg_dump, pg_restore, a raw read and mem0.

Usage: ``python bench/bench_pgvector.py [--sizes 100000,1000000] [--hnsw-max 100000]
[--out bench/out]``

For each size it starts its own PostgreSQL 16 with pgvector 0.6 (the ``pgserver`` wheel, as the
tests do; ``memsync.demo.postgres``) and builds a deployment laid out as mem0ai 2.2.1's pgvector
provider lays it out: table ``mem0`` (``id uuid primary key, vector vector(384), payload
jsonb``), loaded with ``COPY FROM STDIN`` of a generated CSV (mem0 payloads: data, hash,
user_id, role, created_at, updated_at, text_lemmatized), then mem0's indexes (``mem0_hnsw_idx``
USING hnsw (vector vector_cosine_ops) up to ``--hnsw-max`` rows, and the GIN index on
``payload->>'text_lemmatized'``); a history.db with mem0's schema (one ADD per row, an UPDATE for
10 %); a memsync config (``memsync.demo.deployment.write_memsync_config``). Vectors are drawn
from a pool of 4,096 random 384-dim vectors (generating 384 floats per row in Python would
dominate the run); every row's text is as long as a real one's and pg_dump's compression window
(32 KiB) is far smaller than the pool.

Then, each in a fresh interpreter (peak RSS is the child's own, or its children's for the
PostgreSQL client binaries; the server's backend processes are not counted in any column):

* ``check``: ``memsync check --json`` (export in one transaction, decode, judge);
* ``raw``: ``COPY mem0 TO STDOUT (FORMAT csv)`` through psycopg into nothing, and every row of
  ``SELECT * FROM history`` (the data check reads, read and dropped);
* ``mem0``: mem0's own ``PGVector.list(top_k=N)`` (its route to every memory; no vectors);
* ``snapshot``: ``memsync snapshot create --json``; ``pg_dump``: ``pg_dump -t mem0 -Fc``;
* ``pg_restore``: ``pg_restore`` of that dump into a fresh database (data and indexes);
  ``restore``: ``memsync restore`` when the branch has it for pgvector, else not measured.

Prints a table of wall time (s), peak RSS (MB) and ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DIMS = 384
POOL = 4096
HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CHILD = r"""
import json, resource, subprocess, sys, time
kind, root, url = sys.argv[1], sys.argv[2], sys.argv[3]
start = time.perf_counter()
extra = {}
if kind in ("check", "snapshot", "restore"):
    from memsync.cli import main
    import io, contextlib
    buffer = io.StringIO()
    argv = {
        "check": ["check", "--json"],
        "snapshot": ["snapshot", "create", "--json"],
        "restore": ["restore", *sys.argv[4:], "--force", "--json"],
    }[kind]
    with contextlib.redirect_stdout(buffer):
        code = main([*argv, "--config", root + "/memsync.toml"])
    extra = {"code": code, "output": buffer.getvalue()[-4000:]}
elif kind == "raw":
    import sqlite3, psycopg
    n = 0
    with psycopg.connect(url) as connection, connection.cursor() as cursor:
        with cursor.copy("COPY mem0 TO STDOUT (FORMAT csv)") as copy:
            for block in copy:
                n += len(block)
        rows = cursor.rowcount
    h = sqlite3.connect(root + "/mem0/history.db")
    history = sum(1 for _ in h.execute("SELECT * FROM history"))
    extra = {"points": rows, "bytes": n, "history_rows": history}
elif kind == "mem0":
    from mem0.vector_stores.pgvector import PGVector
    hnsw = sys.argv[4] == "hnsw"
    store = PGVector(dbname=None, collection_name="mem0", embedding_model_dims=384, user=None,
                     password=None, host=None, port=None, diskann=False, hnsw=hnsw,
                     connection_string=url)
    found = store.list(top_k=10**9)[0]
    extra = {"points": len(found)}
elif kind in ("pg_dump", "pg_restore"):
    command = json.loads(sys.argv[4])
    subprocess.run(command, check=True)
wall = time.perf_counter() - start
# VmHWM: this process's own peak (ru_maxrss would carry the parent's over fork and exec)
own = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
peak = children if kind in ("pg_dump", "pg_restore") else own
print(json.dumps({"wall_s": wall, "peak_rss_mb": peak, **extra}))
"""


def measure(kind: str, root: Path, url: str, *args: str) -> dict:
    """Run one measurement in a fresh interpreter (nice 10); return its JSON line."""
    started = time.perf_counter()
    result = subprocess.run(
        ["nice", "-n", "10", sys.executable, "-c", CHILD, kind, str(root), url, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if result.returncode != 0:
        raise SystemExit(f"{kind} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    found = json.loads(result.stdout.strip().splitlines()[-1])
    print(
        f"  {kind}: {found['wall_s']:.2f} s, {found['peak_rss_mb']:.0f} MB "
        f"(process {time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
    return found


def pool(rng: random.Random) -> list[str]:
    """POOL random vectors in pgvector's text form ``[x,...]`` (float4 precision, as it prints)."""
    return [
        "[" + ",".join(f"{rng.uniform(-0.1, 0.1):.9g}" for _ in range(DIMS)) + "]"
        for _ in range(POOL)
    ]


def generate(root: Path, url: str, size: int, hnsw: bool) -> dict[str, float]:
    """Load ``size`` rows into table mem0 and write history.db; seconds per step."""
    import psycopg

    db = _history_db(root / "mem0" / "history.db")
    steps: dict[str, float] = {}
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE mem0 (id UUID PRIMARY KEY, vector vector(384), payload JSONB)"
        )
        with (
            connection.cursor() as cursor,
            cursor.copy("COPY mem0 (id, vector, payload) FROM STDIN (FORMAT csv)") as copy,
        ):
            buffer = _Buffer()
            writer = csv.writer(buffer)
            events: list[tuple] = []
            for row, history in _memories(size):
                writer.writerow(row)
                events += history
                if len(events) >= 20_000:
                    copy.write(buffer.take())
                    _insert_history(db, events)
            copy.write(buffer.take())
            _insert_history(db, events)
        steps["load_s"] = time.perf_counter() - started
        steps.update(_indexes(connection, hnsw))
    db.close()
    return steps


def _history_db(history: Path) -> sqlite3.Connection:
    """A new history.db with mem0ai 2.2.1's tables."""
    history.parent.mkdir(parents=True, exist_ok=True)
    history.unlink(missing_ok=True)
    db = sqlite3.connect(history)
    from memsync.demo.bulk import create_history_tables

    create_history_tables(db)
    return db


def _insert_history(db: sqlite3.Connection, events: list[tuple]) -> None:
    """Write ``events`` in one transaction and empty the list."""
    with db:
        db.executemany("INSERT INTO history VALUES (?,?,?,?,?,?,?,?,?,?)", events)
    events.clear()


def _memories(size: int) -> Iterator[tuple[tuple[str, str, str], list[tuple]]]:
    """Each memory's table row (id, vector text, payload JSON) and its history events."""
    rng = random.Random(13)
    vectors = pool(rng)
    now = "2026-01-01T00:00:00+00:00"
    for index in range(size):
        memory_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        text = f"user fact number {index}: prefers tea {rng.randrange(10**9)}"
        final = text + " (updated)" if index % 10 == 0 else text
        payload = {
            "user_id": f"user-{index % 50}",
            "role": "user",
            "data": final,
            "hash": hashlib.md5(final.encode()).hexdigest(),
            "created_at": now,
            "updated_at": now,
            "text_lemmatized": final,
        }
        events = [(str(uuid.uuid4()), memory_id, None, text, "ADD", now, now, 0, None, "user")]
        if final != text:
            events.append(
                (str(uuid.uuid4()), memory_id, text, final, "UPDATE", now, now, 0, None, "user")
            )
        yield (memory_id, vectors[index % POOL], json.dumps(payload)), events


def _indexes(connection: Any, hnsw: bool) -> dict[str, float]:
    """mem0's indexes (HNSW only when ``hnsw``), then VACUUM ANALYZE; seconds and table MB."""
    steps: dict[str, float] = {}
    connection.execute("SET maintenance_work_mem = '1GB'")
    if hnsw:
        started = time.perf_counter()
        connection.execute(
            "CREATE INDEX IF NOT EXISTS mem0_hnsw_idx ON mem0 USING hnsw (vector vector_cosine_ops)"
        )
        steps["hnsw_s"] = time.perf_counter() - started
    started = time.perf_counter()
    connection.execute(
        "CREATE INDEX IF NOT EXISTS mem0_text_lemmatized_idx ON mem0 "
        "USING gin(to_tsvector('simple', payload->>'text_lemmatized'))"
    )
    steps["gin_s"] = time.perf_counter() - started
    connection.execute("VACUUM ANALYZE mem0")
    steps["table_mb"] = connection.execute(
        "SELECT pg_total_relation_size('mem0')::float8 / 1e6"
    ).fetchone()[0]
    return steps


class _Buffer:
    """A write-only text sink for csv.writer whose contents are taken as bytes."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def take(self) -> bytes:
        data = "".join(self.parts).encode()
        self.parts.clear()
        return data


def run_size(out: Path, size: int, hnsw_max: int, check_only: bool = False) -> dict:
    """Build one deployment on its own server, measure everything, clean up; the figures."""
    import pgserver

    from memsync.demo import postgres
    from memsync.demo.deployment import Paths, write_memsync_config

    binaries = Path(pgserver.__file__).parent / "pginstall" / "bin"
    root = out / f"pgvector-{size}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    base, server = postgres.start(root / "pg")
    try:
        url = postgres.fresh_database(base, "bench")
        hnsw = size <= hnsw_max
        started = time.perf_counter()
        steps = generate(root, url, size, hnsw)
        print(
            f"generated {size:,} rows in {time.perf_counter() - started:.1f} s {steps}",
            file=sys.stderr,
        )
        paths = Paths(root, pg_url=url)
        write_memsync_config(paths, embedder="memsync_hash")
        results = {"steps": steps, "hnsw": hnsw}
        for kind in ("check", "raw", "mem0"):
            results[kind] = measure(kind, root, url, "hnsw" if hnsw else "none")
        if check_only:
            _verify(results, size)
            return results
        dump = root / "mem0.dump"
        results["snapshot"] = measure("snapshot", root, url)
        results["pg_dump"] = measure(
            "pg_dump", root, url,
            json.dumps([str(binaries / "pg_dump"), "-t", "mem0", "-Fc", "-f", str(dump), "-d", url]),
        )  # fmt: skip
        results["dump_mb"] = dump.stat().st_size / 1e6
        snapshots = sorted((root / "snapshots").rglob("*"))
        results["snapshot_mb"] = sum(p.stat().st_size for p in snapshots if p.is_file()) / 1e6
        target = postgres.fresh_database(base, "restored")
        results["pg_restore"] = measure(
            "pg_restore", root, url,
            json.dumps([str(binaries / "pg_restore"), "-d", target, "--no-owner", str(dump)]),
        )  # fmt: skip
        dump.unlink()
        results["restore"] = restore(root, url, json.loads(results["snapshot"]["output"]))
        _verify(results, size)
        return results
    finally:
        postgres.stop(server)
        shutil.rmtree(root, ignore_errors=True)


def restore(root: Path, url: str, created: dict) -> dict | None:
    """``memsync restore`` of the snapshot just made, when this branch restores pgvector."""
    if not (REPO / "memsync" / "restore" / "pgvector.py").exists():
        print(
            "  restore: not measured (memsync restore for pgvector lands in track C)",
            file=sys.stderr,
        )
        return None
    snapshot_id = created.get("snapshot", {}).get("id") or created.get("id")
    try:
        return measure("restore", root, url, str(snapshot_id))
    except SystemExit as error:  # the other figures of this size are kept
        print(f"  restore: {error}", file=sys.stderr)
        return {"failed": True}


def _verify(results: dict, size: int) -> None:
    check = json.loads(results["check"]["output"])
    assert results["check"]["code"] == 0, check
    assert check["counts"]["points"] == size, check["counts"]
    assert results["raw"]["points"] == size == results["mem0"]["points"]
    if "snapshot" in results:
        assert results["snapshot"]["code"] == 0, results["snapshot"]["output"]


def table(rows: list[tuple[int, dict]]) -> None:
    """Print the figures and the ratios."""
    print(
        "| rows | table MB | HNSW | check s | raw s | mem0 list s | check / raw | mem0 / check "
        "| check MB | raw MB | mem0 MB |"
    )
    for size, r in rows:
        print(
            f"| {size:,} | {r['steps']['table_mb']:,.0f} | {'yes' if r['hnsw'] else 'no'} "
            f"| {r['check']['wall_s']:.2f} | {r['raw']['wall_s']:.2f} | {r['mem0']['wall_s']:.2f} "
            f"| {r['check']['wall_s'] / r['raw']['wall_s']:.2f} "
            f"| {r['mem0']['wall_s'] / r['check']['wall_s']:.2f} "
            f"| {r['check']['peak_rss_mb']:,.0f} | {r['raw']['peak_rss_mb']:,.0f} "
            f"| {r['mem0']['peak_rss_mb']:,.0f} |"
        )
    rows = [(size, r) for size, r in rows if "snapshot" in r]
    if not rows:
        return
    print(
        "\n| rows | snapshot s | pg_dump s | snapshot / pg_dump | snapshot MB | dump MB "
        "| snapshot RSS MB | pg_dump RSS MB | restore s | pg_restore s | pg_restore RSS MB |"
    )
    for size, r in rows:
        restored = (
            "not measured"
            if r["restore"] is None
            else "failed"
            if r["restore"].get("failed")
            else f"{r['restore']['wall_s']:.2f}"
        )
        print(
            f"| {size:,} | {r['snapshot']['wall_s']:.2f} | {r['pg_dump']['wall_s']:.2f} "
            f"| {r['snapshot']['wall_s'] / r['pg_dump']['wall_s']:.2f} | {r['snapshot_mb']:,.0f} "
            f"| {r['dump_mb']:,.0f} | {r['snapshot']['peak_rss_mb']:,.0f} "
            f"| {r['pg_dump']['peak_rss_mb']:,.0f} "
            f"| {restored} "
            f"| {r['pg_restore']['wall_s']:.2f} | {r['pg_restore']['peak_rss_mb']:,.0f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--hnsw-max", type=int, default=100_000, help="build HNSW up to this size")
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--save", help="also write every figure to this JSON file")
    parser.add_argument(
        "--check-only", action="store_true", help="measure check, raw and mem0 list only"
    )
    args = parser.parse_args()
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        rows.append((size, run_size(Path(args.out), size, args.hnsw_max, args.check_only)))
        table(rows)
    if args.save:
        Path(args.save).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
