"""Peak memory of memsync's commands at 1,000,000 memories, embedded Qdrant and pgvector (issue 26).

Usage: ``python bench/bench_memory.py [--size 1000000] [--backends embedded,pgvector]
[--commands check,doctor,...] [--out bench/out] [--save FILE]``

For each backend it builds (once; reused while ``memsync.toml`` is there) a deployment of
``--size`` memories under ``--out``:

* **embedded**: ``memory-embedded-<size>/``, in ``bench_check.py``'s shape (a collection
  created by QdrantClient, ``storage.sqlite`` filled with pickled ``PointStruct``s of 384 dims
  and mem0 payloads, a history.db with one ADD per point and an UPDATE for 10 %); vectors come
  from a pool of 4,096 (drawing 384 floats per point would dominate the build), every pickle is
  as large as a real one. About 4 GB at 1,000,000 points.
* **pgvector**: ``memory-pgvector-<size>/``, ``bench_pgvector.py``'s deployment on its own
  PostgreSQL 16 (the ``pgserver`` wheel), without HNSW; the server runs while the bench does.

Then each command in a fresh interpreter (``nice -n 10``, ``--nice``), its peak RSS its own ``VmHWM``: the
**raw** read (``bench_check.py``'s for embedded: every point row ``pickle.loads``-ed and every
history row selected; ``bench_pgvector.py``'s for pgvector: ``COPY mem0 TO STDOUT`` and every
history row), ``check``, ``doctor``, ``snapshot create`` (needed by the next ones), ``snapshot
verify``, ``reconcile --dry-run``, ``forget --user --dry-run``, ``recover --user --dry-run``,
``restore ID --dry-run``, ``migrate --dry-run``; by name only, ``restore-force`` (``restore ID --force``: the load and the swap, which changes the deployment). Prints peak RSS (MB), wall and CPU seconds, and the
ratio of check to the raw read (CPU for embedded, wall for pgvector); ``--journal wal`` puts the
embedded files in WAL mode and holds each open while measuring (as a running app does), where
``check`` reads them in place. Exits 1 when a target is
missed (every command under 400 MB; check within 1.5x of the raw read), 0 otherwise.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import pickle
import random
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

DIMS = 384
POOL = 4096
PEAK_MB = 400.0
CHECK_RATIO = 1.5
USER = "user-7"  # one of 50: 2 % of the memories
EVERY = (
    "check",
    "doctor",
    "snapshot",
    "verify",
    "reconcile",
    "forget",
    "recover",
    "restore",
    "migrate",
)

CHILD = r"""
import json, os, resource, sys, time
kind, root, url, argv = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
start, cpu = time.perf_counter(), time.process_time()
extra = {}
if kind == "raw-embedded":
    import pickle, sqlite3
    from qdrant_client.http import models  # the real classes, as qdrant-client unpickles them
    con = sqlite3.connect(root + "/qdrant/collection/mem0/storage.sqlite")
    n = 0
    for (blob,) in con.execute("SELECT point FROM points"):
        pickle.loads(blob); n += 1
    h = sqlite3.connect(root + "/mem0/history.db")
    rows = sum(1 for _ in h.execute("SELECT * FROM history"))
    extra = {"points": n, "history_rows": rows}
elif kind == "raw-pgvector":
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
else:
    from memsync.cli import main
    import io, contextlib
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main([*argv, "--config", root + "/memsync.toml"])
    extra = {"code": code, "output": buffer.getvalue()[-200000:]}
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
own = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": own, **extra}))
"""


def argv_of(command: str) -> list[str]:
    """memsync's arguments for one measured command."""
    return {
        "check": ["check", "--json"],
        "doctor": ["doctor", "--json"],
        "snapshot": ["snapshot", "create", "--json"],
        "verify": ["snapshot", "verify", "{snapshot}", "--json"],
        "reconcile": ["reconcile", "--dry-run", "--json"],
        "forget": ["forget", "--user", USER, "--dry-run", "--json"],
        "recover": ["recover", "--user", USER, "--from", "latest", "--dry-run", "--json"],
        "restore": ["restore", "{snapshot}", "--dry-run", "--json"],
        "restore-force": ["restore", "{snapshot}", "--force", "--json"],  # loads and swaps
        "migrate": ["migrate", "--to", "{root}/migrate-to.toml", "--dry-run", "--json"],
    }[command]


CODE = REPO  # the memsync the children import (--code: another checkout, for the figures before)
NICE = "10"  # the children's niceness (--nice)


def measure(
    kind: str, root: Path, url: str = "", argv: list[str] | None = None, snapshot: str = "latest"
) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter (``nice -n NICE``); return its JSON line."""
    argv = [
        part.replace("{root}", str(root)).replace("{snapshot}", snapshot) for part in argv or []
    ]
    result = subprocess.run(
        ["nice", "-n", NICE, sys.executable, "-c", CHILD, kind, str(root), url, json.dumps(argv)],
        capture_output=True,
        text=True,
        cwd=CODE,
    )
    if result.returncode != 0:
        print(f"  {kind} {' '.join(argv[:3])}: failed {result.returncode}", file=sys.stderr)
        return {"failed": result.returncode, "stderr": result.stderr[-2000:]}
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    print(
        f"  {kind} {' '.join(argv[:3])}: {found['peak_rss_mb']:.0f} MB, {found['wall_s']:.1f} s wall, "
        f"{found['cpu_s']:.1f} s CPU, exit {found.get('code', 0)}",
        file=sys.stderr,
        flush=True,
    )
    return found


def generate_embedded(root: Path, size: int) -> None:
    """An embedded deployment of ``size`` points in bench_check.py's shape (vectors from a pool)."""
    from qdrant_client import QdrantClient, models

    from memsync.demo.bulk import create_history_tables
    from memsync.demo.deployment import Paths, write_memsync_config

    paths = Paths(root)
    client = QdrantClient(path=str(paths.qdrant))
    client.create_collection(
        "mem0", vectors_config=models.VectorParams(size=DIMS, distance=models.Distance.COSINE)
    )
    client.close()
    rng = random.Random(5)
    vectors = [[rng.uniform(-0.1, 0.1) for _ in range(DIMS)] for _ in range(POOL)]
    storage = sqlite3.connect(paths.qdrant / "collection" / "mem0" / "storage.sqlite")
    paths.history_db.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(paths.history_db)
    create_history_tables(db)
    now = "2026-01-01T00:00:00+00:00"
    points: list[tuple[str, bytes]] = []
    rows: list[tuple[Any, ...]] = []
    for index in range(size):
        memory_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        text = f"user fact number {index}: prefers tea {rng.randrange(10**9)}"
        final = text + " (updated)" if index % 10 == 0 else text
        payload = {
            "user_id": f"user-{index % 50}",
            "role": "user",
            "data": final,
            "hash": hashlib.md5(final.encode()).hexdigest(),  # noqa: S324 - mem0's own hash
            "created_at": now,
            "updated_at": now,
            "text_lemmatized": final,
            "source": "bench",
        }
        point = models.PointStruct.model_construct(
            id=memory_id, vector={"": vectors[index % POOL]}, payload=payload
        )
        key = base64.b64encode(pickle.dumps(memory_id, protocol=4)).decode()
        points.append((key, pickle.dumps(point)))
        rows.append((str(uuid.uuid4()), memory_id, None, text, "ADD", now, now, 0, None, "user"))
        if final != text:
            rows.append(
                (str(uuid.uuid4()), memory_id, text, final, "UPDATE", now, now, 0, None, "user")
            )
        if len(points) >= 5000:
            _flush(storage, db, points, rows)
    _flush(storage, db, points, rows)
    storage.close()
    db.close()
    write_memsync_config(paths, embedder="memsync_hash")


def _flush(storage: sqlite3.Connection, db: sqlite3.Connection, points: list, rows: list) -> None:
    with storage:
        storage.executemany("INSERT INTO points VALUES (?, ?)", points)
    with db:
        db.executemany("INSERT INTO history VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    points.clear()
    rows.clear()


def migrate_target(root: Path, url: str) -> None:
    """The config ``migrate --dry-run`` is measured with: a new embedded store, a new embedder."""
    from memsync.demo.deployment import Paths, vector_store_toml

    paths = Paths(root, pg_url=url or None)
    text = (root / "memsync.toml").read_text(encoding="utf-8")
    old = vector_store_toml(root, paths.qdrant, paths.pg_url, DIMS)
    new = vector_store_toml(root, root / "qdrant-migrated", None, 256)
    assert old in text, "the config does not hold the generated vector store table"
    text = text.replace(old, new).replace(
        'provider = "memsync_hash"', 'provider = "memsync_hash256"'
    )
    (root / "migrate-to.toml").write_text(text)


def set_journal(root: Path, mode: str) -> list[sqlite3.Connection]:
    """Put the embedded deployment's SQLite files in ``mode``; in WAL, hold each open as an app does.

    ``"wal"``: each file is switched to WAL and a connection to it stays open (returned: the
    caller closes them), so it keeps its ``-shm`` as under a running app, and memsync sees a live
    WAL file. ``"rollback"``: each file is switched back to ``DELETE``; nothing is held.
    """
    files = [*sorted((root / "qdrant" / "collection").glob("*/storage.sqlite"))]
    files.append(root / "mem0" / "history.db")
    held = []
    for path in files:
        connection = sqlite3.connect(path)
        connection.execute(f"PRAGMA journal_mode={'WAL' if mode == 'wal' else 'DELETE'}").fetchone()
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if mode == "wal":
            held.append(connection)
        else:
            connection.close()
    return held


JOURNAL = "rollback"  # the embedded deployment's journal mode while measured (--journal)


def run_backend(backend: str, out: Path, size: int, commands: list[str]) -> dict[str, Any]:
    """Build (or reuse) one deployment and measure every command on it."""
    root = out / f"memory-{backend}-{size}"
    held: list[sqlite3.Connection] = []
    server = None
    url = ""
    if backend == "embedded":
        if not (root / "memsync.toml").exists():
            started = time.perf_counter()
            root.mkdir(parents=True, exist_ok=True)
            generate_embedded(root, size)
            print(
                f"generated {size:,} points in {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )
    else:
        from bench_pgvector import generate

        from memsync.demo import postgres
        from memsync.demo.deployment import Paths, write_memsync_config

        fresh = not (root / "memsync.toml").exists()
        root.mkdir(parents=True, exist_ok=True)
        base, server = postgres.start(root / "pg")
        if fresh:
            url = postgres.fresh_database(base, "bench")
            started = time.perf_counter()
            steps = generate(root, url, size, hnsw=False)
            print(
                f"generated {size:,} rows in {time.perf_counter() - started:.0f} s {steps}",
                file=sys.stderr,
            )
            write_memsync_config(Paths(root, pg_url=url), embedder="memsync_hash")
            (root / "bench-url").write_text(url)
        url = (root / "bench-url").read_text().strip()
    try:
        if not commands:
            return {}
        if backend == "embedded":
            held = set_journal(root, JOURNAL)
        results: dict[str, Any] = {}
        if "check" in commands:  # the raw read is check's baseline
            results["raw"] = measure(f"raw-{backend}", root, url)
        migrate_target(root, url)
        snapshot = _newest_snapshot(root)
        for command in commands:
            results[command] = found = measure("memsync", root, url, argv_of(command), snapshot)
            if command == "snapshot" and found.get("code") == 0:
                snapshot = _newest_snapshot(root)
        return results
    finally:
        for connection in held:
            connection.close()
        if server is not None:
            from memsync.demo import postgres

            postgres.stop(server)


def _newest_snapshot(root: Path) -> str:
    """The id of the newest complete snapshot under ``root/snapshots`` (``latest`` when none)."""
    made = sorted(
        p.name
        for p in (root / "snapshots").glob("*")
        if p.is_dir() and not p.name.endswith(".partial")
    )
    return made[-1] if made else "latest"


def verdicts(backend: str, results: dict[str, Any]) -> list[str]:
    """The targets this backend's figures miss (empty: every one met)."""
    missed = []
    for command, found in results.items():
        if "failed" in found:
            missed.append(
                f"{backend} {command}: failed ({found['failed']}): {found['stderr'][-300:]}"
            )
        elif found["peak_rss_mb"] >= PEAK_MB:
            missed.append(
                f"{backend} {command}: peak {found['peak_rss_mb']:.0f} MB >= {PEAK_MB:.0f} MB"
            )
    check, raw = results.get("check"), results.get("raw")
    if check and raw and "failed" not in check and "failed" not in raw:
        measure_key = "cpu_s" if backend == "embedded" else "wall_s"
        ratio = check[measure_key] / raw[measure_key]
        print(f"{backend}: check / raw ({measure_key}) = {ratio:.2f} (target <= {CHECK_RATIO})")
        if ratio > CHECK_RATIO:
            missed.append(f"{backend} check: {ratio:.2f}x the raw read > {CHECK_RATIO}x")
    return missed


def table(backend: str, size: int, results: dict[str, Any]) -> None:
    """Print one backend's figures as a Markdown table."""
    print(f"\n{backend}, {size:,} memories\n\n| command | peak RSS MB | wall s | CPU s | exit |")
    print("|---|---:|---:|---:|---:|")
    for command, found in results.items():
        if "failed" in found:
            print(f"| {command} | failed | | | {found['failed']} |")
            continue
        print(
            f"| {command} | {found['peak_rss_mb']:,.0f} | {found['wall_s']:.1f} "
            f"| {found['cpu_s']:.1f} | {found.get('code', 0)} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--backends", default="embedded,pgvector")
    parser.add_argument("--commands", default=",".join(EVERY))
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--save", help="also write every figure to this JSON file")
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--code", help="run the commands with the memsync of this checkout")
    parser.add_argument("--nice", type=int, default=10, help="the children's niceness")
    parser.add_argument(
        "--journal",
        choices=("rollback", "wal"),
        default="rollback",
        help="embedded: the files' journal mode while measured (wal: held open, as by an app)",
    )
    args = parser.parse_args()
    global CODE, NICE, JOURNAL  # noqa: PLW0603
    CODE = Path(args.code).resolve() if args.code else REPO
    NICE = str(args.nice)
    JOURNAL = args.journal
    commands = [] if args.generate_only else [c for c in args.commands.split(",") if c]
    missed: list[str] = []
    everything = {}
    for backend in args.backends.split(","):
        results = run_backend(backend, Path(args.out), args.size, commands)
        everything[backend] = results
        if args.generate_only:
            continue
        table(backend, args.size, results)
        missed += verdicts(backend, results)
    if args.save:
        Path(args.save).write_text(json.dumps(everything, indent=2))
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
