"""What hostile peers cost an app with the agent: its descriptors, memory and writes.

Usage: ``PYTHONPATH=. .venv/bin/python bench/bench_agent_bounds.py`` (as root; needs
``make app-envs``): about 15 s.

The app is mem0ai 2.2.1's, run as uid 65534 with 1,024 descriptors, writing through its own
Memory every 50 ms with the agent attached (tests/helpers/own_uid_app.py). Baseline, in the
same run: its descriptors and resident memory before any peer connects. Then 1,100 connections
held for 1 s, then 150 connections each sending 4 MiB without a newline (6 at a time). Prints
descriptors and memory against the baseline, and the app's own count of writes, failed writes
and slowest write.
"""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from pathlib import Path

from tests.helpers.own_uid_app import OwnUidApp


def _connect(path: Path) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(path))  # blocking: waits while the agent's backlog is full
    return client


def main() -> int:
    """Run the two floods against one app; print the figures as JSON."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    with OwnUidApp() as app:
        fds_before, rss_before = len(app.fds()), app.rss_bytes()
        flood = [_connect(app.socket) for _ in range(1100)]
        time.sleep(1.0)  # the clock: 20 app writes while the flood is held
        fds_flood = len(app.fds())
        for client in flood:
            client.close()
        chunk, peak = b"x" * (1 << 20), rss_before

        def send() -> None:
            for _ in range(25):
                client = _connect(app.socket)
                try:
                    for _ in range(4):
                        client.sendall(chunk)
                except OSError:
                    pass  # closed by the agent: busy, or over a request's size
                client.close()

        senders = [threading.Thread(target=send) for _ in range(6)]
        for sender in senders:
            sender.start()
        while any(sender.is_alive() for sender in senders):
            peak = max(peak, app.rss_bytes())
            time.sleep(0.01)
        time.sleep(0.5)
        rss_after = app.rss_bytes()
        stats = app.stop()
    mib = 1 << 20
    print(
        json.dumps(
            {
                "descriptors": {"baseline": fds_before, "during_1100_connections": fds_flood},
                "rss_mib": {
                    "baseline": round(rss_before / mib, 1),
                    "peak_150x4mib": round(peak / mib, 1),
                    "after": round(rss_after / mib, 1),
                    "peak_over_baseline": round(peak / rss_before, 2),
                },
                "app": stats,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
