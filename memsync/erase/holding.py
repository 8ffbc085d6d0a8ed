"""Whether a copy still holds erased memories, read as the stores read it.

A history database holds a memory while a history row of its id carries text (``old_memory``
or ``new_memory``); a vector store copy holds it while a point with its id is there. memsync's
copies are written by ``VACUUM INTO`` or rewritten with ``VACUUM``, so no free page keeps a row
the tables no longer reference. Sealed snapshot files are opened with the configured key first
(``snapshot.encrypt_key_file``); without it the answer is "unknown" (None).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from memsync import repository, state
from memsync.config import Config
from memsync.config.scratch import ScratchLayout
from memsync.deployment import Deployment
from memsync.errors import MemsyncError, UnavailableError
from memsync.repository import reading
from memsync.stores import snapshots
from memsync.stores.backends import backend_of_mode
from memsync.stores.sqlite_files import translate
from memsync.stores.vector_store import VectorStore

HISTORY = "history.db"


def history_holds(history_db: Path, memory_ids: Sequence[str]) -> set[str]:
    """The ids among ``memory_ids`` with a history row that still has text. Reads only.

    Raises:
        UnavailableError: the file is not a readable SQLite history database.
    """
    if not memory_ids:
        return set()
    connection = sqlite3.connect(f"file:{history_db}?mode=ro", uri=True)
    try:
        marks = ",".join("?" * len(memory_ids))
        rows = connection.execute(
            f"SELECT DISTINCT memory_id FROM history WHERE memory_id IN ({marks}) AND "
            "(old_memory IS NOT NULL OR new_memory IS NOT NULL)",
            list(memory_ids),
        ).fetchall()
        return {str(row[0]) for row in rows}
    except sqlite3.Error as error:
        raise translate(error, history_db, "read history") from error
    finally:
        connection.close()


def points_held(
    store: VectorStore, vectors: Path, collection: str, memory_ids: Sequence[str]
) -> set[str]:
    """The ids among ``memory_ids`` with a point in ``collection`` of the copy at ``vectors``."""
    return {m for m in memory_ids if store.find_point(vectors, collection, m) is not None}


@contextmanager
def work_directory(config: Config) -> Iterator[Path]:
    """A private temporary directory under ``work_dir``, removed afterwards."""
    with reading.scratch(config, "erase") as name:  # a killed run's: removed by the next
        yield name


def _plain_root(
    deployment: Deployment, info: snapshots.SnapshotInfo, work: Path, vectors_only: bool = False
) -> Path | None:
    """The plaintext of a complete snapshot's history and vector files; None: sealed, no key.

    Raises:
        UnavailableError: a sealed file fails authentication with the configured key.
    """
    config = deployment.config
    manifest = info.manifest
    assert manifest is not None, "only complete snapshots"
    if not manifest.encrypted:
        return info.path
    key = repository.encryption_key(config)
    if key is None:
        return None
    store = deployment.vector_store
    wanted = [
        e
        for e in manifest.files
        if e.path.startswith(store.capture_dir + "/") or (e.path == HISTORY and not vectors_only)
    ]
    failed = repository.decrypt(info.path, wanted, key, work)
    if failed:
        path, why = sorted(failed.items())[0]
        raise UnavailableError(f"snapshot {info.id}: {why}", "check snapshot.encrypt_key_file")
    return work


def other_backend(deployment: Deployment, info: snapshots.SnapshotInfo) -> str | None:
    """The snapshot's backend (``"embedded Qdrant"``, ``"pgvector"``) when not the config's.

    A snapshot taken before ``memsync migrate --switch`` moved the deployment to the other
    backend; None when it is the config's. Pure.
    """
    if info.manifest is None:
        return None
    taken = backend_of_mode(info.manifest.mode).label
    configured = deployment.vector_store.label
    return None if taken == configured else taken


def snapshot_holds(
    deployment: Deployment, info: snapshots.SnapshotInfo, memory_ids: Sequence[str]
) -> bool | None:
    """Whether a complete local snapshot holds any of the memories; None when it cannot tell.

    None: sealed and no key, or a snapshot of the other backend whose history.db does not
    name them (this config's vector store cannot read its vector files).
    """
    config = deployment.config
    store = deployment.vector_store
    with work_directory(config) as work:
        root = _plain_root(deployment, info, work)
        if root is None:
            return None
        if (root / HISTORY).is_file() and history_holds(root / HISTORY, memory_ids):
            return True
        if other_backend(deployment, info) is not None:
            return None
        return any(
            store.find_point(root / store.capture_dir, store.collection, m) is not None
            for m in memory_ids
        )


def snapshots_holding(deployment: Deployment, memory_ids: Sequence[str]) -> list[str]:
    """The complete local snapshots that hold any of the memories, or may (sealed, no key)."""
    config = deployment.config
    if config.snapshot.directory is None or not memory_ids:
        return []
    return [
        info.id
        for info in snapshots.iter_local(config.snapshot.directory)
        if info.complete and snapshot_holds(deployment, info, memory_ids) is not False
    ]


def snapshot_points(deployment: Deployment) -> Iterator[tuple[str, str, Mapping[str, object]]]:
    """``(snapshot id, point id, payload)`` of every point of every complete local snapshot.

    Sealed snapshots are opened with the configured key (skipped without one). Reads only.
    """
    config = deployment.config
    if config.snapshot.directory is None:
        return
    store = deployment.vector_store
    for info in snapshots.iter_local(config.snapshot.directory):
        if not info.complete or info.manifest is None:
            continue
        with work_directory(config) as work:
            root = _plain_root(deployment, info, work, vectors_only=True)
            if root is None:
                continue
            window = info.manifest.capture
            capture = store.open_capture(
                root / store.capture_dir, window.vectors_at, window.vectors_finished_at
            )
            for point in store.read_points(capture).values():
                yield info.id, point.id, point.payload


def restored_to_points(deployment: Deployment) -> Iterator[tuple[Path, str, Mapping[str, object]]]:
    """``(copy, point id, payload)`` of every point of the copies ``restore --to`` made.

    The copies ``state.restored_to`` records that hold a vector store of files; one that cannot
    be read is passed over (``erase.copies`` lists it as "maybe"). Reads only.
    """
    store = deployment.vector_store
    for copy in state.restored_to(deployment.config.state_dir):
        vectors = ScratchLayout(root=copy).vectors
        if not vectors.is_dir():
            continue
        try:
            now = datetime.now(UTC)
            points = store.read_points(store.open_capture(vectors, now, now))
        except (MemsyncError, OSError):
            continue
        for point in points.values():
            yield copy, point.id, point.payload


def scope_ids(deployment: Deployment, scope: Mapping[str, str]) -> set[str]:
    """Ids of the points whose payload matches ``scope`` in any complete local snapshot.

    Sealed snapshots are opened with the configured key (skipped without one). Reads only.
    """
    return {
        point_id
        for _, point_id, payload in snapshot_points(deployment)
        if all(payload.get(k) == v for k, v in scope.items())
    }
