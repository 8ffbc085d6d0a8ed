"""Benchmark ``snapshot create`` and ``restore`` on pgvector against ``pg_dump -Fc -Z0`` and ``pg_restore``.

Usage: ``python bench/bench_pgvector_snapshot.py [--size 100000] [--pairs 5] [--hnsw]
[--out bench/out] [--src DIR]``

Builds (once; reused while its ``memsync.toml`` is there) ``bench_pgvector.py``'s deployment of
``--size`` rows (its generator: table ``mem0`` loaded by ``COPY``, mem0's GIN index, HNSW with
``--hnsw``, a history.db with one ADD per row and an UPDATE for 10 %) under
``<out>/pgsnap-<size>/`` on its own PostgreSQL 16 with pgvector 0.6 (the ``pgserver`` wheel),
which runs while the bench does. Then ``--pairs`` interleaved pairs, each command a fresh
process, the order inside a pair alternating:

* create: ``memsync snapshot create --json`` against ``pg_dump -Fc -Z0 -t mem0`` of the same
  table (custom format, uncompressed, into a file);
* restore: ``memsync restore ID --force --json`` of that snapshot over the deployment against
  ``pg_restore --no-owner`` of that dump into a fresh database (data, then every index).

Untimed between pairs: the snapshot, the dump, the restored database and whatever the restore
moved aside (tables ``*_pre_restore_*``, history.db's aside copy) are removed. Each figure is
the median of the per-pair wall ratios (the work is split between memsync and the server's
backend, so wall, not CPU). Targets (issue 26): create <= 1.5x pg_dump, restore <= 1.2x
pg_restore; exits 1 when one is missed, printing the ratio and the target. ``--src DIR`` runs
the memsync of another source tree (the figures before a change:
``git worktree add bench/out/before-src <commit>``).
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
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CREATE_TARGET = 1.5  # snapshot create / pg_dump -Fc -Z0
RESTORE_TARGET = 1.2  # restore / pg_restore
MEMSYNC = "import sys; from memsync.cli import main; sys.exit(main())"


def run(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run ``command``; its wall seconds and stdout. Exits the bench on a non-zero exit."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=HERE.parent)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[:5]} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return wall, done.stdout


def prepare(out: Path, size: int, hnsw: bool) -> tuple[Path, str, Any, str]:
    """The deployment (generated when missing), its database URL, its server, the server's URL."""
    from bench_pgvector import generate

    from memsync.demo import postgres
    from memsync.demo.deployment import Paths, write_memsync_config

    root = (out / f"pgsnap-{size}{'-hnsw' if hnsw else ''}").resolve()
    fresh = not (root / "memsync.toml").exists()
    if fresh:
        shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    base, server = postgres.start(root / "pg")
    if fresh:
        url = postgres.fresh_database(base, "bench")
        started = time.perf_counter()
        steps = generate(root, url, size, hnsw)
        print(f"generated {size:,} rows in {time.perf_counter() - started:.0f} s {steps}")
        write_memsync_config(Paths(root, pg_url=url), embedder="memsync_hash")
        (root / "bench-url").write_text(url)
    return root, (root / "bench-url").read_text().strip(), server, base


def drop_aside(url: str, aside: list[str]) -> None:
    """Remove what a restore moved aside: its ``*_pre_restore_*`` tables and history files."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        for name in aside:
            if "/" in name:
                Path(name).unlink(missing_ok=True)
            else:
                connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--hnsw", action="store_true", help="build mem0's HNSW index too")
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument("--src", default=None, help="run the memsync of this source tree")
    args = parser.parse_args()
    import pgserver

    from memsync.demo import postgres

    binaries = Path(pgserver.__file__).parent / "pginstall" / "bin"
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: the modules' .pyc are written once
    if args.src:
        env["PYTHONPATH"] = str(Path(args.src).resolve())
    root, url, server, base = prepare(Path(args.out), args.size, args.hnsw)
    memsync = [sys.executable, "-P", "-c", MEMSYNC, "--config", str(root / "memsync.toml")]
    dump = root / "mem0.dump"
    pg_dump = [str(binaries / "pg_dump"), "-t", "mem0", "-Fc", "-Z0", "-f", str(dump), "-d", url]
    creates: list[float] = []
    restores: list[float] = []
    print(
        f"{args.size:,} rows{' with HNSW' if args.hnsw else ''}, {args.pairs} interleaved pairs\n"
        f"{'pair':>4} {'create s':>9} {'pg_dump s':>10} {'x':>5} {'restore s':>10} "
        f"{'pg_restore s':>13} {'x':>5} {'snapshot MB':>12} {'dump MB':>8}",
        flush=True,
    )
    try:
        run([*memsync, "--version"], env)  # compile the modules now, not in the first pair
        for pair in range(args.pairs):
            first = pair % 2 == 0
            timed: dict[str, float] = {}
            for step in ("create", "dump") if first else ("dump", "create"):
                if step == "dump":
                    timed["dump"], _ = run(pg_dump, env)
                else:
                    timed["create"], output = run([*memsync, "snapshot", "create", "--json"], env)
                    created = json.loads(output)
            snapshot = Path(created["path"])
            snapshot_mb = sum(p.stat().st_size for p in snapshot.rglob("*") if p.is_file()) / 1e6
            target = postgres.fresh_database(base, "restored")
            for step in ("restore", "pg_restore") if first else ("pg_restore", "restore"):
                if step == "pg_restore":
                    command = [str(binaries / "pg_restore"), "--no-owner", "-d", target, str(dump)]
                    timed["pg_restore"], _ = run(command, env)
                else:
                    timed["restore"], output = run(
                        [*memsync, "restore", created["id"], "--force", "--json"], env
                    )
                    report = json.loads(output)
                    assert report["check_after"]["points"] == args.size, report["check_after"]
                    drop_aside(url, report["moved_aside"])
            creates.append(timed["create"] / timed["dump"])
            restores.append(timed["restore"] / timed["pg_restore"])
            print(
                f"{pair:>4} {timed['create']:>9.2f} {timed['dump']:>10.2f} {creates[-1]:>5.2f} "
                f"{timed['restore']:>10.2f} {timed['pg_restore']:>13.2f} {restores[-1]:>5.2f} "
                f"{snapshot_mb:>12.0f} {dump.stat().st_size / 1e6:>8.0f}",
                flush=True,
            )
            shutil.rmtree(snapshot)
            dump.unlink()
    finally:
        postgres.stop(server)
    create, restore = statistics.median(creates), statistics.median(restores)
    print(f"median wall ratio: snapshot create / pg_dump -Fc -Z0 {create:.2f}x "
          f"(target <= {CREATE_TARGET}x); restore / pg_restore {restore:.2f}x "
          f"(target <= {RESTORE_TARGET}x)")  # fmt: skip
    missed = []
    if create > CREATE_TARGET:
        missed.append(
            f"snapshot create is {create:.2f}x pg_dump -Fc -Z0 (target <= {CREATE_TARGET}x)"
        )
    if restore > RESTORE_TARGET:
        missed.append(f"restore is {restore:.2f}x pg_restore (target <= {RESTORE_TARGET}x)")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
