"""Where reconcile recovers a missing point from: the newest snapshot holding it with the right text.

Local snapshots and, with ``[s3]``, the bucket's complete ones that have no local copy are
searched newest first through the repository port. Each snapshot's manifest is read first: one
whose vectors were captured before a memory's last history event (or that holds no point, or
whose own check found that memory's point missing) cannot hold its text, and is not read for it.
Of a snapshot that can, only history.db and the memory collection's file are read: a local one
in place, a remote one downloaded into the caller's scratch area (``memsync.repository.reading``),
checked byte for byte, never into the snapshot directory, and never in a dry run. What was read
is recorded (``SnapshotRead``). Policy: docs/reference/commands/reconcile.md.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from memsync import repository
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ConfigError, UnavailableError
from memsync.model import Inventory, MemoryHistory, Recovery
from memsync.repository import SnapshotRepository, reading
from memsync.stores import history
from memsync.stores.manifest import Manifest
from memsync.stores.snapshots import SnapshotInfo
from memsync.stores.vector_store import VectorStore

logger = structlog.get_logger(__name__)

# Why a snapshot was not read: its manifest shows it cannot hold any memory still looked for.
CANNOT_HOLD = "its manifest shows it cannot hold the memories looked for"


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotRead:
    """What the search did with one snapshot.

    Attributes:
        snapshot_id: the snapshot.
        side: ``"local"`` (read in place) or ``"remote"`` (downloaded into the scratch area).
        files: the files read (empty when only its manifest was).
        fetched_bytes: bytes downloaded (0 for a local snapshot).
        skipped: why its files were not read (None: they were).
    """

    snapshot_id: str
    side: str
    files: tuple[str, ...] = ()
    fetched_bytes: int = 0
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"snapshot", "side", "files", "fetched_bytes", "skipped"}`` (reconcile's ``read[]``)."""
        return {
            "snapshot": self.snapshot_id,
            "side": self.side,
            "files": list(self.files),
            "fetched_bytes": self.fetched_bytes,
            "skipped": self.skipped,
        }


def find_recoveries(
    deployment: Deployment,
    inventory: Inventory,
    missing: Iterable[str],
    work: Path,
    *,
    blocked_by_newer_vectors: bool,
    fetch: bool = True,
    reads: list[SnapshotRead] | None = None,
) -> tuple[dict[str, Recovery | None], dict[str, str]]:
    """Find, for each missing memory, the newest snapshot holding it with the expected text.

    A snapshot whose history ends the memory with DELETE blocks it (never brought back), and so
    does ``blocked_by_newer_vectors`` (vectors evidently newer than history). Reads local
    snapshots in place (decrypting into ``work``) and downloads a remote-only snapshot's
    history.db and memory collection into ``work/<id>`` when the search reaches one that can
    hold a memory (``can_hold``); a remote snapshot searched without a recovery is removed from
    ``work`` at once. ``work`` is the caller's scratch area: a ``Recovery`` names files in it.
    With ``fetch`` False (a dry run) nothing is downloaded: the bucket is only listed
    (manifests read), and a memory whose search reaches a remote-only snapshot that can hold it
    stops there, unresolved. ``reads``, when given, gets one ``SnapshotRead`` per snapshot
    the search reached, in order.

    Returns:
        The recoveries (None: none found), and per memory left unresolved because ``fetch`` was
        False, the id of the remote-only snapshot that would be searched next.

    Raises:
        UnavailableError: S3 is unreachable, or a remote-only snapshot's copy is damaged.
    """
    config = deployment.config
    wanted = {m: inventory.history[m] for m in missing if m in inventory.history}
    found: dict[str, Recovery | None] = dict.fromkeys(wanted)
    deferred: dict[str, str] = {}
    local = repository.local_or_none(config)
    if not wanted or blocked_by_newer_vectors or local is None:
        return found, deferred
    log = reads if reads is not None else []
    blocked: set[str] = set()
    store = deployment.vector_store
    margin = timedelta(seconds=config.check.in_flight_margin_s)
    manifests = {info.id: info.manifest for info in local.infos() if info.complete}
    sides: dict[str, SnapshotRepository] = dict.fromkeys(manifests, local)
    remote = _remote_only(config, set(manifests))
    for snapshot_id, (side, manifest) in remote.items():
        sides[snapshot_id], manifests[snapshot_id] = side, manifest
    for snapshot_id in sorted(manifests, reverse=True):
        pending = [m for m in wanted if found[m] is None and m not in blocked | set(deferred)]
        if not pending:
            break
        where = "local" if sides[snapshot_id] is local else "remote"
        manifest = manifests[snapshot_id]
        able = [
            m for m in pending if manifest is not None and can_hold(manifest, wanted[m], margin)
        ]
        if not able:
            log.append(SnapshotRead(snapshot_id=snapshot_id, side=where, skipped=CANNOT_HOLD))
            continue
        if not fetch and where == "remote":
            deferred.update(dict.fromkeys(able, snapshot_id))  # searched when applied
            continue
        paths = ["history.db", *_collection_paths(store, inventory.collection)]
        try:
            opened = reading.open_files(config, sides[snapshot_id], snapshot_id, paths, work)
        except (UnavailableError, ConfigError) as error:
            if where == "remote" and isinstance(error, UnavailableError):
                raise  # S3 unreachable, or its copy damaged: never taken for "not there"
            reason = error.message if isinstance(error, UnavailableError) else str(error)
            logger.warning("snapshot_skipped", snapshot_id=snapshot_id, reason=reason)
            log.append(SnapshotRead(snapshot_id=snapshot_id, side=where, skipped=reason))
            _drop(work, snapshot_id)
            continue
        log.append(
            SnapshotRead(
                snapshot_id=snapshot_id,
                side=where,
                files=opened.paths,
                fetched_bytes=opened.fetched_bytes,
            )
        )
        before = sum(1 for m in wanted if found[m] is not None)
        _search(store, opened.root, snapshot_id, inventory.collection, able, wanted, found, blocked)
        if sum(1 for m in wanted if found[m] is not None) == before:
            _drop(work, snapshot_id)  # nothing recovered from it: its copies are not needed
    return found, deferred


def can_hold(manifest: Manifest, memory: MemoryHistory, margin: timedelta) -> bool:
    """Whether a snapshot may hold (or know the deletion of) a memory's last text. Pure.

    Not when its memory collection is empty, when its own check found that memory's point
    missing, or when its vectors were copied before the memory's last history event was
    stamped (mem0 stamps an event before it writes the point): such a snapshot has an older
    text or none, and its history cannot end the memory with DELETE. Only a stamp with a UTC
    offset counts (a naive one may be local time), and only more than ``margin`` (``[check]
    in_flight_margin_s``) after the copy: a snapshot read for nothing costs bytes, one skipped
    wrongly a memory.
    """
    if manifest.points == 0:
        return False
    own = manifest.check.get("findings")
    for finding in own if isinstance(own, list) else ():
        if (
            isinstance(finding, dict)
            and finding.get("code") == "missing-point"
            and finding.get("memory_id") == memory.memory_id
        ):
            return False
    at = _stamped(memory.last.updated_at) or _stamped(memory.last.created_at)
    return at is None or manifest.capture.vectors_finished_at + margin >= at


def _stamped(value: str | None) -> datetime | None:
    """An ISO 8601 stamp with a UTC offset, in UTC; None when naive or unparseable. Pure."""
    try:
        parsed = datetime.fromisoformat(value) if value else None
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed is not None and parsed.tzinfo is not None else None


def _collection_paths(store: VectorStore, collection: str) -> list[str]:
    """The files reading the memory collection needs, under every name they may have. Pure.

    ``open_files`` keeps the ones the snapshot's manifest lists.
    """
    return [f"{store.capture_dir}/{name}" for name in store.capture_names(collection)]


def _drop(work: Path, snapshot_id: str) -> None:
    """Remove what ``reading.open_files`` put in ``work`` for one snapshot."""
    for name in (snapshot_id, f"{snapshot_id}.plain"):
        shutil.rmtree(work / name, ignore_errors=True)


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


def _remote_only(
    config: Config, local_ids: set[str]
) -> dict[str, tuple[SnapshotRepository, Manifest | None]]:
    """The bucket's complete snapshots with no local copy, with their manifests ({} without ``[s3]``)."""
    if config.s3 is None:
        return {}
    remote = repository.remote(config)
    return {
        entry.id: (remote, entry.manifest)
        for entry in remote.list()
        if entry.complete and entry.id not in local_ids
    }


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
