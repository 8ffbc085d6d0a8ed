"""The embedded (local-mode) Qdrant backend: qdrant-client 1.20's files, read directly.

``store.EmbeddedQdrant`` is the port's implementation; ``formats`` decodes qdrant-client's
pickled rows, ``rows`` reads and rewrites a collection's ``storage.sqlite``, ``removal``
removes an old store. Imported only by ``memsync.stores.backends`` (and its own modules).
"""

from memsync.stores.qdrant_embedded.store import EmbeddedQdrant

BACKEND = EmbeddedQdrant

__all__ = ["BACKEND", "EmbeddedQdrant"]
