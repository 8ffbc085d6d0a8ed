"""A separate process writing through mem0 continuously (the app under traffic).

Usage: ``python -m tests.helpers.live_writer ROOT SECONDS`` (ROOT on pgvector when ``ROOT/pg-url``
exists). Prints ``ready`` once the Memory
is built, then writes (add, update, delete) until SECONDS pass (SECONDS ``stdin``: until its
stdin is closed, so a test under load decides when the traffic ends), then prints one JSON line:
``{"writes": n, "failures": n, "errors": [...]}``. mem0 swallows some history failures and
only logs them (mem0ai 2.2.1, batch add path), so ERROR records from mem0's loggers count too.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import threading
import time
from pathlib import Path

from memsync.demo import deployment as build
from memsync.demo.app import ErrorCounter


def main() -> int:
    root = Path(sys.argv[1])
    stopped = threading.Event()
    if sys.argv[2] == "stdin":
        seconds = float("inf")
        threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    else:
        seconds = float(sys.argv[2])
    counter = ErrorCounter()
    logging.getLogger().addHandler(counter)
    memory = build.open_memory(build.Paths.at(root), embedder="memsync_hash")
    logging.getLogger("mem0").addHandler(counter)
    rng = random.Random(11)
    live: list[str] = []
    writes = failures = 0
    errors: list[str] = []
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stopped.is_set():
        action = rng.random()
        try:
            if action < 0.5 or len(live) < 5:
                if rng.random() < 0.5:
                    result = memory.add(
                        build.fact(rng), user_id=rng.choice(build.USERS), infer=False
                    )
                else:
                    messages = [{"role": "user", "content": build.fact(rng)} for _ in range(3)]
                    result = memory.add(messages, user_id=rng.choice(build.USERS), infer=True)
                live += [item["id"] for item in result["results"]]
            elif action < 0.8:
                memory.update(rng.choice(live), build.fact(rng))
            else:
                memory.delete(live.pop(rng.randrange(len(live))))
            writes += 1
        except Exception as error:  # noqa: BLE001 - every failure is what we count
            failures += 1
            errors.append(f"{type(error).__name__}: {error}")
    build.close_memory(memory)
    print(
        json.dumps(
            {
                "writes": writes,
                "failures": failures + len(counter.messages),
                "errors": errors + counter.messages,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
