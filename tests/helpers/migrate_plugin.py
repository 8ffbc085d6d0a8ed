"""The tests' own mem0 embedder providers (a plugin module, as a deployment would have one).

The "new embedding model" of another size a migration re-embeds into is the demo providers'
``memsync_hash256`` (``memsync.demo.providers``); these wrap it:

* ``migrate_flaky``: stands for an external embedding service that rate-limits: its first
  ``$MEMSYNC_TEST_FLAKY_FAILS`` calls in a process (default 3; ``-1``: every call) raise
  ``ConnectionError``, then it answers as ``memsync_hash256``; each call appends ``ok`` or
  ``fail`` to the file ``$MEMSYNC_TEST_FLAKY_LOG`` names (memsync's writer process embeds);
* ``migrate_slow``: ``memsync_hash256`` taking 30 ms a call (a remote embedder's latency),
  so a test can kill a migration mid-way;
* ``migrate_gated``: ``memsync_hash256`` whose calls wait until the file named by
  ``$MEMSYNC_TEST_GATE`` exists, so a test decides when the copy goes on;
* ``migrate_counted``: ``memsync_hash256`` with a batch API, logging each request (``one`` or
  ``batch N``) to ``$MEMSYNC_TEST_FLAKY_LOG``.

Listed in a config's ``plugins``; importing it registers them with mem0's factory.
"""

from __future__ import annotations

import os
import time

from mem0.utils.factory import EmbedderFactory

from memsync.demo.providers import HASH256_DIMS, Hash256Embedding

DIMS = HASH256_DIMS
FLAKY_FAILS_ENV = "MEMSYNC_TEST_FLAKY_FAILS"
SLOW_S = 0.03
GATE_ENV = "MEMSYNC_TEST_GATE"
FLAKY_LOG_ENV = "MEMSYNC_TEST_FLAKY_LOG"  # a file each call appends "ok" or "fail" to


class Flaky(Hash256Embedding):  # type: ignore[misc]
    """Fails its first calls in this process with a transient error, then embeds."""

    calls = 0

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        Flaky.calls += 1
        fails = int(os.environ.get(FLAKY_FAILS_ENV, "3"))
        failing = fails < 0 or Flaky.calls <= fails
        log = os.environ.get(FLAKY_LOG_ENV)
        if log:  # memsync embeds in the app's interpreter: the test counts calls here
            with open(log, "a", encoding="utf-8") as out:
                out.write("fail\n" if failing else "ok\n")
        if failing:
            raise ConnectionError(f"429 Too Many Requests (test embedder, call {Flaky.calls})")
        return super().embed(text, memory_action)


class Slow(Hash256Embedding):  # type: ignore[misc]
    """``memsync_hash256`` taking ``SLOW_S`` seconds a call, as a remote embedder does."""

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        time.sleep(SLOW_S)
        return super().embed(text, memory_action)


class Gated(Hash256Embedding):  # type: ignore[misc]
    """``memsync_hash256`` whose calls wait until the file ``$MEMSYNC_TEST_GATE`` exists."""

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        gate = os.environ.get(GATE_ENV)
        deadline = time.monotonic() + 120
        while gate and not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().embed(text, memory_action)


class Counted(Hash256Embedding):  # type: ignore[misc]
    """``memsync_hash256`` writing each request to ``$MEMSYNC_TEST_FLAKY_LOG``: ``one`` for an
    ``embed``, ``batch N`` for an ``embed_batch`` of N texts (an embedder with a batch API)."""

    def _log(self, line: str) -> None:
        with open(os.environ[FLAKY_LOG_ENV], "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        self._log("one")
        return super().embed(text, memory_action)

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        self._log(f"batch {len(texts)}")
        return [super(Counted, self).embed(text, memory_action) for text in texts]


def register() -> None:
    """Register the four providers with mem0's embedder factory. Idempotent."""
    EmbedderFactory.provider_to_class["migrate_counted"] = f"{__name__}.Counted"
    EmbedderFactory.provider_to_class["migrate_flaky"] = f"{__name__}.Flaky"
    EmbedderFactory.provider_to_class["migrate_slow"] = f"{__name__}.Slow"
    EmbedderFactory.provider_to_class["migrate_gated"] = f"{__name__}.Gated"


register()
