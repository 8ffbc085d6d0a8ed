"""Conformance suite for the ``VectorStore`` port, run against every backend.

Written against the Protocol only: a backend joins by adding an entry to
``tests/helpers/backends.py: BACKENDS`` (a real mem0 deployment on that backend, plus how to
damage and remove its store): embedded Qdrant and Postgres with pgvector (a real PostgreSQL 16
the tests start). The suite's tests are ``tests/helpers/vector_store_suite.py``'s; this tier
runs them on every backend, and adds the one that needs another process writing.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from memsync.errors import LockedError
from tests.helpers.backends import BACKENDS, Backend
from tests.helpers.vector_store_suite import *  # noqa: F403 - the suite's tests, collected here
from tests.helpers.vector_store_suite import built_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, make_deployment: Any) -> Backend:
    """Every backend's live store (the suite's ``built_backend``)."""
    return built_backend(request.param, make_deployment)


def test_capture_of_a_live_store_while_another_process_writes_through_mem0(backend, tmp_path):
    store = backend.store
    backend.deployment.close()
    assert store.holder() is None
    store.require_free("test")  # nobody holds it: returns
    writer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.helpers.live_writer",
            str(backend.deployment.paths.root),
            "6",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        holder = store.holder()
        if store.lock_path() is not None:  # a backend that locks names the writer
            assert holder is not None and holder.pid == writer.pid
            with pytest.raises(LockedError, match=str(writer.pid)):
                store.require_free("forget")
        captured = store.capture(tmp_path / "capture" / store.capture_dir)
        points = store.read_points(captured)
    finally:
        writer.communicate(timeout=60)
    assert captured.present and captured.root == tmp_path / "capture" / store.capture_dir
    assert {store.collection, store.entities_collection} <= captured.copies.keys()
    for copy in captured.copies.values():
        assert copy.started_at.tzinfo is UTC and copy.started_at <= copy.finished_at
        assert (
            copy.duration_s >= 0 and copy.size_bytes > 0 and copy.dest.is_relative_to(captured.root)
        )
    assert len(points) >= 30  # the seeded memories (the writer adds and deletes some)
