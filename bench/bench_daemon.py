"""The daemon at rest: CPU time and RSS while it waits for its next job; and a job's CPU.

Usage: ``python bench/bench_daemon.py [--seconds 600]``;
``python bench/bench_daemon.py --job-runs 15`` (a job's CPU only, about a minute).

Starts ``memsync daemon`` on a small generated deployment whose only jobs are due far in the
future (a catch-up run happens first), lets it idle, and samples its CPU time (user+system) and
RSS with psutil. Baseline in the same run: a bare ``python -c "import time; time.sleep(...)"``.

A job's CPU (``--job-runs N``): the ``check`` job on a 100-point embedded store, run by
``memsync.daemon.runner.run_child`` from this process once it has imported what the daemon has
loaded when it starts a job (``memsync.cli.daemon``): in a fork (the daemon's way since issue
26) and, interleaved, in a new interpreter (before); each the child's CPU from
``RUSAGE_CHILDREN``, medians of N pairs and of the per-pair ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from memsync.demo.bulk import generate

OUT = Path(__file__).resolve().parent / "out"


def measure(argv: list[str], seconds: float, settle_s: float) -> tuple[float, float]:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    handle = psutil.Process(process.pid)
    time.sleep(settle_s)  # start-up and the catch-up jobs are not idle time
    start = handle.cpu_times()
    time.sleep(seconds)
    end = handle.cpu_times()
    rss = handle.memory_info().rss / 2**20
    process.terminate()
    process.wait(timeout=200)
    return (end.user + end.system) - (start.user + start.system), rss


def job_cpu(config: Path, runs: int) -> tuple[str, float, float, float, float | None]:
    """The check job's CPU in a fork of a process that loaded what the daemon loads, and in a
    new interpreter (the baseline), interleaved."""
    import memsync.cli.daemon  # noqa: F401 - what the daemon has loaded when it runs a job
    from memsync.cli.daemon import FORKED as entry
    from memsync.daemon.runner import run_child

    job = ["check", "--json", "--config", str(config)]
    env = dict(os.environ)
    kinds: list[tuple[str, str]] = []

    def job_in(fork: bool) -> Callable[[], object]:
        def run() -> object:
            child = run_child(job, env, stop=None, new_session=True, entry=entry if fork else None)
            kinds.append((child.child, str(child.exit_code)))
            return child

        return run

    def cpu_of(run: Callable[[], object]) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    pairs = [(cpu_of(job_in(False)), cpu_of(job_in(True))) for _ in range(runs)]
    if set(kinds) != {("interpreter", "0"), ("fork", "0")}:
        raise SystemExit(f"the job did not run as expected: {sorted(set(kinds))}")
    spawned = statistics.median(b for b, _ in pairs)
    forked = statistics.median(f for _, f in pairs)
    ratio = statistics.median(f / b for b, f in pairs)
    return ("daemon job: check, forked", forked, spawned, ratio, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--job-runs", type=int, default=0, help="measure a job's CPU instead")
    args = parser.parse_args()
    if args.job_runs:
        config = OUT / "startup-100" / "memsync.toml"
        if not config.exists():
            generate(config.parent, 100)
        name, forked, spawned, ratio, _ = job_cpu(config, args.job_runs)
        print(f"{'job':<28} {'fork CPU s':>10} {'interpreter CPU s':>17} {'fork / interp.':>14}")
        print(f"{name:<28} {forked:>10.3f} {spawned:>17.3f} {ratio:>14.2f}")
        return 0
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        config = generate(root, 1000)
        config.write_text(
            config.read_text()
            + f'\n[snapshot]\ndirectory = "{root / "snapshots"}"\nkeep_last = 1\n'
            '\n[daemon]\ncheck_every = "1d"\nsnapshot_every = "1d"\n'
        )
        daemon_cpu, daemon_rss = measure(
            [sys.executable, "-m", "memsync", "daemon", "--config", str(config)],
            args.seconds,
            settle_s=10,
        )
        idle_cpu, idle_rss = measure(
            [sys.executable, "-c", f"import time; time.sleep({args.seconds + 60})"],
            args.seconds,
            settle_s=1,
        )
    print(f"{'process':<22} {'idle s':>7} {'CPU s':>7} {'RSS MB':>7}")
    print(f"{'memsync daemon':<22} {args.seconds:>7.0f} {daemon_cpu:>7.3f} {daemon_rss:>7.1f}")
    print(f"{'python sleeping':<22} {args.seconds:>7.0f} {idle_cpu:>7.3f} {idle_rss:>7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
