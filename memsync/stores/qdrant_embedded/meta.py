"""``repair-meta``'s judgement of an embedded store's ``meta.json`` (``LiveStore.meta_file``).

The app's own qdrant-client, in the app's interpreter, says which keys it refuses
(``stores.app_process.app_meta``); a refused key that is null (unset) can be dropped, one with
a value never is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memsync.errors import UnavailableError


@dataclass(frozen=True, slots=True)
class QdrantMeta:
    """The store's ``meta.json`` (see ``MetaFile``)."""

    def refused(self, found: Mapping[str, Any]) -> dict[str, list[str]]:
        """The keys qdrant-client refuses, by collection. Pure."""
        return {name: list(c["refused"]) for name, c in found["collections"].items()}

    def require_repairable(self, found: Mapping[str, Any], client: str | None) -> None:
        """Return when every refused key is unset; else raise naming the others (exit 11)."""
        stuck = {n: c["problems"] for n, c in found["collections"].items() if not c["repairable"]}
        if stuck:
            raise UnavailableError(
                f"{found['path']} does not load with the app's qdrant-client {client}, "
                "and not only for unset keys: "
                + "; ".join(f"collection {n}: {', '.join(p)}" for n, p in stuck.items()),
                "restore a snapshot taken before the store was opened by another qdrant-client "
                "(memsync snapshot list), or run the app with the qdrant-client that wrote it",
            )
