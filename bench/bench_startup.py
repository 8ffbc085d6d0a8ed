"""Start-up (issue 26): the CPU of ``--version``, ``--help`` and ``check`` on a small store, and of
a daemon job in a new interpreter against a fork of the daemon (``bench_daemon.job_cpu``).

Usage: ``python bench/bench_startup.py [--runs 15]``; exits 1 when a target is missed.

Every figure is the CPU (user + system) of a child process, from ``RUSAGE_CHILDREN``, median of
``--runs``; each command runs interleaved with its baseline (``python -c pass`` for the
commands, the job in a new interpreter for the forked job), and ratios are medians of the
per-pair ratios, so both sides of a pair see the same machine. The job is ``check`` on the same
100-point embedded store (``bench_daemon.py --job-runs``).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
TARGETS = {"--version": 0.15, "--help": 0.15, "check (100 points)": 0.5}  # CPU seconds


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_of(run: Callable[[], object]) -> float:
    """CPU seconds of the child processes ``run`` starts and waits for."""
    before = children_cpu()
    run()
    return children_cpu() - before


def command(*argv: str) -> Callable[[], object]:
    def run() -> object:
        return subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )

    return run


def deployment() -> Path:
    """A 100-point embedded deployment (``memsync.demo.bulk``), generated once under bench/out/."""
    from memsync.demo.bulk import generate

    root = OUT / "startup-100"
    config = root / "memsync.toml"
    if not config.exists():
        generate(root, 100)
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--no-job", action="store_true", help="the commands only (e.g. on code before the forks)"
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter of the commands, e.g. build/wheel-venv/bin/python (the installed "
        "wheel, no extras: no rich, which structlog imports when it is present)",
    )
    args = parser.parse_args()
    config = deployment()
    python = args.python
    memsync = [python, "-m", "memsync"]
    baseline = command(python, "-c", "pass")
    cases = {
        "--version": command(*memsync, "--version"),
        "--help": command(*memsync, "--help"),
        "check (100 points)": command(*memsync, "--config", str(config), "check", "--json"),
    }
    rows: list[tuple[str, float, float, float, float | None]] = []
    for name, case in cases.items():
        pairs = [(cpu_of(baseline), cpu_of(case)) for _ in range(args.runs)]
        base = statistics.median(b for b, _ in pairs)
        cpu = statistics.median(c for _, c in pairs)
        ratio = statistics.median(c / b for b, c in pairs)
        rows.append((name, cpu, base, ratio, TARGETS[name]))

    if not args.no_job:
        from bench_daemon import job_cpu  # this directory, as the script runs

        rows.append(job_cpu(config, args.runs))
    print(f"{'measure':<28} {'CPU s':>7} {'baseline s':>10} {'ratio':>7} {'target s':>9}  met")
    missed = []
    for name, cpu, base, ratio, target in rows:
        met = "" if target is None else ("yes" if cpu <= target else "NO")
        shown = "" if target is None else f"{target:.2f}"
        print(f"{name:<28} {cpu:>7.3f} {base:>10.3f} {ratio:>7.2f} {shown:>9}  {met}")
        if met == "NO":
            missed.append(f"{name}: {cpu:.3f} s CPU against a target of {target} s")
    print(
        "baselines: python -c pass for the commands; the same job in a new interpreter for the fork"
    )
    for line in missed:
        print(f"MISSED {line}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
