"""The ``VectorStore`` conformance suite on every backend whose store needs no server.

The suite's tests are ``tests/helpers/vector_store_suite.py``'s; the backends are the entries of
``tests/helpers/backends.py: BACKENDS`` with ``server=False`` (embedded Qdrant).
``tests/pg/test_vector_store_port.py`` runs the same suite on every backend.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.backends import BACKENDS, Backend
from tests.helpers.vector_store_suite import *  # noqa: F403 - the suite's tests, collected here
from tests.helpers.vector_store_suite import built_backend


@pytest.fixture(params=sorted(p for p, entry in BACKENDS.items() if not entry.server))
def backend(request: pytest.FixtureRequest, make_deployment: Any) -> Backend:
    """A serverless backend's live store (the suite's ``built_backend``)."""
    return built_backend(request.param, make_deployment)
