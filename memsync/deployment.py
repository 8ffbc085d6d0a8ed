"""The deployment a command works on, opened once.

Its config, vector store, history, state, snapshot repositories and routes. The command line
builds one ``Deployment`` per command (``memsync.cli.common.open_deployment``; a daemon job is
a command in a child process, so one per job) and passes it down; operations take it instead
of a ``Config`` and read their settings from ``deployment.config``. The vector
store is built here, once (``vector_store_for``: pure, it opens nothing); the snapshot
repositories only when asked for (the S3 one imports boto3). Adapters below this layer
(``stores/``, ``routes/``) take the parts they use: the ``VectorStore``, a path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.config import Config
from memsync.stores.backends import vector_store_for
from memsync.stores.vector_store import VectorStore

if TYPE_CHECKING:  # the routes (the agent's client, the writer) load only for a write
    from memsync.repository import LocalRepository, S3Repository
    from memsync.routes import Taken
    from memsync.stores.writer import Route, Writer

__all__ = ["Deployment"]


@dataclass(frozen=True)
class Deployment:
    """One mem0 deployment as memsync reaches it. Built by ``open``; opening reads nothing."""

    config: Config
    vector_store: VectorStore

    @classmethod
    def open(cls, config: Config) -> Deployment:
        """The deployment ``config`` names: the one place its vector store is built."""
        return cls(config, vector_store_for(config))

    @property
    def history(self) -> Path:
        """mem0's history.db."""
        return self.config.history_db_path

    @property
    def state(self) -> Path:
        """The state directory (journals, the queue, the last check)."""
        return self.config.state_dir

    @cached_property
    def repository(self) -> LocalRepository:
        """The local snapshot repository. Raises ConfigError without ``snapshot.directory``."""
        from memsync import repository

        return repository.local(self.config)

    @cached_property
    def remote(self) -> S3Repository:
        """The S3 snapshot repository. Raises ConfigError without an ``[s3]`` section."""
        from memsync import repository

        return repository.remote(self.config)

    @contextmanager
    def open_writer(self, what: str, taken: Taken | None = None) -> Iterator[Writer]:
        """A writer on the first route that can write now (``routes.open_writer``)."""
        from memsync import routes

        with routes.open_writer(self.vector_store, self.config, what, taken) as writer:
            yield writer

    def require_interpreter(self) -> None:
        """Refuse now when the write's route needs the app's interpreter and none is known."""
        from memsync import routes

        routes.require_interpreter(self.vector_store, self.config)

    def require_writable(self) -> None:
        """Every refusal the write's route would meet (``routes.require_writable``). Reads only."""
        from memsync import routes

        routes.require_writable(self.vector_store, self.config)

    def would_take(self) -> Route | None:
        """The route a write would take now, or None (``routes.would_take``). Reads only."""
        from memsync import routes

        return routes.would_take(self.vector_store, self.config)
