"""The daemon at rest: CPU time and RSS while it waits for its next job.

Usage: ``python bench/bench_daemon.py [--seconds 600]``

Starts ``memsync daemon`` on a small generated deployment whose only jobs are due far in the
future (a catch-up run happens first), lets it idle, and samples its CPU time (user+system) and
RSS with psutil. Baseline in the same run: a bare ``python -c "import time; time.sleep(...)"``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from memsync.demo.bulk import generate


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    args = parser.parse_args()
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
