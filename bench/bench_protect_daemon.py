"""``memsync protect`` under the daemon: the app's write latency with and without it, and the lag.

Usage::

    .venv/bin/python bench/bench_protect_daemon.py [--size 20000] [--seconds 60] [--pairs 3]

Interleaved pairs on copies of one generated deployment (``app_deployment``; both files in WAL
mode in both runs): the app (``app_process.py``: mem0ai's ``Memory.add`` every 50 ms) alone,
then with ``[protect]`` (a directory replica), ``memsync protect`` and ``memsync daemon``
running Litestream (``make tools``). The "with" run samples ``memsync protect --status --json``
every 5 s while the app writes (the largest lag of any file). Figures: the medians of the
per-pair ratios of the app's p50 and p99 write latency (wall: the app and Litestream are two
processes), failed writes, the largest lag seen. Exits 1 when a target is missed: p50 ratio over
1.2, a failed app write, or a lag sample over 10 s.
"""

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
import app_deployment  # noqa: E402

from tests.helpers import litestream  # noqa: E402

OUT = REPO / "bench" / "out"
PY = sys.executable


def memsync(config: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "memsync", "--config", str(config), *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )


def wait_protected(config: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = memsync(config, "protect", "--status", "--json")
        if done.returncode == 0:
            return
        time.sleep(0.5)
    raise SystemExit(f"never protected: {done.stdout[-2000:]} {done.stderr[-2000:]}")


def run(label: str, protect: bool, template: Path, seconds: float) -> dict:
    root = app_deployment.fresh_copy(template, OUT / f"pd-{label}")
    for db in (root / "history.db", app_deployment.storage_path(root)):
        connection = sqlite3.connect(db)
        assert connection.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        connection.close()
    section = ""
    if protect:
        binary = litestream.ensure()
        section = f'\n[protect]\nlitestream = "{binary}"\ndirectory = "{root / "replica"}"\n'
    config = app_deployment.write_config(root, app=section)
    daemon = None
    if protect:
        done = memsync(config, "protect", "--json")
        assert done.returncode == 0, done.stderr
        log = (root / "daemon.log").open("w")
        daemon = subprocess.Popen(
            [PY, "-m", "memsync", "--config", str(config), "daemon", "--log-level", "info"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env={**os.environ},
        )
        wait_protected(config)
    start = [PY, str(REPO / "bench/appctl.py")]
    subprocess.run([*start, "start", str(root), "--interval", "0.05"], check=True)
    began = time.monotonic()
    lags = []
    while time.monotonic() - began < seconds:
        time.sleep(5)
        if protect:
            status = json.loads(memsync(config, "protect", "--status", "--json").stdout)
            lags.append(max(f["lag_s"] or 0.0 for f in status["files"]))
    subprocess.run([*start, "stop", str(root)], check=True)
    if daemon is not None:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=120)
    records = json.loads(next((root / "records").glob("records-*.json")).read_text())
    latencies = sorted(w[1] for w in records["writes"])
    return {
        "writes": len(latencies),
        "failed": sum(1 for w in records["writes"] if not w[2]),
        "p50_ms": latencies[len(latencies) // 2],
        "p99_ms": latencies[int(len(latencies) * 0.99)],
        "max_lag_s": max(lags, default=None),
    }


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    template = app_deployment.template(OUT, args.size, 0)
    pairs = []
    for n in range(args.pairs):
        plain = run(f"plain-{n}", False, template, args.seconds)
        guarded = run(f"protected-{n}", True, template, args.seconds)
        pairs.append((plain, guarded))
        print(json.dumps({"pair": n, "without": plain, "with": guarded}), file=sys.stderr)
    p50 = statistics.median(g["p50_ms"] / p["p50_ms"] for p, g in pairs)
    p99 = statistics.median(g["p99_ms"] / p["p99_ms"] for p, g in pairs)
    failed = sum(p["failed"] + g["failed"] for p, g in pairs)
    lag = max(g["max_lag_s"] or 0.0 for _, g in pairs)
    figures = {
        "size": args.size,
        "pairs": args.pairs,
        "p50 ms without / with (medians)": (
            statistics.median(p["p50_ms"] for p, _ in pairs),
            statistics.median(g["p50_ms"] for _, g in pairs),
        ),
        "p50 ratio (median of pairs)": round(p50, 3),
        "p99 ratio (median of pairs)": round(p99, 3),
        "failed writes": failed,
        "largest lag sampled s": lag,
    }
    print(json.dumps(figures, indent=1))
    missed = [
        f"{name}: {value} (target {target})"
        for name, value, target, bad in [
            ("p50 ratio", round(p50, 3), "<= 1.2", p50 > 1.2),
            ("failed writes", failed, "0", failed > 0),
            ("largest lag", lag, "<= 10 s", lag > 10),
        ]
        if bad
    ]
    for line in missed:
        print(f"target missed: {line}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
