"""Benchmark ``memsync restore --at latest`` against ``memsync restore`` of the newest snapshot.

Usage: ``python bench/bench_restore_at.py [--size 100000] [--pairs 3] [--out bench/out]``
(``make tools`` first: the pinned Litestream binary).

Reuses (or generates) ``bench_check.py``'s deployment of ``--size`` points, copies it into
``<out>/restore-<size>/`` (as ``bench_restore.py``), protects it (``memsync protect``: WAL mode and Litestream's
configuration, a directory replica), takes one snapshot (``snapshot create`` and ``snapshot
verify``, so both restores may choose it), and runs ``litestream replicate`` until both files'
replicas hold a WAL segment. Then ``--pairs`` interleaved pairs, each command in a fresh
process with the page cache warm for both:

* ``snapshot``: ``memsync restore ID --force --json`` (what issue 27 compares against);
* ``at``: ``memsync restore --at latest --force --json``: both files restored by Litestream from
  the replica, meta.json from the snapshot, staged and swapped by restore's own code, then the
  full check the seam needs (a snapshot's restore reuses its create's judgement instead).

The pre-restore copies are removed after each restore (not timed). The figure is the median of
the per-pair wall ratios (at / snapshot); target <= 3.0 (issue 27, point 4), exit 1 when missed.
Wall, because Litestream is a process of its own (its CPU is in the child's rusage too, printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from bench_restore import MEMSYNC, prepare, run  # noqa: E402

from tests.helpers import litestream  # noqa: E402

HERE = Path(__file__).resolve().parent
TARGET = 3.0


def replicate(binary: Path, config: Path, replica: Path) -> None:
    """Run Litestream until both files' replicas hold a WAL segment, then stop it."""
    shipping = subprocess.Popen(
        [str(binary), "replicate", "-config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            names = ("history.db", "collection/mem0")
            if all(any((replica / n).glob("generations/*/wal/*")) for n in names):
                return
            time.sleep(0.2)
        raise SystemExit("litestream shipped nothing in 600 s")
    finally:
        shipping.terminate()
        shipping.wait(timeout=60)


def remove_aside(report: dict) -> None:
    for aside in report["moved_aside"]:
        path = Path(aside)
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "out"))
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    binary = litestream.ensure()
    root, config = prepare(Path(args.out), args.size)  # <out>/restore-<size>, a fresh copy
    config.write_text(
        config.read_text() + f'[protect]\nlitestream = "{binary}"\ndirectory = "{root}/replica"\n'
    )
    memsync = [sys.executable, "-P", "-c", MEMSYNC, "--config", str(config)]
    run([*memsync, "protect"], env)
    _, _, created = run([*memsync, "snapshot", "create", "--json"], env)
    snapshot_id = json.loads(created)["id"]
    run([*memsync, "snapshot", "verify", snapshot_id], env)
    replicate(binary, root / "state" / "litestream.yml", root / "replica")
    print(f"{args.size:,} points, {args.pairs} interleaved pairs (wall s, CPU s of the child)")
    print(f"{'pair':>4} {'snapshot s':>10} {'CPU s':>7} {'--at s':>8} {'CPU s':>7} {'wall x':>7}")
    ratios = []
    for pair in range(args.pairs):
        wall_s, cpu_s, out = run([*memsync, "restore", snapshot_id, "--force", "--json"], env)
        remove_aside(json.loads(out))
        wall_a, cpu_a, out = run([*memsync, "restore", "--at", "latest", "--force", "--json"], env)
        report = json.loads(out)
        assert report["check_after"]["points"] == args.size, report["check_after"]
        assert report["at"]["seam"] == [], report["at"]["seam"]
        remove_aside(report)
        ratios.append(wall_a / wall_s)
        print(
            f"{pair:>4} {wall_s:>10.2f} {cpu_s:>7.2f} {wall_a:>8.2f} {cpu_a:>7.2f} "
            f"{ratios[-1]:>7.2f}",
            flush=True,
        )
    ratio = statistics.median(ratios)
    print(f"median ratio: wall {ratio:.2f}x (target <= {TARGET}x)")
    shutil.rmtree(root)
    if ratio > TARGET:
        print(f"MISSED: restore --at is {ratio:.2f}x restoring the snapshot (target <= {TARGET}x)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
