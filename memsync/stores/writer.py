"""The writer port: the few typed writes memsync makes to a deployment, whatever the route.

``AppWriter`` (``memsync.stores.mem0``) asks the one-shot writer, a short-lived process of
the app's own interpreter, to build the app's ``mem0.Memory`` and write: the **direct** route
(nobody holds the store) and the **window** route (the app was stopped for it). ``AgentWriter`` (``memsync.stores.agent_client``) asks ``memsync.agent`` inside the
running app to do the same writes with the app's own ``Memory``: the **agent** route.
``memsync.routes.open_writer`` picks one and yields it. History-only writes (``record_events``,
``delete_messages``) go straight to history.db on every route: SQLite allows them across
processes (busy timeout 5 s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from memsync.model import HistoryEvent

Route = Literal["direct", "agent", "window"]


class Writer(Protocol):
    """What every route can do. Each write is idempotent and returns False when settled already."""

    route: Route

    def payload(self, memory_id: str) -> dict[str, Any] | None:
        """The live point's payload, or None when it has no point. Reads only."""
        ...

    def exists(self, memory_id: str) -> bool:
        """Whether the memory has a point in the live collection. Reads only."""
        ...

    def delete(self, memory_id: str) -> bool:
        """Delete through mem0's ``Memory.delete`` (point, DELETE row, entity links)."""
        ...

    def update_text(self, memory_id: str, text: str) -> bool:
        """Rewrite a memory's text through ``Memory.update``. Raises LookupError: no point."""
        ...

    def update_metadata(self, memory_id: str, metadata: Mapping[str, Any]) -> bool:
        """Merge ``metadata`` into a payload through ``Memory.update``."""
        ...

    def put_back(self, point_id: str, vector: Sequence[float], payload: Mapping[str, Any]) -> bool:
        """Insert a lost point again with its id, dense vector and payload (no history row)."""
        ...

    def put_back_text(self, point_id: str, text: str, payload: Mapping[str, Any]) -> bool:
        """Insert a lost point with its id and payload, ``text`` embedded by the app's embedder."""
        ...

    def relink_entity(self, entity_id: str, remaining: Sequence[str]) -> bool:
        """Set an entity's ``linked_memory_ids``; delete the entity when ``remaining`` is empty."""
        ...

    def touch_entity_store(self) -> None:
        """Initialise mem0's entity store so deletes clean entity links too (mem0ai 2.2.1)."""
        ...

    def probe_embedder(self) -> None:
        """Embed one probe text. Raises ConfigError (exit 10) naming the embedder."""
        ...

    def record_events(self, events: Sequence[HistoryEvent]) -> int:
        """Insert memsync's own history rows into history.db; returns rows inserted."""
        ...

    def delete_messages(self, scope: str) -> int:
        """Delete one session scope's raw ``messages`` rows from history.db; returns rows."""
        ...
