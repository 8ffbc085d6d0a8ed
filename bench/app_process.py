"""The benchmark's app: one ``mem0.Memory`` on a generated deployment, one write every interval.

Usage::

    python bench/app_process.py ROOT [--agent SOCKET] [--interval 0.05] [--acks FILE]

Builds ``mem0.Memory`` on the deployment at ROOT (``app_deployment.mem0_config``: embedded
Qdrant, the ``memsync_hash`` embedder), attaches ``memsync.agent`` when ``--agent`` is given,
writes ``ROOT/records/ready-<pid>.json`` (``{"pid", "ready_s"}``: seconds from process start to
the Memory being built) and prints ``ready <pid>``. Then, until SIGTERM/SIGINT, it adds one
memory (``infer=False``, user ``bench-app``) every ``--interval`` seconds (sleep after each
write) and records each write's start (Unix seconds), latency (ms) and outcome.

At exit it closes the Memory and writes ``ROOT/records/records-<pid>.json``::

    {"pid": n, "ready_s": x, "writes": [[start_unix_s, latency_ms, ok], ...],
     "errors": [[unix_s, "message"], ...], "agent_log": [[unix_s, "message"], ...]}

A write failed (``ok`` false) when ``add`` raised or mem0's loggers logged an ERROR during it
(mem0ai 2.2.1 only logs some failed history writes); ``agent_log`` keeps the agent's warnings and its pause/resume lines
("app writes resumed after X s"), not one line per request.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import app_deployment  # noqa: E402


class _Recorder(logging.Handler):
    def __init__(self, level: int) -> None:
        super().__init__(level=level)
        self.lines: list[list] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.WARNING or "paused" in message or "resumed" in message:
            self.lines.append([record.created, message])


def build_memory(root: Path):
    """``mem0.Memory`` for the deployment at ``root``, as an app builds it (holds the store)."""
    os.environ["MEM0_DIR"] = str((root / "mem0").resolve())
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    logging.getLogger("mem0").setLevel(logging.ERROR)
    from mem0 import Memory

    import memsync.demo.providers  # noqa: F401 - registers the offline providers

    return Memory.from_config(app_deployment.mem0_config(root))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--agent", type=Path, default=None)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--acks", type=Path, default=None)
    args = parser.parse_args()
    acks = None if args.acks is None else args.acks.open("a", encoding="utf-8")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    errors = _Recorder(logging.ERROR)
    agent_log = _Recorder(logging.INFO)
    memory = build_memory(args.root)
    logging.getLogger("mem0").addHandler(errors)
    if args.agent is not None:
        from memsync.agent import attach

        logging.getLogger("memsync.agent").setLevel(logging.INFO)
        logging.getLogger("memsync.agent").addHandler(agent_log)
        attach(memory, args.agent)
    pid = os.getpid()
    ready_s = time.time() - psutil.Process(pid).create_time()
    records = args.root / "records"
    records.mkdir(exist_ok=True)
    ready = records / f"ready-{pid}.json"
    ready.with_suffix(".tmp").write_text(json.dumps({"pid": pid, "ready_s": round(ready_s, 3)}))
    ready.with_suffix(".tmp").replace(ready)
    print(f"ready {pid}", flush=True)
    writes: list[list] = []
    count = 0
    while not stop:
        started = time.time()
        clock = time.perf_counter()
        logged = len(errors.lines)
        ok = True
        try:
            added = memory.add(
                f"bench app fact {count} from pid {pid}", user_id="bench-app", infer=False
            )
            if acks is not None and len(errors.lines) == logged:
                acks.write("".join(f"{time.time():.6f} {r['id']}\n" for r in added["results"]))
                acks.flush()
        except Exception as error:  # noqa: BLE001 - every failure is what we count
            ok = False
            errors.lines.append([started, f"{type(error).__name__}: {error}"])
        ok = ok and len(errors.lines) == logged
        writes.append([round(started, 6), round((time.perf_counter() - clock) * 1000, 3), ok])
        count += 1
        time.sleep(args.interval)
    memory.close()
    memory.vector_store.client.close()
    document = {
        "pid": pid,
        "ready_s": round(ready_s, 3),
        "writes": writes,
        "errors": errors.lines,
        "agent_log": agent_log.lines,
    }
    final = records / f"records-{pid}.json"
    final.with_suffix(".tmp").write_text(json.dumps(document))
    final.with_suffix(".tmp").replace(final)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
