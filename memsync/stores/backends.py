"""The vector-store backends: one line each, by mem0's ``[mem0.vector_store] provider``.

The only module that imports a backend package, and only when a store is built (``check`` on
embedded Qdrant never imports psycopg). ``backend_for`` is the one place a vector store is
constructed. Adding a backend: its package under ``memsync/stores/`` (a class with
``from_settings`` and ``for_layout``, exported as ``BACKEND``), one line in ``_BACKENDS``, its
settings model in the config's union (``memsync.config.mem0_settings``), and one entry in the
conformance suite's table (``tests/helpers/backends.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import ClassVar, Protocol

from memsync.config import MEM0_DEFAULT_COLLECTION, Config, VectorStoreConfig
from memsync.stores.vector_store import TELEMETRY_COLLECTION, VectorStore

# provider: the package whose BACKEND implements it
_BACKENDS: dict[str, str] = {
    "qdrant": "memsync.stores.qdrant_embedded",
    "pgvector": "memsync.stores.pgvector",
}
DEFAULT_PROVIDER = "qdrant"  # mem0ai 2.2.1's default vector store


class Backend(Protocol):
    """What the registry needs from a backend's class (its package's ``BACKEND``).

    Class attributes, as its stores have them (``VectorStore``): ``kind``, ``capture_dir``,
    ``mode`` (a snapshot manifest's), ``label`` (its name in messages), ``doctor_codes`` (the
    result codes of its ``probe_server``) and ``bytes_per_dimension``.
    """

    kind: ClassVar[str]
    capture_dir: ClassVar[str]
    mode: ClassVar[str]
    label: ClassVar[str]
    doctor_codes: ClassVar[tuple[str, ...]]
    bytes_per_dimension: ClassVar[int]

    @classmethod
    def from_settings(cls, settings: VectorStoreConfig) -> VectorStore:
        """The live store ``[mem0.vector_store.config]`` names. Pure (opens nothing)."""
        ...

    @classmethod
    def for_layout(cls, root: Path, collection: str) -> VectorStore:
        """A store reading the captured layout at ``root`` (``<snapshot>/<capture_dir>``)."""
        ...


def providers() -> tuple[str, ...]:
    """Every registered provider, in registration order (the config loader accepts these)."""
    return tuple(_BACKENDS)


def backend_class(provider: str) -> type[Backend]:
    """The backend class of ``provider`` (imports its package). Raises KeyError for another."""
    module = importlib.import_module(_BACKENDS[provider])
    backend: type[Backend] = module.BACKEND
    return backend


def backend_for(settings: VectorStoreConfig) -> VectorStore:
    """Build the live vector store ``settings`` names. Pure (opens nothing)."""
    return backend_class(settings.provider).from_settings(settings)


def vector_store_for(config: Config) -> VectorStore:
    """Build the vector store the config names (``backend_for(config.vector_store)``)."""
    return backend_for(config.vector_store)


def telemetry_store_for(config: Config) -> VectorStore:
    """The second vector store mem0 opens when its telemetry is on. Pure (opens nothing).

    mem0ai 2.2.1 opens an embedded Qdrant at ``$MEM0_DIR/migrations_qdrant``
    (``config.migrations_qdrant_path``) with the collection ``mem0migrations``; doctor names
    the process holding it. memsync itself never opens it.
    """
    return backend_class(DEFAULT_PROVIDER).for_layout(
        config.migrations_qdrant_path, TELEMETRY_COLLECTION
    )


def doctor_codes() -> tuple[str, ...]:
    """Every result code a backend's own doctor probes emit (``probe_server``), in order."""
    return tuple(code for p in _BACKENDS for code in backend_class(p).doctor_codes)


def backend_of_mode(mode: str) -> type[Backend]:
    """The backend that writes snapshots of manifest ``mode``; the default one for another.

    The default backend is asked first, so a snapshot of it imports no other backend's package.
    """
    default = backend_class(DEFAULT_PROVIDER)
    if default.mode == mode:
        return default
    found = (backend_class(p) for p in _BACKENDS if p != DEFAULT_PROVIDER)
    return next((b for b in found if b.mode == mode), default)


def backend_of_kind(kind: str) -> type[Backend]:
    """The backend whose stores have ``kind`` (``VectorStore.kind``); the default one for another."""
    found = (backend_class(p) for p in _BACKENDS if p != DEFAULT_PROVIDER)
    return next((b for b in found if b.kind == kind), backend_class(DEFAULT_PROVIDER))


def layout_store(root: Path) -> VectorStore:
    """The vector store whose layout a snapshot's plaintext at ``root`` holds. Reads a few stats.

    The backend whose capture directory is there (``pgvector/`` since issue 13, ``qdrant/``
    before), the default backend's when none is; mem0's default collection names
    (``read_inventory`` reads it with the config's names).
    """
    found = (backend_class(p) for p in _BACKENDS if p != DEFAULT_PROVIDER)
    backend = next((b for b in found if (root / b.capture_dir).is_dir()), None)
    backend = backend or backend_class(DEFAULT_PROVIDER)
    return backend.for_layout(root / backend.capture_dir, MEM0_DEFAULT_COLLECTION)
