"""Benchmark what memsync's maintenance costs a running app: write latency, pauses, downtime.

Usage: ``python bench/bench_app.py [--sizes 20000,100000] [--out bench/out] [--gap 4]
[--snapshots 3] [--expired 1000] [--scenarios agent,window,wal]``;
``python bench/bench_app.py --report RUN.json [RUN.json ...]`` re-prints saved runs' tables and,
for several, each cell's spread across them.

For each size a template deployment is generated once (``app_deployment``: mem0's on-disk shape,
384 dims, ``--expired`` memories with an expiration date in the past); every scenario runs on a
fresh copy with a real app process (``app_process.py``: one ``mem0.Memory`` for life, the hash
embedder, one ``add`` every 50 ms, each write's start and latency recorded), started and
stopped by ``appctl.py`` as a service manager would. In each scenario the app first writes
undisturbed for ``--gap`` seconds before every memsync command and once more at the end: those
gaps are the **baseline** (memsync idle), interleaved with the commands so both see the same
machine load.

* ``agent``: the app serves ``memsync.agent``, rollback journal; ``memsync snapshot create`` x
  ``--snapshots`` (quiesced: app writes paused for the capture), then ``memsync prune`` of the
  expired memories (route ``agent``).
* ``window``: no agent, rollback journal; snapshot create x N (not quiesced), then ``memsync
  prune`` through the window route (``[app] stop_command``/``start_command`` = ``appctl.py
  stop|start``): ``downtime_s`` from its JSON, the app's time to ready and to its first write,
  and the gap from the old app's last completed write to the new one's first.
* ``wal``: no agent, both files switched to WAL by ``memsync tune --wal`` (app stopped);
  snapshot create x N: failed writes and the capture's longest read transaction (manifest
  ``capture.longest_read_s``).

A write belongs to a phase when it starts while the phase's command runs (start to exit).
Ratios are against the baseline of the same scenario in the same run. Prints tables; writes
every figure to ``OUT/bench_app-<sizes>.json`` and each app's raw write records to ``OUT/raw-*``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import app_deployment  # noqa: E402

REPO = HERE.parent
ENV = {k: v for k, v in os.environ.items() if k != "MEMSYNC_CONFIG"} | {"PYTHONPATH": str(REPO)}
# Not measured: the app's first write after ready, which grows qdrant-client's in-memory arrays
# (numpy resize of every vector: 0.1-0.6 s at 20,000 points, 1.6-4.2 s at 100,000).
WARM_S = 5.0
APPCTL = [sys.executable, str(HERE / "appctl.py")]


def memsync(config: Path, *args: str) -> dict[str, Any]:
    """Run ``memsync ARGS --json``; return its document, exit code, logs and wall times."""
    argv = [sys.executable, "-m", "memsync", *args, "--json", "--config", str(config)]
    argv += ["--log-level", "info", "--log-format", "json"]
    return _timed(argv)


def _timed(argv: list[str]) -> dict[str, Any]:
    started = time.time()
    result = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=REPO)
    ended = time.time()
    logs = []
    for line in result.stderr.splitlines():
        try:
            logs.append(json.loads(line))
        except json.JSONDecodeError:
            logs.append({"event": "text", "line": line})
    try:
        document = json.loads(result.stdout) if result.stdout.strip() else None
    except json.JSONDecodeError:  # the -c child's last line (structlog unconfigured: stdout)
        last = [line for line in result.stdout.splitlines() if line.startswith("{")]
        document = json.loads(last[-1]) if last else {"stdout": result.stdout[-2000:]}
    if document is None or result.returncode not in (0, 5):
        print(f"{argv[2:4]} exited {result.returncode}: {result.stderr[-3000:]}", file=sys.stderr)
    return {"t0": started, "t1": ended, "code": result.returncode, "doc": document, "logs": logs}


def appctl(action: str, root: Path, *extra: str) -> float:
    """Run ``appctl.py ACTION ROOT``; return its wall seconds (raises when it fails)."""
    started = time.time()
    subprocess.run([*APPCTL, action, str(root), *extra], check=True, env=ENV, cwd=REPO)
    return time.time() - started


def records(root: Path) -> list[dict[str, Any]]:
    """Every app process's records of this copy, oldest first."""
    found = [json.loads(p.read_text()) for p in (root / "records").glob("records-*.json")]
    return sorted(found, key=lambda r: r["writes"][0][0] if r["writes"] else 0)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def window_stats(writes: list[list], spans: list[tuple[float, float]]) -> dict[str, Any]:
    """Latency figures of the writes that start within any of ``spans`` (Unix seconds)."""
    chosen = [w for w in writes if any(t0 <= w[0] < t1 for t0, t1 in spans)]

    latencies = [w[1] for w in chosen]
    return {
        "writes": len(chosen),
        "failures": sum(1 for w in chosen if not w[2]),
        "p50_ms": round(percentile(latencies, 0.5), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies, default=0.0), 2),
        "span_s": round(sum(t1 - t0 for t0, t1 in spans), 2),
    }


def idle(seconds: float) -> tuple[float, float]:
    """Let the app write undisturbed for ``seconds``; return the span."""
    started = time.time()
    time.sleep(seconds)
    return started, time.time()


def snapshot_create(config: Path) -> dict[str, Any]:
    """``snapshot create`` with its manifest's ``capture``; the snapshot is removed after."""
    run = memsync(config, "snapshot", "create")
    manifest = json.loads((Path(run["doc"]["path"]) / "manifest.json").read_text())
    run["capture"] = manifest["capture"]
    shutil.rmtree(run["doc"]["path"])  # keep the disk free; the figures are taken
    return run


def snapshot_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of a series of snapshot creates."""
    events = [e for r in runs for e in r["logs"]]
    return {
        "codes": [r["code"] for r in runs],
        "quiesced": [r["doc"].get("quiesced") for r in runs],
        "wall_s": [round(r["t1"] - r["t0"], 2) for r in runs],
        "longest_read_s": [r["capture"].get("longest_read_s") for r in runs],
        "held_s": [e.get("held_s") for e in events if e.get("event") == "capture_quiesced"],
        "recaptures": sum(1 for e in events if e.get("event") == "snapshot_recapture"),
        "unsettled": [len(r["doc"]["check"].get("unsettled") or []) for r in runs],
        "near_busy_timeout_warnings": sum(
            1 for e in events if e.get("event") == "capture_near_busy_timeout"
        ),
    }


def prune_summary(run: dict[str, Any]) -> dict[str, Any]:
    """The figures of one ``memsync prune``."""
    doc = run["doc"] or {}
    deleted = doc.get("deleted")
    window = [e for e in run["logs"] if e.get("event") == "window_closed"]
    return {
        "code": run["code"],
        "wall_s": round(run["t1"] - run["t0"], 2),
        "route": doc.get("route"),
        "deleted": deleted if isinstance(deleted, int) else len(deleted or []),
        "downtime_s": doc.get("downtime_s"),
        "window_closed": window[-1] if window else None,
    }


def prune(config: Path) -> dict[str, Any]:
    """``memsync prune`` (the expired memories; the route is memsync's choice)."""
    return memsync(config, "prune")


def scenario(name: str, template: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One scenario on a fresh copy: baseline gaps interleaved with memsync commands.

    ``agent``: app with its agent, rollback journal; snapshots (quiesced), prune (agent).
    ``window``: no agent, rollback journal; snapshots, prune (window route when available).
    ``wal``: no agent, WAL; snapshots.
    """
    root = app_deployment.fresh_copy(template, out / f"run-{name}")
    app_section, start = "", []
    if name == "agent":
        start = ["--agent", str(root / "memsync-agent.sock")]
    elif name == "window":
        stop_argv = [*APPCTL, "stop", str(root)]
        start_argv = [*APPCTL, "start", str(root)]
        app_section = (
            f"\n[app]\nstop_command = {json.dumps(stop_argv)}\n"
            f"start_command = {json.dumps(start_argv)}\nmax_downtime_s = 600.0\n"
        )
    config = app_deployment.write_config(root, app_section)
    result: dict[str, Any] = {"load_before": os.getloadavg()}
    if name == "wal":  # while the app is stopped: the direct route
        tuned = memsync(config, "tune", "--wal")
        result["tune"] = {"code": tuned["code"], "route": (tuned["doc"] or {}).get("route")}
    result["journal"] = app_deployment.journal_modes(root)
    appctl("start", root, *start)
    time.sleep(WARM_S)
    spans: dict[str, list[tuple[float, float]]] = {"idle": [], "snapshot": []}
    runs = []
    for _ in range(args.snapshots):
        spans["idle"].append(idle(args.gap))
        runs.append(snapshot_create(config))
        spans["snapshot"].append((runs[-1]["t0"], runs[-1]["t1"]))
    result["snapshot"] = snapshot_summary(runs)
    if name in ("agent", "window"):
        spans["idle"].append(idle(args.gap))
        pruned = prune(config)
        spans["prune"] = [(pruned["t0"], pruned["t1"])]
        result["prune"] = prune_summary(pruned)
    spans["idle"].append(idle(args.gap))
    appctl("stop", root)
    result["load_after"] = os.getloadavg()
    apps = records(root)
    writes = [w for a in apps for w in a["writes"]]
    result["ready_s"] = [a["ready_s"] for a in apps]
    result["phases"] = {phase: window_stats(writes, s) for phase, s in spans.items()}
    result["spans"] = spans
    result["app_held_s"] = [
        float(line.rsplit(" after ", 1)[1].split()[0])
        for a in apps
        for _, line in a["agent_log"]
        if "resumed after" in line
    ]
    result["first_write_s"] = [round(a["writes"][0][1] / 1000, 2) for a in apps]
    if "prune" in result and len(apps) == 2:  # the window restarted the app
        last_end = max(w[0] + w[1] / 1000 for w in apps[0]["writes"])
        first = apps[1]["writes"][0]
        result["prune"]["write_gap_s"] = round(first[0] + first[1] / 1000 - last_end, 2)
    result["writes_total"] = len(writes)
    result["failures_total"] = sum(1 for w in writes if not w[2])
    result["errors"] = [e for a in apps for e in a["errors"]][:5]
    result["journal_after"] = app_deployment.journal_modes(root)
    raw = out / f"raw-{template.name}-{name}"
    shutil.rmtree(raw, ignore_errors=True)
    shutil.copytree(root / "records", raw)
    shutil.rmtree(root)
    return result


def machine() -> dict[str, Any]:
    """Facts about this machine and the versions measured."""
    from importlib import metadata

    memory_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(memory_kb / 1024**2, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "mem0ai": metadata.version("mem0ai"),
        "qdrant_client": metadata.version("qdrant-client"),
        "kernel": platform.release(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--out", default=str(HERE / "out"))
    parser.add_argument(
        "--gap", type=float, default=4.0, help="baseline seconds before each command"
    )
    parser.add_argument("--snapshots", type=int, default=3)
    parser.add_argument("--expired", type=int, default=1000)
    parser.add_argument("--scenarios", default="agent,window,wal")
    parser.add_argument(
        "--report", type=Path, nargs="+", help="print the tables of saved figures files (runs)"
    )
    args = parser.parse_args()
    if args.report:
        runs = [json.loads(path.read_text()) for path in args.report]
        for run in runs:
            report(run)
        if len(runs) > 1:
            across(runs)
        return 0
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    results: dict[str, Any] = {"machine": machine(), "sizes": {}}
    for size in [int(s) for s in args.sizes.split(",")]:
        template = app_deployment.template(out, size, args.expired)
        results["sizes"][size] = {
            name: scenario(name, template, out, args) for name in args.scenarios.split(",")
        }
        print(f"{size:,} points done at {time.time() - started:.0f} s", file=sys.stderr)
    results["total_s"] = round(time.time() - started, 1)
    path = out / f"bench_app-{args.sizes.replace(',', '_')}.json"
    path.write_text(json.dumps(results, indent=1))
    report(results)
    print(f"figures: {path}; whole run {results['total_s']} s")
    return 0


def report(results: dict[str, Any]) -> None:
    """Print the tables of the README from ``results``."""
    print(json.dumps(results["machine"]))
    print(
        f"{'points':>8} {'scenario':<9} {'phase':<9} {'writes':>6} {'fail':>4} {'p50 ms':>7} "
        f"{'p99 ms':>7} {'max ms':>8} {'p50/base':>8} {'p99/base':>8}"
    )
    for size, by in results["sizes"].items():
        for name, result in by.items():
            base = result["phases"]["idle"]
            for phase, stats in result["phases"].items():
                print(
                    f"{int(size):>8,} {name:<9} {phase:<9} {stats['writes']:>6} "
                    f"{stats['failures']:>4} {stats['p50_ms']:>7.2f} {stats['p99_ms']:>7.2f} "
                    f"{stats['max_ms']:>8.1f} {stats['p50_ms'] / base['p50_ms']:>8.2f} "
                    f"{stats['p99_ms'] / base['p99_ms']:>8.2f}"
                )
    print(
        f"\n{'points':>8} {'scenario':<9} {'journal':<8} {'quiesced':<8} {'create s':>14} "
        f"{'longest read s':>17} {'writes held s':>17} {'recaptures':>10} {'unsettled':>9} "
        f"{'failed writes':>13}"
    )
    for size, by in results["sizes"].items():
        for name, result in by.items():
            snap = result["snapshot"]
            print(
                f"{int(size):>8,} {name:<9} {result['journal']['history.db']:<8} "
                f"{str(all(snap['quiesced'])):<8} {_spread(snap['wall_s']):>14} "
                f"{_spread(snap['longest_read_s']):>17} {_spread(snap['held_s']):>17} "
                f"{snap['recaptures']:>10} {sum(snap['unsettled']):>9} "
                f"{result['failures_total']:>6} of {result['writes_total']:<5}"
            )
    print(
        f"\n{'points':>8} {'route':<7} {'deleted':>7} {'prune s':>8} {'downtime s':>10} "
        f"{'write gap s':>11} {'app ready + first write s':>26}"
    )
    for size, by in results["sizes"].items():
        for result in by.values():
            if "prune" not in result:
                continue
            prune = result["prune"]
            ready = " / ".join(
                f"{r:.1f}+{w:.1f}"
                for r, w in zip(result["ready_s"], result["first_write_s"], strict=True)
            )
            print(
                f"{int(size):>8,} {prune['route']:<7} {prune['deleted']:>7} "
                f"{prune['wall_s']:>8.1f} {prune['downtime_s'] or 0:>10.1f} "
                f"{prune.get('write_gap_s') or 0:>11.1f} {ready:>26}"
            )


def across(runs: list[dict[str, Any]]) -> None:
    """Print each cell's ratios to its baseline as ``min-max`` over several runs."""
    print(f"\nacross {len(runs)} runs (min-max)")
    print(
        f"{'points':>8} {'scenario':<9} {'phase':<9} {'base p50 ms':>12} {'base p99 ms':>12} "
        f"{'p50/base':>10} {'p99/base':>11} {'max ms':>11} {'failed':>6}"
    )
    for size, by in runs[0]["sizes"].items():
        for name, result in by.items():
            for phase in result["phases"]:
                cells = [run["sizes"][size][name]["phases"] for run in runs]
                base = [c["idle"] for c in cells]
                this = [c[phase] for c in cells]
                p50 = [t["p50_ms"] / b["p50_ms"] for t, b in zip(this, base, strict=True)]
                p99 = [t["p99_ms"] / b["p99_ms"] for t, b in zip(this, base, strict=True)]
                print(
                    f"{int(size):>8,} {name:<9} {phase:<9} "
                    f"{_spread([b['p50_ms'] for b in base], 1):>12} "
                    f"{_spread([b['p99_ms'] for b in base], 0):>12} {_spread(p50, 1):>10} "
                    f"{_spread(p99, 1):>11} {_spread([t['max_ms'] for t in this], 0):>11} "
                    f"{sum(t['failures'] for t in this):>6}"
                )


def _spread(values: list[float], digits: int = 2) -> str:
    """``min-max`` of ``values`` (``digits`` decimals), or ``-``."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}-{high}"


if __name__ == "__main__":
    raise SystemExit(main())
