"""Benchmark ``memsync restore`` against a plain copy of the snapshot's files and their fsync.

Usage: ``python bench/bench_restore.py [--size 100000] [--pairs 5] [--out bench/out] [--src DIR]``

Reuses (or generates) ``bench_check.py``'s deployment of ``--size`` points, copies it into
``<out>/restore-<size>/`` (the generated one is never restored over) and takes one snapshot of
it there with ``memsync snapshot create``. Then ``--pairs`` interleaved pairs, each command in a
fresh process, the page cache warm for both (each reads the same snapshot files):

* ``restore``: ``memsync restore ID --force --json`` over the deployment (the CLI as a user runs
  it: start-up, verification, staging, swap, the check after);
* ``cp``: ``cp`` of the snapshot's files into a fresh directory beside the deployment, then
  ``sync FILE...`` of each (an fsync per file), as the restore's floor.

The restore's pre-restore copies and the cp's directory are removed after each pair (not
timed). The figure is the median of the per-pair wall ratios (restore / cp); per-pair CPU
ratios (user + system of the child) are printed too. Target: wall ratio <= 2.0, exit 1 when
missed. Wall, because restore is I/O work whose floor is writing and fsyncing the bytes; cp's
CPU is a few tenths of a second of kernel copy, so a CPU ratio mostly measures the Python
interpreter's start-up (printed per pair: the CPU of importing restore's modules alone, in a
process of its own). ``--src DIR`` runs the memsync of another source tree (the figures
before a change: ``git worktree add /tmp/before <commit>``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from memsync.demo.bulk import generate

HERE = Path(__file__).resolve().parent
TARGET = 2.0
MEMSYNC = "import sys; from memsync.cli import main; sys.exit(main())"
IMPORTS = "import memsync.cli.restore"  # the start-up restore pays before it reads a byte


def run(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``command``; return (wall s, CPU s of the child, stdout). Fails on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=HERE.parent)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{command[:4]} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def prepare(out: Path, size: int) -> tuple[Path, Path]:
    """The deployment to restore over and its config; copied fresh from the generated one."""
    generated = out / f"deployment-{size}"
    if not (generated / "memsync.toml").exists():
        generated.mkdir(parents=True, exist_ok=True)
        generate(generated, size)
    root = (out / f"restore-{size}").resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shutil.copytree(generated / "qdrant", root / "qdrant")
    shutil.copy2(generated / "history.db", root / "history.db")
    config = root / "memsync.toml"
    config.write_text(
        f'state_dir = "{root}/state"\n'
        f'[mem0]\nhistory_db_path = "{root}/history.db"\n'
        f'[mem0.vector_store.config]\npath = "{root}/qdrant"\nembedding_model_dims = 384\n'
        f'[snapshot]\ndirectory = "{root}/snapshots"\n'
    )
    return root, config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--src", default=None, help="run the memsync of this source tree")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: the modules' .pyc are written once
    if args.src:
        env["PYTHONPATH"] = str(Path(args.src).resolve())
    run([sys.executable, "-P", "-c", IMPORTS], env)  # compile them now, not in the first pair
    root, config = prepare(Path(args.out), args.size)
    memsync = [sys.executable, "-P", "-c", MEMSYNC, "--config", str(config)]
    _, _, created = run([*memsync, "snapshot", "create", "--json"], env)
    snapshot_id = json.loads(created)["id"]
    snapshot = root / "snapshots" / snapshot_id
    files = sorted(
        p.relative_to(snapshot)
        for p in snapshot.rglob("*")
        if p.is_file() and p.name not in ("manifest.json", "verified.json")
    )
    size_mb = sum((snapshot / p).stat().st_size for p in files) / 1e6
    print(f"{args.size:,} points, snapshot files {size_mb:.0f} MB, {args.pairs} interleaved pairs")
    print(
        f"{'pair':>4} {'restore s':>10} {'CPU s':>7} {'imports CPU s':>14} "
        f"{'cp+fsync s':>11} {'CPU s':>7} {'wall x':>7} {'CPU x':>6}",
        flush=True,
    )
    walls, cpus = [], []
    for pair in range(args.pairs):
        wall_r, cpu_r, output = run([*memsync, "restore", snapshot_id, "--force", "--json"], env)
        report = json.loads(output)
        assert report["check_after"]["points"] == args.size, report["check_after"]
        for aside in report["moved_aside"]:
            path = Path(aside)
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        dest = root / f"cp-{pair}"
        dest.mkdir()
        copies = f"cp -r {snapshot / 'qdrant'} {snapshot / 'history.db'} {dest}/"
        synced = " ".join(str(dest / p) for p in files)
        wall_c, cpu_c, _ = run(["sh", "-c", f"{copies} && sync {synced}"], env)
        shutil.rmtree(dest)
        _, cpu_i, _ = run([sys.executable, "-P", "-c", IMPORTS], env)
        walls.append(wall_r / wall_c)
        cpus.append(cpu_r / cpu_c)
        print(
            f"{pair:>4} {wall_r:>10.2f} {cpu_r:>7.2f} {cpu_i:>14.2f} "
            f"{wall_c:>11.2f} {cpu_c:>7.2f} {walls[-1]:>7.2f} {cpus[-1]:>6.2f}",
            flush=True,
        )
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"median ratio: wall {wall:.2f}x (target <= {TARGET}x), CPU {cpu:.2f}x (not a target)")
    shutil.rmtree(root)
    if wall > TARGET:
        print(f"MISSED: restore is {wall:.2f}x cp + fsync (target <= {TARGET}x)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
