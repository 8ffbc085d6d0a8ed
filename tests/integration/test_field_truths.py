"""Issue 11's field faults, reproduced the way a deployment produces them: doctor and check agree,
no damaging advice on a wrong history path, reconcile with nothing to do needs no store, and
doctor sees every store file and every copy still holding memories."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memsync.demo import deployment as build


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


# --- point 8: reconcile with nothing to do ------------------------------------------------------


def test_reconcile_with_nothing_to_do_needs_neither_the_store_nor_its_lock(deployment, cli):
    deployment.close()
    with app_holding(deployment.paths.qdrant):
        result = cli("reconcile", "--json", config=deployment.config)
    assert result.code == 0, result.err
    outcome = json.loads(result.out)
    assert outcome["actions"] == [] and outcome["check_after"]["errors"] == 0
