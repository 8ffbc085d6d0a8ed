"""Every issue-26 and issue-27 target at once: run each bench script that holds one; exit 1 when any is missed.

Usage: ``python bench/targets.py [--only SCRIPT ...]`` (``make bench-targets``); by hand, never
in CI: the whole run takes hours at the issue's sizes, and the machine must be otherwise idle for
the seconds to mean anything (the scripts compare ratios measured side by side).

Each script exits non-zero when one of its targets is missed and prints the ratio and the
target; this runner lists the scripts that did, and the ones that are not there yet.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (script, its arguments, the targets it holds), in bench/README.md's order: issue 26, then 27.
SCRIPTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("bench_restore.py", (), "restore <= 2x cp + fsync (embedded)"),
    ("bench_snapshot.py", (), "snapshot create <= 2x VACUUM INTO + fsync (embedded)"),
    (
        "bench_pgvector_snapshot.py",
        (),
        "snapshot create <= 1.5x pg_dump -Fc -Z0, restore <= 1.2x pg_restore (pgvector)",
    ),
    ("bench_hold.py", (), "the app's writes held <= 50 ms by a quiesced snapshot in WAL mode"),
    (
        "bench_migrate.py",
        (),
        "migrate without re-embedding <= 2x the target's bulk load; re-embedding >= 0.9x the "
        "embedder's batch rate",
    ),
    (
        "bench_memory.py",
        ("--journal", "wal"),  # the app running: check reads the live files in place
        "check <= 1.5x the raw read; every command < 400 MB at 1,000,000",
    ),
    ("bench_startup.py", (), "--version and --help <= 0.15 s CPU; check (100 points) <= 0.5 s"),
    (
        "bench_rpo.py",
        (),
        "a lost disk loses <= 10 s of memories; bytes shipped <= 2x the WAL written and < 2% of "
        "a full snapshot an hour (issue 27)",
    ),
    ("bench_restore_at.py", (), "restore --at <= 3x restoring the newest snapshot (issue 27)"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, metavar="SCRIPT")
    args = parser.parse_args()
    missed: list[str] = []
    for script, arguments, targets in SCRIPTS:
        if args.only is not None and script not in args.only:
            continue
        path = HERE / script
        if not path.exists():
            missed.append(f"{script}: not written yet ({targets})")
            continue
        print(f"== {script} {' '.join(arguments)}  [{targets}]", flush=True)
        clock = time.monotonic()
        code = subprocess.run([sys.executable, str(path), *arguments], check=False).returncode
        print(f"== {script}: exit {code} after {time.monotonic() - clock:.0f} s", flush=True)
        if code != 0:
            missed.append(f"{script}: exit {code} ({targets})")
    for line in missed:
        print(f"MISSED {line}", file=sys.stderr)
    if not missed:
        print("every target met")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
