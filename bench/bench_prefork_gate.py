"""What the cross-process write gate costs a prefork app's writes, idle and during a snapshot.

Usage: ``.venv/bin/python bench/bench_prefork_gate.py [--seconds 6] [--snapshots 3]
[--workers 1,4] [--out bench/out]``

Starts its own PostgreSQL 16 with pgvector (``memsync.demo.postgres``, as the tests do), builds a
deployment of 200 memories through mem0 (the hash embedder), and for each worker count runs a
real gunicorn (``--preload``; tests/helpers/prefork_app.py) twice: without the agent (the
baseline: mem0's own cost) and with it attached in the master before the fork (every worker's
writes pass the cross-process gate). Each worker adds a memory every 10 ms and logs each write's
start and end. Measured per run:

* **idle**: the writes that start in a ``--seconds`` window with no memsync running;
* **during snapshot**: the writes that start while ``memsync snapshot create`` runs (``--snapshots``
  times back to back; with the agent the capture is quiesced, so a write that arrives during
  the pause waits for the resume; without it, create re-captures until the pair settles).

Prints p50/p99/max write latency (ms) and counts per case, and the creates' wall time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from memsync.demo import deployment as build  # noqa: E402
from memsync.demo import postgres  # noqa: E402
from tests.helpers.prefork import PreforkServer  # noqa: E402


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _latencies(server: PreforkServer, windows: list[tuple[float, float]]) -> list[float]:
    return [
        (end - start) * 1000
        for pid in server.writer_pids()
        for start, end in server.writes(pid)
        if any(a <= start < b for a, b in windows)
    ]


def run(root: Path, workers: int, attach: bool, seconds: float, snapshots: int) -> dict[str, Any]:
    sock = root / "run" / "memsync-agent.sock"
    tmp = root / f"run-{workers}-{int(attach)}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = build.Paths(root).config
    with PreforkServer(
        "gunicorn", root, sock, tmp, workers=workers, attach=attach, interval_s=0.01
    ) as server:
        server.wait_writing(timeout_s=60)
        idle_from = time.monotonic()
        time.sleep(seconds)
        idle = [(idle_from, time.monotonic())]
        windows, creates, quiesced = [], [], []
        for _ in range(snapshots):
            started = time.monotonic()
            done = subprocess.run(
                [str(REPO / ".venv/bin/memsync"), "snapshot", "create", "--json",
                 "--config", str(config)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            windows.append((started, time.monotonic()))
            creates.append(windows[-1][1] - started)
            try:
                report = json.loads(done.stdout)
            except ValueError:
                report = {"quiesced": f"exit {done.returncode}: {done.stderr.strip()[-200:]}"}
            quiesced.append(report.get("quiesced"))
            if report.get("not_quiesced"):
                print(f"  not quiesced: {report['not_quiesced']}", file=sys.stderr)
        time.sleep(0.2)  # let the last held writes finish and log
        errors = server.errors()
        figures = {"idle": _latencies(server, idle), "snapshot": _latencies(server, windows)}
    return {"figures": figures, "creates": creates, "quiesced": quiesced, "errors": len(errors)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--snapshots", type=int, default=3)
    parser.add_argument("--workers", default="1,4")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    args = parser.parse_args()
    root = (args.out / "prefork-gate").resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    base, pg = postgres.start(root / "pg")
    try:
        paths = build.Paths(root / "dep", pg_url=postgres.fresh_database(base, "bench"))
        build.write_memsync_config(
            paths, embedder="memsync_hash",
            extra=f'\n[app]\nagent_socket = "{paths.root / "run" / "memsync-agent.sock"}"\n',
        )  # fmt: skip
        memory = build.open_memory(paths, embedder="memsync_hash")
        build.seed(memory, 200)
        build.close_memory(memory)
        print(
            "| workers | gate | case | writes | p50 ms | p99 ms | max ms | creates s | quiesced |"
        )
        print("|---:|---|---|---:|---:|---:|---:|---|---|")
        for workers in (int(w) for w in args.workers.split(",")):
            for attach in (False, True):
                result = run(paths.root, workers, attach, args.seconds, args.snapshots)
                for case, values in result["figures"].items():
                    creates = (
                        ", ".join(f"{c:.2f}" for c in result["creates"])
                        if case == "snapshot" else ""
                    )  # fmt: skip
                    quiesced = ", ".join(str(q) for q in result["quiesced"]) if creates else ""
                    print(
                        f"| {workers} | {'on' if attach else 'off'} | {case} | {len(values)} | "
                        f"{statistics.median(values):.1f} | {_percentile(values, 0.99):.1f} | "
                        f"{max(values):.1f} | {creates} | {quiesced} |",
                        flush=True,
                    )
                if result["errors"]:
                    print(f"  {result['errors']} failed writes", flush=True)
    finally:
        postgres.stop(pg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
