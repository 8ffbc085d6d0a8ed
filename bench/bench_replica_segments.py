"""Benchmark the WAL-segment check of ``restore --at`` against ``litestream restore`` of the replica.

Usage: ``python bench/bench_replica_segments.py [--commits 2000] [--pairs 5] [--out bench/out]``
(``make tools`` first: the pinned Litestream binary).

Builds ``<out>/segments-<commits>/``: a SQLite file in WAL mode that Litestream (monitor and
sync intervals 10 ms, a directory replica) ships while a writer commits ``--commits`` transactions of one
row each, spaced so that each lands in a segment of its own (a day of an app writing every
few seconds is tens of thousands). Then ``--pairs`` interleaved pairs on the same replica:

* ``restore``: ``litestream restore -generation G -timestamp T`` of the file into a new path,
  what ``restore --at`` runs per file (its wall time: Litestream is a process of its own);
* ``check``: ``memsync.restore.at.foreign_segment`` over the replica's listing, what
  ``restore --at`` now runs before it (every segment read, the first 56 bytes decoded), in
  this process, wall.

The figure is the median of the per-pair wall ratios (check / restore); target <= 0.25 (the
check adds at most a quarter of Litestream's own restore), exit 1 when missed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from memsync import protection  # noqa: E402
from memsync.restore.at import foreign_segment  # noqa: E402
from tests.helpers import litestream  # noqa: E402

TARGET = 0.25


def build(binary: Path, root: Path, commits: int) -> tuple[Path, Path]:
    """A file shipped by Litestream, ``commits`` segments; its path and its replica."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    db, replica = root / "db.sqlite", root / "replica"
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE history (id INTEGER PRIMARY KEY, text TEXT)")
    config = root / "litestream.yml"
    entry = {"type": "file", "path": str(replica), "sync-interval": "10ms"}
    db_entry = {"path": str(db), "monitor-interval": "10ms", "replicas": [entry]}
    config.write_text(json.dumps({"dbs": [db_entry]}))
    shipping = subprocess.Popen(
        [str(binary), "replicate", "-config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not list(replica.glob("generations/*/snapshots/*")):
            time.sleep(0.05)
        for n in range(commits):
            connection.execute("INSERT INTO history (text) VALUES (?)", (f"memory {n} " * 20,))
            time.sleep(0.02)
        time.sleep(1.0)  # the last commit shipped
    finally:
        shipping.terminate()
        shipping.wait(timeout=60)
        connection.close()
    return db, replica


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = parser.parse_args()
    binary = litestream.ensure()
    db, replica = build(binary, args.out / f"segments-{args.commits}", args.commits)
    objects = protection._directory_objects(replica)
    [generation] = protection.generations(objects)
    segments = sum(1 for o in objects if "/wal/" in o.key)
    last = max(objects, key=lambda o: o.modified)
    nanoseconds = (replica / last.key).stat().st_mtime_ns  # as restore --at's _stamp
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(nanoseconds // 10**9))
    stamp += f".{nanoseconds % 10**9:09d}Z"
    target = db.with_name("restored.sqlite")
    ratios = []
    for pair in range(args.pairs):
        target.unlink(missing_ok=True)
        started = time.perf_counter()
        subprocess.run(
            [str(binary), "restore", "-config", str(db.with_name("litestream.yml"))]
            + ["-generation", generation, "-timestamp", stamp, "-o", str(target), str(db)],
            check=True,
            capture_output=True,
        )
        restore_s = time.perf_counter() - started
        started = time.perf_counter()
        found = foreign_segment(objects, generation, None, lambda key: (replica / key).read_bytes())
        check_s = time.perf_counter() - started
        assert found is None, found
        ratios.append(check_s / restore_s)
        print(
            f"pair {pair + 1}: restore {restore_s:.3f} s, check {check_s:.3f} s, {ratios[-1]:.3f}x"
        )
    median = statistics.median(ratios)
    print(
        f"{segments} WAL segments: the check is {median:.3f}x litestream restore (target <= {TARGET})"
    )
    return 0 if median <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
