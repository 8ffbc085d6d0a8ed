"""What the agent's write gate costs each of the app's Memory calls.

Usage: ``.venv/bin/python bench/bench_gate.py [--calls 1000000]``

Also with the gate shared across processes (``memsync.agent.shared``: two ``flock`` calls per
write, in a temporary directory), as every write pays it since issue 23.

Baseline, in the same run: the same no-op method called without the gate. Prints the time per
call (microseconds) both ways, their difference, and the ratio; with 4 threads calling at once
too (the gate's lock contended). No memsync code is mocked: ``memsync.agent.gate`` wraps a
plain object's methods exactly as ``attach`` wraps ``mem0.Memory``'s.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memsync.agent.gate import WriteGate, gated
from memsync.agent.shared import SharedGate


class _Memory:
    def add(self) -> int:
        return 1


def _per_call_us(call: Callable[[], object], calls: int, threads: int) -> float:
    def work() -> None:
        for _ in range(calls // threads):
            call()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return (time.perf_counter() - started) / calls * 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1_000_000)
    args = parser.parse_args()
    plain = _Memory()
    gate = WriteGate()
    wrapped = gated(gate, _Memory().add, write=True)
    with tempfile.TemporaryDirectory() as tmp:
        shared = gated(WriteGate(SharedGate(Path(tmp))), _Memory().add, write=True)
        print(
            "| threads | plain µs/call | gated µs/call | gate cost µs | ratio | shared gate µs/call |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        for threads in (1, 4):
            base = _per_call_us(plain.add, args.calls, threads)
            cost = _per_call_us(wrapped, args.calls, threads)
            across = _per_call_us(shared, args.calls // 10, threads)
            print(
                f"| {threads} | {base:.3f} | {cost:.3f} | {cost - base:.3f} | {cost / base:.1f} "
                f"| {across:.3f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
