"""The ``[mem0]`` tables: the keys memsync reads from mem0's own dict (mem0ai 2.2.1 ``mem0/configs``).

Every other key there is mem0's and passes through unchecked (``extra="allow"``). The vector
store's ``config`` is validated as the provider's model: ``QdrantSettings`` (embedded Qdrant) or
``PGVectorSettings`` (Postgres with pgvector, mem0's REST server layout).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, ValidationInfo, field_validator

from memsync.config.fields import _COLLECTION_NAME, Mem0Path, _matching, _OrEmpty, key
from memsync.config.mem0_dict import Secret

MEM0_DEFAULT_QDRANT_PATH = "/tmp/qdrant"  # noqa: S108 - mem0ai 2.2.1 QdrantConfig.path
MEM0_DEFAULT_COLLECTION = "mem0"
MEM0_DEFAULT_DIMS = 1536


class _Mem0Section(BaseModel):
    """A table of mem0's own dict: only the keys memsync reads are checked."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class QdrantSettings(_Mem0Section):
    """``[mem0.vector_store.config]``: mem0's QdrantConfig (embedded mode only)."""

    provider: ClassVar[Literal["qdrant"]] = "qdrant"

    path: Mem0Path = key(
        Path(MEM0_DEFAULT_QDRANT_PATH),
        "absolute path of the embedded Qdrant (doctor flags /tmp and tmpfs)",
    )
    collection_name: Annotated[str, _matching(_COLLECTION_NAME, "invalid collection name")] = key(
        MEM0_DEFAULT_COLLECTION, "the memory collection (mem0 adds `<name>_entities`)"
    )
    embedding_model_dims: int = key(MEM0_DEFAULT_DIMS, "the collection's vector size", gt=0)
    on_disk: bool = key(
        False, "keep vectors on disk; mem0ai < 1.0.8 deletes the directory at start without it"
    )


_SecretText = str | InstanceOf[Secret]


class PGVectorSettings(_Mem0Section):
    """``[mem0.vector_store.config]`` with ``provider = "pgvector"``: mem0's PGVectorConfig.

    mem0ai 2.2.1 ``mem0/configs/vector_stores/pgvector.py``: ``connection_string`` wins over
    the separate keys; mem0 needs ``user``/``password`` and ``host``/``port`` without it.
    """

    provider: ClassVar[Literal["pgvector"]] = "pgvector"
    provider_label: ClassVar[str] = 'provider = "pgvector"'

    dbname: str = key("postgres", "the database")
    collection_name: Annotated[str, _matching(_COLLECTION_NAME, "invalid collection name")] = key(
        MEM0_DEFAULT_COLLECTION, "the memory table (mem0 adds `<name>_entities`)"
    )
    embedding_model_dims: int = key(MEM0_DEFAULT_DIMS, "the column's vector size", gt=0)
    user: str | None = key(None, "the database role")
    password: _SecretText | None = key(
        None,
        'the role\'s password: `{env = "NAME"}` or `{file = "PATH"}` (inline is a doctor warning)',
        toml='string or {env = "NAME"} / {file = "PATH"}',
        secret=True,
    )
    host: str | None = key(None, "the server's host name, or a Unix socket directory")
    port: int | None = key(None, "the server's port", gt=0, lt=65536)
    hnsw: bool = key(True, "mem0 creates an HNSW index (vector_cosine_ops)")
    diskann: bool = key(False, "mem0 creates a DiskANN index (needs pgvectorscale)")
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] | None = (
        key(None, "libpq's sslmode")
    )
    connection_string: _SecretText | None = key(
        None,
        "a libpq URI or key=value string; wins over the separate keys",
        toml='string or {env = "NAME"} / {file = "PATH"}',
        secret=True,
    )


# The vector store's settings, one model per ``provider`` (``config.vector_store``).
VectorStoreConfig = QdrantSettings | PGVectorSettings
_BY_PROVIDER: dict[str, type[VectorStoreConfig]] = {
    "qdrant": QdrantSettings,
    "pgvector": PGVectorSettings,
}


class VectorStoreSettings(_Mem0Section):
    """``[mem0.vector_store]``: which vector store mem0 uses."""

    provider: Literal["qdrant", "pgvector"] = key(
        "qdrant", "embedded Qdrant (`path`) or Postgres with pgvector"
    )
    config: Annotated[QdrantSettings | PGVectorSettings, _OrEmpty] = Field(
        default_factory=QdrantSettings,
        description="mem0's QdrantConfig, or its PGVectorConfig with provider pgvector",
    )

    @field_validator("config", mode="before")
    @classmethod
    def _config_of_provider(cls, value: Any, info: ValidationInfo) -> Any:
        """Validate ``config`` as the provider's model (a dict alone would match either).

        ``provider`` is declared first, so it is in ``info.data`` when it is valid (embedded
        Qdrant's model when it is not: its problems are still reported).
        """
        if not isinstance(value, Mapping):
            return value  # the field's own check reports it
        model = _BY_PROVIDER.get(info.data.get("provider", ""), QdrantSettings)
        return model.model_validate(value, context=info.context)


class EmbedderConfigSettings(_Mem0Section):
    """``[mem0.embedder.config]``: the embedder's settings."""

    embedding_dims: int | None = key(
        None, "when set, every collection's vector size must match it too", gt=0
    )


class EmbedderSettings(_Mem0Section):
    """``[mem0.embedder]``: mem0's embedder."""

    config: Annotated[EmbedderConfigSettings, _OrEmpty] = Field(
        default_factory=EmbedderConfigSettings, description="the embedder's config"
    )


class Mem0Settings(_Mem0Section):
    """``[mem0]``: the dict the app passes to ``mem0.Memory.from_config`` (mem0ai 2.2.1 keys)."""

    history_db_path: Mem0Path | None = key(
        None, "mem0's history database (absolute)", shown="`<mem0_dir>/history.db`"
    )
    vector_store: Annotated[VectorStoreSettings, _OrEmpty] = Field(
        default_factory=VectorStoreSettings, description="mem0's vector store"
    )
    embedder: Annotated[EmbedderSettings, _OrEmpty] = Field(
        default_factory=EmbedderSettings, description="mem0's embedder"
    )


def pgvector_problems(config: Mapping[str, Any]) -> list[str]:
    """mem0ai 2.2.1 PGVectorConfig's own rule: without connection_string, the separate keys."""
    if config.get("connection_string") is not None or config.get("connection_pool") is not None:
        return []
    where = "mem0.vector_store.config"
    problems = []
    if not config.get("user") and not config.get("password"):
        problems.append(f"{where}.user: user and password are required without connection_string")
    if not config.get("host") and not config.get("port"):
        problems.append(f"{where}.host: host and port are required without connection_string")
    return problems
