"""Benchmark ``memsync check`` against reading the stores raw and against QdrantClient.

Usage: ``python bench/bench_check.py [--sizes 20000,100000] [--out bench/out]``

For each size it generates a deployment in mem0's on-disk shape (mem0ai 2.2.1 / qdrant-client
1.20.0): a collection created by QdrantClient, its ``storage.sqlite`` filled in bulk with pickled
``PointStruct``s (384-dim vectors, mem0 payloads), and a history.db with mem0's own schema and one
ADD per point plus UPDATE rows for 10%. Then, each in a fresh subprocess (so peak RSS is its own):

* ``check``: ``memsync check --json`` (capture with VACUUM INTO, decode, judge);
* ``raw``: every point row decoded with ``pickle.loads`` and every history row selected
  (baseline a);
* ``client``: ``QdrantClient(path=...)`` and a scroll of every point (baseline b).

Prints a table of wall time (s), peak RSS (MB) and ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from memsync.demo.bulk import generate

DIMS = 384  # as memsync.demo.bulk
HERE = Path(__file__).resolve().parent


CHILD = r"""
import json, resource, sys, time
kind, root = sys.argv[1], sys.argv[2]
start = time.perf_counter()
extra = {}
if kind == "check":
    from memsync.cli import main
    import io, contextlib
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["check", "--json", "--config", root + "/memsync.toml"])
    report = json.loads(buffer.getvalue())
    extra = {"code": code, "points": report["counts"]["points"], "longest_read_s": report["capture"]["longest_read_s"]}
elif kind == "raw":
    import pickle, sqlite3
    from qdrant_client.http import models  # the real classes, as qdrant-client unpickles them
    con = sqlite3.connect(root + "/qdrant/collection/mem0/storage.sqlite")
    n = 0
    for (blob,) in con.execute("SELECT point FROM points"):
        pickle.loads(blob); n += 1
    h = sqlite3.connect(root + "/history.db")
    rows = sum(1 for _ in h.execute("SELECT * FROM history"))
    extra = {"points": n, "history_rows": rows}
elif kind == "client":
    from qdrant_client import QdrantClient
    client = QdrantClient(path=root + "/qdrant")
    n, offset = 0, None
    while True:
        points, offset = client.scroll("mem0", limit=1000, offset=offset, with_vectors=True)
        n += len(points)
        if offset is None:
            break
    client.close()
    extra = {"points": n}
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"wall_s": wall, "peak_rss_mb": peak, **extra}))
"""


def measure(kind: str, root: Path) -> dict:
    """Run one measurement in a fresh interpreter; return its JSON line."""
    result = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(root)],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE.parent,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--out", default=str(HERE / "out"))
    args = parser.parse_args()
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        root = Path(args.out) / f"deployment-{size}"
        if not (root / "memsync.toml").exists():
            started = time.perf_counter()
            root.mkdir(parents=True, exist_ok=True)
            generate(root, size)
            print(
                f"generated {size} points in {time.perf_counter() - started:.1f} s", file=sys.stderr
            )
        results = {kind: measure(kind, root) for kind in ("check", "raw", "client")}
        storage = root / "qdrant" / "collection" / "mem0" / "storage.sqlite"
        store_bytes = storage.stat().st_size + (root / "history.db").stat().st_size
        assert (
            results["check"]["points"]
            == size
            == results["raw"]["points"]
            == results["client"]["points"]
        )
        assert results["check"]["code"] == 0
        rows.append((size, store_bytes, results))
    print(
        f"{'points':>8} {'store MB':>9} {'check s':>8} {'raw s':>7} {'client s':>9} "
        f"{'check/raw':>10} {'client/check':>13} {'check MB':>9} {'raw MB':>7} {'client MB':>10}"
    )
    for size, store_bytes, r in rows:
        print(
            f"{size:>8} {store_bytes / 1e6:>9.0f} {r['check']['wall_s']:>8.2f} {r['raw']['wall_s']:>7.2f} "
            f"{r['client']['wall_s']:>9.2f} {r['check']['wall_s'] / r['raw']['wall_s']:>10.2f} "
            f"{r['client']['wall_s'] / r['check']['wall_s']:>13.2f} {r['check']['peak_rss_mb']:>9.0f} "
            f"{r['raw']['peak_rss_mb']:>7.0f} {r['client']['peak_rss_mb']:>10.0f}"
        )
    for size, _store_bytes, r in rows:
        storage = (
            Path(args.out)
            / f"deployment-{size}"
            / "qdrant"
            / "collection"
            / "mem0"
            / "storage.sqlite"
        )
        longest = r["check"]["longest_read_s"]
        per_second = storage.stat().st_size / longest
        bytes_per_point = storage.stat().st_size / size
        print(
            f"{size} points: longest read transaction {longest:.2f} s for {storage.stat().st_size / 1e6:.0f} MB "
            f"({per_second / 1e6:.0f} MB/s): a 2 s read covers ~{2 * per_second / 1e6:.0f} MB, "
            f"~{int(2 * per_second / bytes_per_point):,} points at {DIMS} dims"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
