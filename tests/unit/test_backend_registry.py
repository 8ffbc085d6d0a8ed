"""The vector-store registry: one line per backend, one conformance entry per registered provider."""

from __future__ import annotations

from pathlib import Path

from memsync.config import PGVectorSettings, QdrantSettings
from memsync.stores import backends
from memsync.stores.vector_store import VectorStore
from tests.helpers.backends import BACKENDS


def test_every_registered_provider_has_an_entry_in_the_conformance_table():
    assert set(BACKENDS) == set(backends.providers())


def test_the_registry_builds_each_provider_from_its_settings():
    qdrant = backends.backend_for(QdrantSettings(path=Path("/srv/qdrant"), collection_name="m"))
    pg = backends.backend_for(PGVectorSettings(collection_name="m", host="db", user="app"))
    assert isinstance(qdrant, VectorStore) and isinstance(pg, VectorStore)
    assert (qdrant.kind, qdrant.location, qdrant.collection) == (
        "embedded-qdrant",
        Path("/srv/qdrant"),
        "m",
    )
    assert (pg.kind, pg.location, pg.entities_collection) == ("pgvector", None, "m_entities")
    assert {qdrant.label, pg.label} == {"embedded Qdrant", "pgvector"}


def test_a_manifest_mode_names_its_backend_and_an_unknown_one_is_the_default():
    assert backends.backend_of_mode("pgvector").label == "pgvector"
    assert backends.backend_of_mode("embedded").label == "embedded Qdrant"
    assert backends.backend_of_mode("anything-else").label == "embedded Qdrant"


def test_a_snapshot_layout_is_read_by_the_backend_whose_directory_it_holds(tmp_path):
    (tmp_path / "qdrant").mkdir()
    assert backends.layout_store(tmp_path).location == tmp_path / "qdrant"
    (tmp_path / "pgvector").mkdir()
    assert backends.layout_store(tmp_path).kind == "pgvector"
