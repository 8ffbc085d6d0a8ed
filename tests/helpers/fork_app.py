"""An app that attaches the agent, then forks a child that attaches again (os.fork, no server).

Usage: ``python -m tests.helpers.fork_app ROOT SOCKET OUT``. The parent builds the deployment's
Memory (embedded Qdrant), calls ``attach`` (it serves SOCKET) and forks one child. The child
calls ``attach`` on the inherited Memory: it joins the gate (``OUT/child.json``: its pid and what
``attach`` returned); then, each time ``OUT/go`` appears (the test removes it), makes one gated
write that changes nothing (``Memory.delete`` of an id that has no memory: mem0 raises
ValueError after the gate) and appends ``<start> <end>`` (``time.monotonic()``) to
``OUT/writes.log``. With ``MEMSYNC_TEST_HAMMER=N`` the child also runs N threads making such
writes back to back, each 5 ms long (the child's store answers ``get`` after 5 ms, as a store
over the network does), so their calls overlap and the process always has one in flight, and writes
how many have completed to ``OUT/count`` every 10 ms (``<count> <monotonic time>``). The parent prints
``ready <parent> <child>``; SIGTERM stops both.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memsync.agent import attach
from memsync.demo import deployment as build


def _missing_delete(memory: object) -> None:
    try:
        memory.delete("00000000-0000-0000-0000-000000000000")  # type: ignore[attr-defined]
    except ValueError:
        pass


def _hammer(memory: Any, out: Path, threads: int) -> None:
    done = [0] * threads
    get = memory.vector_store.get

    def slow_get(*args: Any, **kwargs: Any) -> Any:  # a store 5 ms away, as a network one is
        time.sleep(0.005)
        return get(*args, **kwargs)

    memory.vector_store.get = slow_get

    def work(i: int) -> None:
        while True:
            _missing_delete(memory)
            done[i] += 1

    for i in range(threads):
        threading.Thread(target=work, args=(i,), daemon=True).start()

    def report() -> None:
        while True:
            (out / "count.new").write_text(f"{sum(done)} {time.monotonic():.6f}")
            os.replace(out / "count.new", out / "count")
            time.sleep(0.01)

    threading.Thread(target=report, daemon=True).start()


def _child(memory: object, sock: Path, out: Path) -> None:
    joined = attach(memory, sock)
    hammer = int(os.environ.get("MEMSYNC_TEST_HAMMER", "0"))
    if hammer:
        _hammer(memory, out, hammer)
    (out / "child.json").write_text(
        json.dumps({"pid": os.getpid(), "type": type(joined).__name__}), encoding="utf-8"
    )
    while True:
        if (out / "go").exists():
            (out / "go").unlink()
            started = time.monotonic()
            _missing_delete(memory)
            with (out / "writes.log").open("a") as log:
                log.write(f"{started:.6f} {time.monotonic():.6f}\n")
        time.sleep(0.005)


def main(argv: list[str]) -> int:
    root, sock, out = (Path(a) for a in argv[:3])
    memory = build.open_memory(build.Paths.at(root), embedder="memsync_hash")
    agent = attach(memory, sock)
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        _child(memory, sock, out)
    print(f"ready {os.getpid()} {child}", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.02)
    os.kill(child, signal.SIGTERM)
    os.waitpid(child, 0)
    agent.close()
    build.close_memory(memory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
