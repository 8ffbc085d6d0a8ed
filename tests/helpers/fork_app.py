"""An app that attaches the agent, then forks a child that attaches again (os.fork, no server).

Usage: ``python -m tests.helpers.fork_app ROOT SOCKET OUT``. The parent builds the deployment's
Memory (embedded Qdrant), calls ``attach`` (it serves SOCKET) and forks one child. The child
calls ``attach`` on the inherited Memory: it joins the gate (``OUT/child.json``: its pid and what
``attach`` returned); then, each time ``OUT/go`` appears (the test removes it), makes one gated
write that changes nothing (``Memory.delete`` of an id that has no memory: mem0 raises
ValueError after the gate) and appends ``<start> <end>`` (``time.monotonic()``) to
``OUT/writes.log``. The parent prints ``ready <parent> <child>``; SIGTERM stops both.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from memsync.agent import attach
from memsync.demo import deployment as build


def _child(memory: object, sock: Path, out: Path) -> None:
    joined = attach(memory, sock)
    (out / "child.json").write_text(
        json.dumps({"pid": os.getpid(), "type": type(joined).__name__}), encoding="utf-8"
    )
    while True:
        if (out / "go").exists():
            (out / "go").unlink()
            started = time.monotonic()
            try:
                memory.delete("00000000-0000-0000-0000-000000000000")  # type: ignore[attr-defined]
            except ValueError:
                pass
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
