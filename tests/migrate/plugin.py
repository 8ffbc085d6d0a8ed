"""The tests' own mem0 embedder providers (a plugin module, as a deployment would have one).

* ``migrate_hash_256``: the demo's hash embedder (``memsync_hash``) at 256 dimensions, the
  "new embedding model" of another size a migration re-embeds into;
* ``migrate_flaky``: stands for an external embedding service that rate-limits: its first
  ``$MEMSYNC_TEST_FLAKY_FAILS`` calls in a process (default 3; ``-1``: every call) raise
  ``ConnectionError``, then it answers as ``migrate_hash_256``.

Listed in a config's ``plugins``; importing it registers both with mem0's factory.
"""

from __future__ import annotations

import os

from mem0.utils.factory import EmbedderFactory

from memsync.demo.providers import HashEmbedding

DIMS = 256
FLAKY_FAILS_ENV = "MEMSYNC_TEST_FLAKY_FAILS"


class Hash256(HashEmbedding):  # type: ignore[misc]
    """``memsync_hash`` at 256 dimensions."""

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        self.config.embedding_dims = DIMS
        return list(super().embed(text, memory_action))


class Flaky(Hash256):
    """Fails its first calls in this process with a transient error, then embeds."""

    calls = 0

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        Flaky.calls += 1
        fails = int(os.environ.get(FLAKY_FAILS_ENV, "3"))
        if fails < 0 or Flaky.calls <= fails:
            raise ConnectionError(f"429 Too Many Requests (test embedder, call {Flaky.calls})")
        return super().embed(text, memory_action)


def register() -> None:
    """Register both providers with mem0's embedder factory. Idempotent."""
    EmbedderFactory.provider_to_class["migrate_hash_256"] = f"{__name__}.Hash256"
    EmbedderFactory.provider_to_class["migrate_flaky"] = f"{__name__}.Flaky"


register()
