"""Another process holding the embedded Qdrant store, as the app does while it runs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def app_holding(qdrant: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process (the app) holding the embedded store, as mem0 does while it runs."""
    app = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from qdrant_client import QdrantClient; "
            f"c = QdrantClient(path={str(qdrant)!r}); print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == "ready"
        yield app
    finally:
        app.kill()
        app.wait()
