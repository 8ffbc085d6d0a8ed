"""The deployment's mem0, reached only through the app's own interpreter (the one-shot writer).

memsync never writes a deployment with another mem0ai or qdrant-client than the app's: a
library of another version that opens the store may rewrite its files in a format the app
cannot read. When no agent serves the running app (the direct and window routes, and a
migration's target), ``open_memory`` starts ``memsync.agent.writer`` with the app's
interpreter (``memsync.stores.interpreter``) from a copy of the standard-library-only
``memsync.agent`` package, sends it the deployment's mem0 dict (secrets resolved here, passed on
its standard input, never on a command line) and yields a ``Writer`` that asks it for each
write: the same operations the agent runs inside the app. memsync's own process never imports
mem0. Only commands that write come here; check, doctor and snapshots never do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memsync.config import Config
from memsync.errors import ConfigError, UnavailableError
from memsync.stores import app_process, interpreter, journal_mode
from memsync.stores.agent_client import AgentWriter
from memsync.stores.interpreter import AppInterpreter
from memsync.stores.vector_store import VectorStore
from memsync.stores.writer import Route

PROBE_TEXT = "memsync embedder probe"


def prepare_for_writing(store: VectorStore, config: Config) -> None:
    """Roll back hot journals a crashed writer (the app or memsync) left, before capturing.

    history.db first, then the vector store's (``VectorStore.prepare_for_writing``). Only
    commands that write call this: read-only copies cannot roll a journal back. Idempotent.

    Raises:
        TryLaterError: a file is busy; UnavailableError: a file is unreadable.
    """
    journal_mode.roll_back_hot_journals(store, config.history_db_path)


def require_store_free(store: VectorStore, what: str) -> None:
    """Raise LockedError (exit 12) when another process holds the vector store.

    Reads /proc/locks and open files; never takes the lock itself (``VectorStore.require_free``).
    """
    store.require_free(what)


class AppWriter(AgentWriter):
    """The ``Writer`` of the direct and window routes: the one-shot writer does each write."""

    def __init__(
        self,
        client: app_process.WriterClient,
        store: VectorStore,
        config: Config,
        route: Route,
        app: AppInterpreter,
    ):
        super().__init__(client, store, config, route)
        self.app = app

    def probe_embedder(self) -> None:
        """Embed one probe text with the app's embedder before any action that needs it.

        Raises:
            ConfigError: (exit 10, naming the embedder) it fails or returns the wrong size.
        """
        config = self._config
        provider = (config.mem0.get("embedder") or {}).get("provider", "openai")
        try:
            vector = self.embed(PROBE_TEXT)
        except (UnavailableError, ValueError) as error:
            raise ConfigError(
                config.source, [f"mem0.embedder ({provider}): probe embedding failed: {error}"]
            ) from error
        expected = config.expected_dims[0][1] if config.expected_dims else None
        if expected is not None and len(vector) != expected:
            raise ConfigError(
                config.source,
                [
                    f"mem0.embedder ({provider}): probe embedding has {len(vector)} dimensions, "
                    f"the collection expects {expected}"
                ],
            )


@contextmanager
def open_memory(
    store: VectorStore, config: Config, route: Route = "direct", app: AppInterpreter | None = None
) -> Iterator[AppWriter]:
    """Start the one-shot writer on the deployment with the app's interpreter; yield its writer.

    ``config`` and ``store``: the deployment's (a migration: its target's).

    ``app``: the interpreter to write with (default: ``interpreter.require(config)``; a
    migration passes the one that will run the app on its target). A pgvector store is reached
    once first (``VectorStore.read_collections``, a 10 s connect timeout).

    Raises:
        ConfigError: (exit 10) the app's interpreter is unknown, cannot run, has no mem0ai, or
            runs a mem0ai memsync will not write through; a plugin cannot be imported; mem0
            rejects the config.
        LockedError: the embedded store is held by another process.
        UnavailableError: the app's qdrant-client cannot open the store, or PostgreSQL cannot
            be reached.
    """
    require_store_free(store, "writing through mem0")
    app = app or interpreter.require(store, config)
    if store.location is None:  # a server: reachable before mem0's pool waits on it
        store.read_collections()
    with app_process.writer_process(store, config, app, "memory") as (client, _):
        yield AppWriter(client, store, config, route, app)


@contextmanager
def open_embedder(
    store: VectorStore, config: Config, app: AppInterpreter | None = None
) -> Iterator[Callable[[str], list[float]]]:
    """The config's embedder alone, as ``embed(text) -> vector``, opening no store.

    Built in the app's interpreter as ``mem0.Memory`` builds it, so a migration can ask its
    size before mem0 creates the target. A permanent embedder error raises ValueError; a
    transient one (network, rate limit) UnavailableError.

    Raises:
        ConfigError: as ``open_memory``, or mem0 cannot build the embedder.
    """
    app = app or interpreter.require(store, config)
    with app_process.writer_process(store, config, app, "embedder") as (client, _):
        writer = AppWriter(client, store, config, "direct", app)
        yield writer.embed
