"""The conformance suite of the ``VectorStore`` port, written against the Protocol only.

Not collected itself: ``tests/store/test_vector_store_conformance.py`` (backends without a
server) and ``tests/pg/test_vector_store_port.py`` (every backend) import its tests and give
them a ``backend`` fixture built from ``tests/helpers/backends.py: BACKENDS``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from memsync import log
from memsync.demo import deployment as build
from memsync.errors import ConfigError, UnavailableError
from memsync.stores import backends
from memsync.stores.backends import telemetry_store_for
from memsync.stores.vector_store import VectorCapture, VectorStore
from tests.helpers.backends import Backend, embedded_qdrant


@pytest.fixture(autouse=True)
def _logs_to_this_tests_stderr():
    """Earlier CLI tests leave structlog writing to their own (closed) captured stderr."""
    log.configure()


def built_backend(provider: str, make_deployment: Any) -> Backend:
    """A backend's live store, with two entities linked through mem0's entity store."""
    from tests.helpers.backends import BACKENDS

    built = BACKENDS[provider].build(make_deployment)
    live = built.deployment.seeded.live
    dims = built.config.expected_dims[0][1]
    built.deployment.memory.entity_store.insert(
        vectors=[[0.1] * dims, [0.2] * dims],
        ids=["00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-000000000001"],
        payloads=[
            {
                "data": "Lisbon",
                "entity_type": "GPE",
                "linked_memory_ids": [live[0], live[1]],
                "user_id": "alice",
            },
            {
                "data": "tea",
                "entity_type": "PRODUCT",
                "linked_memory_ids": [live[2]],
                "user_id": "bob",
            },
        ],
    )
    return built


def _mem0_memories(memory: Any) -> dict[str, dict[str, Any]]:
    """Every memory as mem0's own ``get_all`` returns it (all users, expired ones too)."""
    found: dict[str, dict[str, Any]] = {}
    for user in build.USERS:
        result = memory.get_all(filters={"user_id": user}, top_k=10_000, show_expired=True)
        found.update({item["id"]: item for item in result["results"]})
    return found


def test_a_store_written_by_the_current_client_has_no_legacy_files(backend, tmp_path):
    backend.deployment.close()
    assert backend.store.legacy_files() == {}
    assert backend.store.capture(tmp_path / "capture").legacy_files == {}


def test_points_read_back_equal_what_mem0_get_all_returns(backend, tmp_path):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)  # the in-process Memory holds the store
    points = store.read_points(captured)
    assert {p.id for p in store.iter_points(captured, store.collection)} == points.keys()
    memories = _mem0_memories(backend.deployment.memory)
    assert points.keys() == memories.keys() == set(backend.deployment.seeded.live)
    for memory_id, item in memories.items():
        payload = points[memory_id].payload
        assert payload["data"] == item["memory"] and payload["hash"] == item["hash"]
        for key in ("created_at", "updated_at", "user_id", "agent_id", "expiration_date"):
            assert payload.get(key) == item.get(key), key
        assert item.get("metadata", {}).items() <= payload.items()
        assert points[memory_id].vector_size == backend.config.expected_dims[0][1]
    trimmed = store.read_points(captured, keys=frozenset({"data"}))
    assert all(point.payload.keys() <= {"data"} for point in trimmed.values())


def test_count_rows_of_a_capture_is_its_points_per_collection(backend, tmp_path):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)
    counted = store.count_rows(captured)
    assert counted == {
        name: sum(1 for _ in store.iter_points(captured, name)) for name in captured.copies
    }
    assert counted[store.collection] == len(backend.deployment.seeded.live)
    assert counted[store.entities_collection] == 2  # the fixture's two entities


def test_points_in_order_are_read_points_by_ascending_id(backend, tmp_path):
    store = backend.store
    keys = frozenset({"data", "hash", "user_id"})
    for vectors in (True, False):  # a snapshot's capture, and check's inventory-only one
        captured = store.capture(
            tmp_path / f"vectors-{vectors}" / store.capture_dir, vectors=vectors
        )
        points = store.read_points(captured, keys)
        seen: list[tuple[int, int]] = []
        ordered = list(store.points_in_order(captured, keys, lambda *at: seen.append(at)))  # noqa: B023
        assert len(points) >= 30 and ordered == [points[key] for key in sorted(points)]
        assert seen[-1] == (len(points), len(points))


def test_collection_params_of_live_store_and_capture_agree_with_the_config(backend, tmp_path):
    store = backend.store
    live = store.read_collections()
    captured = store.capture(tmp_path / store.capture_dir)
    assert live is not None and live == captured.collections
    memory_collection = live[store.collection]
    assert memory_collection.vector_size == backend.config.expected_dims[0][1]
    assert memory_collection.distance == "Cosine"
    assert store.entities_collection in live


def test_entity_links_of_a_capture_match_the_live_links_and_point_at_live_memories(
    backend, tmp_path
):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)
    links = store.read_entities(captured)
    assert links == store.read_live_entities()
    live = backend.deployment.seeded.live
    assert [(link.entity_id, link.text, link.linked_memory_ids) for link in links] == [
        ("00000000-0000-4000-8000-000000000001", "tea", (live[2],)),
        ("00000000-0000-4000-8000-000000000002", "Lisbon", (live[0], live[1])),
    ]


def test_find_point_returns_the_stored_payload_and_dense_vector(backend, tmp_path):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)
    memory_id = backend.deployment.seeded.live[0]
    stored = store.find_point(captured.root, store.collection, memory_id)
    assert stored is not None and stored.vector is not None
    assert len(stored.vector) == backend.config.expected_dims[0][1]
    assert stored.payload["data"] == store.read_points(captured)[memory_id].payload["data"]
    assert (
        store.find_point(captured.root, store.collection, "00000000-0000-0000-0000-000000000000")
        is None
    )


def test_iter_stored_yields_every_point_of_iter_points_with_its_whole_payload_and_vector(
    backend, tmp_path
):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)
    dims = backend.config.expected_dims[0][1]
    for collection in (store.collection, store.entities_collection):
        stored = dict(store.iter_stored(captured, collection))
        points = {p.id: p for p in store.iter_points(captured, collection)}
        assert set(stored) == set(points) and stored
        for point_id, one in stored.items():
            assert points[point_id].payload.items() <= one.payload.items()  # iter_points trims
            assert one.vector is not None and len(one.vector) == dims
            assert one == store.find_point(captured.root, collection, point_id)
    memory_id = backend.deployment.seeded.live[0]
    assert (
        "text_lemmatized" in dict(store.iter_stored(captured, store.collection))[memory_id].payload
    )
    assert list(store.iter_stored(captured, "no-such-collection")) == []


def test_iter_stored_refuses_an_inventory_capture_without_vectors_where_the_store_drops_them(
    backend, tmp_path
):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir, vectors=False)
    if store.kind == "embedded-qdrant":  # copies its files whole: vectors are there anyway
        assert all(s.vector for _i, s in store.iter_stored(captured, store.collection))
    else:
        with pytest.raises(UnavailableError, match="vector sizes only"):
            list(store.iter_stored(captured, store.collection))


def test_files_of_the_live_store_and_its_capture_are_the_same_list(backend, tmp_path):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)
    files = store.files(captured.root)
    if store.location is not None:  # a store of files: the capture has the same ones
        assert store.files(store.location) == files
    assert files == sorted(set(files), key=files.index) and files[0] == store.index_file
    for name in captured.copies:
        assert str(store.collection_file(name, captured.root).relative_to(captured.root)) in files
    assert all((captured.root / relative).is_file() for relative in files)


def test_check_copy_passes_a_fresh_capture_and_open_capture_describes_it(backend, tmp_path):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)
    verdicts = store.check_copy(captured)
    assert verdicts and set(verdicts.values()) == {"ok"}
    assert set(verdicts) <= set(store.files(captured.root))
    reopened = store.open_capture(
        captured.root,
        captured.copies[store.collection].started_at,
        captured.copies[store.collection].finished_at,
    )
    assert isinstance(reopened, VectorCapture)
    assert (
        reopened.collections == captured.collections
        and reopened.copies.keys() == captured.copies.keys()
    )
    assert store.read_points(reopened) == store.read_points(captured)


def test_damaged_store_raises_unavailable_and_a_damaged_copy_fails_its_check(backend, tmp_path):
    store = backend.store
    healthy = store.capture(tmp_path / "healthy" / store.capture_dir)
    backend.deployment.close()
    backend.damage()
    with pytest.raises(UnavailableError):
        store.read_points(store.capture(tmp_path / "damaged" / store.capture_dir))
    copy = healthy.copies[store.collection].dest
    with copy.open("r+b") as handle:
        handle.truncate(copy.stat().st_size // 2)
    entities = healthy.copies[store.entities_collection].dest
    entities.write_bytes(b"not a database at all" * 100)
    verdicts = store.check_copy(healthy)  # a verdict per file, never an exception
    for name in (store.collection, store.entities_collection):
        assert (
            verdicts[str(store.collection_file(name, healthy.root).relative_to(healthy.root))]
            != "ok"
        )


def test_check_copy_runs_the_integrity_check_and_the_decoding_apart(backend, tmp_path):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)
    memory_file = str(
        store.collection_file(store.collection, captured.root).relative_to(captured.root)
    )
    backend.spoil(captured)
    assert set(store.check_copy(captured, decode=False).values()) == {"ok"}  # the file is sound
    assert set(store.check_copy(captured, quick=True, decode=False).values()) == {"ok"}
    for verdicts in (store.check_copy(captured), store.check_copy(captured, integrity=False)):
        assert verdicts[memory_file] != "ok" and memory_file in verdicts[memory_file]
        assert {v for name, v in verdicts.items() if name != memory_file} == {"ok"}
    only_entities = replace(
        captured, copies={store.entities_collection: captured.copies[store.entities_collection]}
    )
    assert list(store.check_copy(only_entities)) == [
        str(
            store.collection_file(store.entities_collection, captured.root).relative_to(
                captured.root
            )
        )
    ]
    assert store.index_file in store.files(captured.root)


def test_holds_data_until_the_store_is_gone_and_the_telemetry_store_is_its_own(backend):
    store = backend.store
    assert store.holds_data()
    if store.location is not None:
        assert store.index_file in store.files(store.location)
    telemetry = telemetry_store_for(backend.config)
    assert isinstance(telemetry, VectorStore) and telemetry.where != store.where
    backend.deployment.close()
    backend.remove()
    assert store.holds_data() is False


def test_absent_store_is_not_present_and_captures_nothing(backend, tmp_path):
    store = backend.store
    backend.deployment.close()
    backend.remove()
    assert store.present() is False and store.read_collections() is None
    captured = store.capture(tmp_path / store.capture_dir)
    assert captured.present is False and captured.copies == {} and captured.collections == {}
    assert store.read_points(captured) == {} and store.read_entities(captured) == ()
    assert store.location is None or store.files(store.location) == []


def test_erase_points_removes_them_from_a_copy_and_repeats_as_a_no_op(backend, tmp_path):
    store = backend.store
    captured = store.capture(tmp_path / store.capture_dir)
    gone = backend.deployment.seeded.live[:2]
    assert store.erase_points(captured.root, gone) >= 2
    assert not set(gone) & store.read_points(captured).keys()
    assert len(store.read_points(captured)) == len(backend.deployment.seeded.live) - 2
    assert store.erase_points(captured.root, gone) == 0
    assert store.find_point(captured.root, store.collection, gone[0]) is None


def test_compact_leaves_no_trace_of_a_deleted_memory_in_the_live_files(backend, tmp_path):
    store = backend.store
    victim = backend.deployment.seeded.live[0]
    text = backend.deployment.memory.get(victim)["memory"]
    assert any(text.encode() in path.read_bytes() for path in backend.live_files())
    backend.deployment.memory.delete(victim)
    backend.deployment.close()
    assert store.compact()  # says what it did
    for path in backend.live_files():
        assert text.encode() not in path.read_bytes()
    points = store.read_points(store.capture(tmp_path / store.capture_dir))
    assert victim not in points and len(points) == len(backend.deployment.seeded.live) - 1


def test_remove_store_measures_on_a_dry_run_then_removes_both_collections(backend, tmp_path):
    store = backend.store
    backend.deployment.close()
    measured = store.remove_store(dry_run=True)
    assert measured > 0 and store.present() and store.holds_data()
    assert store.remove_store() == measured
    assert store.present() is False and store.holds_data() is False
    assert store.read_collections() is None  # the entity collection is gone too
    assert store.remove_store() == 0  # idempotent


def test_remove_store_refuses_a_directory_holding_anything_but_a_store(make_deployment):
    backend = embedded_qdrant(make_deployment)  # a server store has no directory to share
    store = backend.store
    assert store.location is not None
    backend.deployment.close()
    (store.location / "notes.txt").write_text("the operator's own file", encoding="utf-8")
    with pytest.raises(ConfigError, match="notes.txt is not an embedded Qdrant file"):
        store.remove_store(dry_run=True)
    with pytest.raises(ConfigError, match="notes.txt"):
        store.remove_store()
    assert store.present() and (store.location / "notes.txt").is_file()


def test_the_registry_builds_the_store_and_reads_its_capture_back_as_a_snapshot_layout(
    backend, tmp_path
):
    store = backend.store
    built = backends.backend_for(backend.config.vector_store)
    assert (built.kind, built.where, built.collection) == (
        store.kind,
        store.where,
        store.collection,
    )
    assert backends.backend_of_kind(store.kind).label == store.label
    assert backends.backend_of_mode(store.mode).label == store.label
    backend.deployment.close()
    captured = store.capture(tmp_path / store.capture_dir)
    layout = backends.layout_store(tmp_path)  # the plaintext root of a snapshot
    assert (layout.kind, layout.capture_dir) == (store.kind, store.capture_dir)
    reopened = layout.open_capture(captured.root, captured.copies[store.collection].started_at,
                                   captured.copies[store.collection].finished_at)  # fmt: skip
    assert layout.read_points(reopened).keys() == store.read_points(captured).keys()


def test_what_only_some_backends_do_is_answered_by_every_backend(backend, tmp_path):
    store = backend.store
    backend.deployment.close()
    assert (store.staging() is None) == (store.location is not None)  # files move, servers stage
    assert store.probe_set_aside() == [] and store.erase_set_aside(["x"]) == []  # none set aside
    assert store.refuse_dims(backend.config.expected_dims[0][1]) is None
    what, causes, _path = store.describe_missing(True)
    assert repr(store.collection) in what and causes
    versions = store.captured_versions(store.capture(tmp_path / store.capture_dir))
    assert all(isinstance(v, str) for v in versions.values())
    if store.location is None:  # a server names its own versions in the manifest
        assert {"postgresql", "pgvector"} <= versions.keys()
    results = store.probe_server(backend.config.expected_dims)
    assert {r.code for r in results} <= set(backends.doctor_codes())
    assert all(r.status != "error" for r in results)


def test_erase_old_deletes_the_points_from_the_store_itself_and_repeats_as_a_no_op(
    backend, tmp_path
):
    store = backend.store
    backend.deployment.close()
    before = store.read_points(store.capture(tmp_path / "before" / store.capture_dir))
    gone = sorted(before)[:2]
    assert store.erase_old(gone) >= 2
    after = store.read_points(store.capture(tmp_path / "after" / store.capture_dir))
    assert after.keys() == before.keys() - set(gone)
    assert store.erase_old(gone) == 0
