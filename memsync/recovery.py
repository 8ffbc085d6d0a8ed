"""Where reconcile recovers a missing point from: the newest snapshot holding it with the right text.

Local snapshots and, with ``[s3]``, the bucket's complete ones that have no local copy are
searched newest first through the repository port; a remote one is fetched into the snapshot
directory (checked byte for byte) only when the search reaches it, and never in a dry run. Policy:
docs/reference/commands/reconcile.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import structlog

from memsync import repository
from memsync.config import Config
from memsync.errors import UnavailableError
from memsync.model import Inventory, MemoryHistory, Recovery
from memsync.repository import LocalRepository
from memsync.stores import history
from memsync.stores.manifest import Manifest
from memsync.stores.snapshots import SnapshotInfo, sha256_file
from memsync.stores.vector_store import VectorStore, vector_store_for

logger = structlog.get_logger(__name__)


def find_recoveries(
    config: Config,
    inventory: Inventory,
    missing: Iterable[str],
    work: Path,
    *,
    blocked_by_newer_vectors: bool,
    fetch: bool = True,
) -> tuple[dict[str, Recovery | None], dict[str, str]]:
    """Find, for each missing memory, the newest snapshot holding it with the expected text.

    A snapshot whose history ends the memory with DELETE blocks it (never brought back), and so
    does ``blocked_by_newer_vectors`` (vectors evidently newer than history). Reads snapshots
    (decrypting into ``work``); fetches a remote-only snapshot into the snapshot directory when
    the search reaches it. With ``fetch`` False (a dry run) nothing is downloaded: the bucket is
    only listed (manifests read), and a memory whose search reaches a remote-only snapshot stops
    there, unresolved.

    Returns:
        The recoveries (None: none found), and per memory left unresolved because ``fetch`` was
        False, the id of the remote-only snapshot that would be searched next.

    Raises:
        UnavailableError: S3 is unreachable, or a remote-only snapshot's copy is damaged.
    """
    wanted = {m: inventory.history[m] for m in missing if m in inventory.history}
    found: dict[str, Recovery | None] = dict.fromkeys(wanted)
    deferred: dict[str, str] = {}
    local = repository.local_or_none(config)
    if not wanted or blocked_by_newer_vectors or local is None:
        return found, deferred
    blocked: set[str] = set()
    store = vector_store_for(config)
    complete = {info.id for info in local.infos() if info.complete}
    for snapshot_id in sorted(complete | _remote_only(config, complete), reverse=True):
        pending = [m for m in wanted if found[m] is None and m not in blocked | set(deferred)]
        if not pending:
            break
        if not fetch and snapshot_id not in complete:
            deferred.update(dict.fromkeys(pending, snapshot_id))  # searched when applied
            continue
        info = _local_copy(config, local, snapshot_id, complete)
        if info is None or not _checksums_hold(store, info, inventory.collection):
            logger.warning(
                "snapshot_skipped", snapshot_id=snapshot_id, reason="files differ from the manifest"
            )
            continue
        root = plaintext_root(config, info, work)
        if root is not None:
            _search(store, root, snapshot_id, inventory.collection, pending, wanted, found, blocked)
    return found, deferred


def _search(
    store: VectorStore,
    root: Path,
    snapshot_id: str,
    collection: str,
    pending: list[str],
    wanted: dict[str, MemoryHistory],
    found: dict[str, Recovery | None],
    blocked: set[str],
) -> None:
    """Record in ``found`` (or ``blocked``) what one snapshot's plaintext says of ``pending``."""
    vectors = root / store.capture_dir  # what a Recovery names (the journal keeps it)
    contents = (
        history.read_contents(root / "history.db") if (root / "history.db").is_file() else None
    )
    for memory_id in pending:
        snap_last = contents.memories.get(memory_id) if contents else None
        if snap_last is not None and snap_last.last.event == "DELETE":
            blocked.add(memory_id)  # a snapshot says it was deleted: never bring it back
            continue
        stored = store.find_point(vectors, collection, memory_id)
        if stored is not None and stored.payload.get("data") == wanted[memory_id].last.new_memory:
            found[memory_id] = Recovery(snapshot_id=snapshot_id, storage=vectors)


def _remote_only(config: Config, local_ids: set[str]) -> set[str]:
    """Ids of the bucket's complete snapshots with no local copy (none without ``[s3]``)."""
    if config.s3 is None:
        return set()
    return {entry.id for entry in repository.remote(config).list() if entry.complete} - local_ids


def _local_copy(
    config: Config, local: LocalRepository, snapshot_id: str, local_ids: set[str]
) -> SnapshotInfo | None:
    """The local snapshot, fetched from the bucket first when it is remote-only.

    Raises:
        UnavailableError: the remote copy is missing a file or differs from its manifest.
    """
    if snapshot_id not in local_ids:
        repository.remote(config).fetch(snapshot_id, local.directory)
    return local.describe(snapshot_id)


def _checksums_hold(store: VectorStore, info: SnapshotInfo, collection: str) -> bool:
    """Whether the snapshot's history.db and memory collection match their manifest (stored bytes)."""
    if info.manifest is None:
        return False
    wanted = {
        "history.db",
        f"{store.capture_dir}/{store.collection_file(collection, Path()).as_posix()}",
    }
    for entry in info.manifest.files:
        if entry.path in wanted:
            path = info.path / entry.path
            if not path.is_file() or sha256_file(path) != entry.stored:
                return False
    return True


def plaintext_root(config: Config, info: SnapshotInfo, work: Path) -> Path | None:
    """The directory holding a local snapshot's plaintext (decrypted into ``work/<id>`` once).

    None when the snapshot is encrypted and no key is configured, or does not open with it.
    """
    manifest: Manifest | None = info.manifest
    if manifest is None:
        return None
    if manifest.encrypted and config.snapshot.encrypt_key_file is None:
        return None
    target = work / info.id
    if manifest.encrypted and target.exists():
        return target
    try:
        return repository.plaintext(config, info.path, manifest, target)
    except UnavailableError as error:
        logger.warning("snapshot_skipped", snapshot_id=info.id, reason=error.message)
        return None
