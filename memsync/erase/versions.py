"""Noncurrent S3 object versions that still hold erased memories, and their deletion.

A versioned bucket keeps every object memsync overwrote (a snapshot that ``purge-memory``
rewrote and uploaded again) or deleted (retention) as a noncurrent version. Every noncurrent
version under memsync's prefix that can hold memory text is read as its store reads it
(``erase.holding``): ``<id>/history.db`` (a history row of an erased id with text) and the files
under ``<id>/<capture_dir>/`` (a point of an erased id in the memory collection). A sealed
version is opened with ``snapshot.encrypt_key_file`` first; without the key it is "unreadable".
Sidecars (``verified.json``, ...) hold no memory text and are not read. A manifest holds no
memory text either, but its ``scopes`` name user, agent and run ids: a noncurrent
``manifest.json`` whose ``scopes`` name a scope an erasure named (the ledger keeps only its
sha256) holds it too (``SCOPE_MARK`` entries among the held ids). A version id names bytes that never change, so each verdict is kept in
``<state_dir>/erasure-scan.json`` for the set of ids it was read for: a later run with the same
ids downloads only versions it has not read (a new erasure reads them all once more).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memsync import repository, seal
from memsync.deployment import Deployment
from memsync.erase.holding import HISTORY, history_holds, points_held, work_directory
from memsync.erase.ledger import digest
from memsync.errors import MemsyncError, UnavailableError
from memsync.s3 import ObjectLockedError, ObjectVersion, TransportError, VersionsUnlistedError
from memsync.state import write_json_atomic
from memsync.stores.manifest import MANIFEST
from memsync.stores.manifest_schema import ID_PATTERN

if TYPE_CHECKING:  # boto3 loads only where a bucket is opened
    from memsync.s3 import ObjectStore

CACHE = "erasure-scan.json"
SCOPE_MARK = "scope:"  # a held "id" that is an erased scope named in a manifest, not a memory


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """A noncurrent object version holding erased memories (``memory_ids``: which of them)."""

    version: ObjectVersion
    snapshot_id: str
    memory_ids: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """``{"version", "key", "version_id", "snapshot_id", "memories", "scopes"}`` (counts)."""
        scopes = sum(1 for held in self.memory_ids if held.startswith(SCOPE_MARK))
        return {
            "version": self.version.label,
            "key": self.version.key,
            "version_id": self.version.version_id,
            "snapshot_id": self.snapshot_id,
            "memories": len(self.memory_ids) - scopes,
            "scopes": scopes,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionScan:
    """What a scan found: holding versions, unreadable ones (label -> why), how many were read."""

    hits: tuple[Hit, ...] = ()
    unreadable: dict[str, str]
    downloaded: int = 0
    cached: int = 0


def _ids_digest(memory_ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(set(memory_ids))).encode()).hexdigest()


def _load_cache(state_dir: Path, digest: str) -> dict[str, list[str]]:
    try:
        document = json.loads((state_dir / CACHE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # a lost cache costs downloads, never a wrong answer
    if not isinstance(document, dict) or document.get("ids_sha256") != digest:
        return {}
    verdicts = document.get("verdicts")
    return {str(k): list(v) for k, v in verdicts.items()} if isinstance(verdicts, dict) else {}


def candidates(store: ObjectStore, capture_dir: str) -> list[tuple[str, str, ObjectVersion]]:
    """``(snapshot id, path, version)`` of every noncurrent version that can hold memory text.

    Raises:
        UnavailableError: the bucket cannot be listed.
    """
    base = store.key("") + "/" if store.prefix else ""
    found = []
    for version in store.list_versions(base):
        if version.latest or version.delete_marker:
            continue
        snapshot_id, _, path = version.key[len(base) :].partition("/")
        if ID_PATTERN.match(snapshot_id) and (
            path in (HISTORY, MANIFEST) or path.startswith(capture_dir + "/")
        ):
            found.append((snapshot_id, path, version))
    return found


def _read(
    deployment: Deployment,
    store: ObjectStore,
    path: str,
    version: ObjectVersion,
    ids: Sequence[str],
) -> list[str]:
    """The erased ids (and ``SCOPE_MARK`` scopes) one version holds.

    Raises:
        MemsyncError: the version cannot be read (or opened without the key).
    """
    config = deployment.config
    if path == MANIFEST:
        return _scopes_named(store.get_version_bytes(version), ids)
    vectors = deployment.vector_store
    with work_directory(config) as work:
        target = work / "plain" / path
        target.parent.mkdir(parents=True, mode=0o700)
        data = store.get_version_bytes(version)
        if data.startswith(seal.MAGIC):
            key = repository.encryption_key(config)
            if key is None:
                raise MemsyncError(
                    "sealed, and no snapshot.encrypt_key_file is set to open it",
                    "set the key the snapshot was made with",
                )
            sealed = work / "sealed"
            sealed.write_bytes(data)
            try:
                seal.open_file(sealed, target, key, path)
            except seal.SealError as error:
                raise MemsyncError(str(error), "set the key the snapshot was made with") from error
        else:
            target.write_bytes(data)
        if path == HISTORY:
            return sorted(history_holds(target, ids))
        root = work / "plain" / vectors.capture_dir
        return sorted(points_held(vectors, root, vectors.collection, ids))


def _scopes_named(data: bytes, ids: Sequence[str]) -> list[str]:
    """The ``SCOPE_MARK`` entries of ``ids`` a manifest's ``scopes`` name (by their sha256)."""
    wanted = {held for held in ids if held.startswith(SCOPE_MARK)}
    try:
        scopes = json.loads(data).get("scopes") or {}
    except (ValueError, AttributeError):
        return []  # not a manifest memsync can read: it names nothing memsync knows of
    named = {
        f"{SCOPE_MARK}{kind}:{digest(str(scope_id))}"
        for kind in ("user_id", "agent_id", "run_id")
        if isinstance(scopes, dict) and isinstance(scopes.get(kind), dict)
        for scope_id in scopes[kind]
    }
    return sorted(named & wanted)


def scope_marks(scopes: Sequence[str]) -> list[str]:
    """``ledger.erased_scopes`` entries as held "ids" for ``scan``. Pure."""
    return [f"{SCOPE_MARK}{scope}" for scope in scopes]


def scan(
    deployment: Deployment,
    store: ObjectStore,
    memory_ids: Sequence[str],
    progress: Callable[[int, int], None] | None = None,
) -> VersionScan:
    """Find the noncurrent versions under the prefix that hold any of ``memory_ids``.

    ``memory_ids`` may carry ``scope_marks`` of erased scopes: a noncurrent manifest whose
    ``scopes`` name one holds it.

    Downloads only versions without a cached verdict for these ids; writes the cache atomically.

    Raises:
        UnavailableError: the bucket cannot be listed (a version that cannot be read is
            reported in ``unreadable`` instead).
    """
    config = deployment.config
    if not memory_ids:
        return VersionScan(unreadable={})
    digest = _ids_digest(memory_ids)
    cache = _load_cache(config.state_dir, digest)
    listed = candidates(store, deployment.vector_store.capture_dir)
    hits, unreadable, downloaded, cached = [], {}, 0, 0
    verdicts: dict[str, list[str]] = {}
    for index, (snapshot_id, path, version) in enumerate(listed):
        if version.label in cache:
            held, cached = cache[version.label], cached + 1
        else:
            try:
                held = _read(deployment, store, path, version, memory_ids)
            except MemsyncError as error:
                unreadable[version.label] = error.message
                continue
            downloaded += 1
        verdicts[version.label] = held
        if held:
            hits.append(Hit(version=version, snapshot_id=snapshot_id, memory_ids=tuple(held)))
        if progress is not None:
            progress(index + 1, len(listed))
    config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json_atomic(config.state_dir / CACHE, {"ids_sha256": digest, "verdicts": verdicts})
    return VersionScan(
        hits=tuple(hits), unreadable=unreadable, downloaded=downloaded, cached=cached
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Kept:
    """A version object lock kept: its retention mode and end (UTC) when the bucket says."""

    version: ObjectVersion
    mode: str | None
    retain_until: datetime | None

    def to_json(self) -> dict[str, object]:
        """``{"version", "mode", "retain_until"}``."""
        return {
            "version": self.version.label,
            "mode": self.mode,
            "retain_until": self.retain_until.isoformat() if self.retain_until else None,
        }


def delete(store: ObjectStore, hits: Sequence[Hit]) -> tuple[list[str], list[Kept], dict[str, str]]:
    """Delete the holding versions for good: ``(deleted, kept, failed)``.

    ``deleted``: labels S3 deleted (its answer named no error for them); ``kept``: versions
    object lock refused (S3 answered ``AccessDenied``), with their retention; ``failed``:
    ``{label: why}`` of every other version S3 did not delete (an error for it, or for the
    whole request). A version S3 did not delete is never counted deleted. Idempotent.
    """
    versions = [hit.version for hit in hits]
    try:
        store.delete_versions(versions)
    except ObjectLockedError as error:
        locked = {k for k, why in error.refused.items() if why.startswith("AccessDenied")}
        kept = [_kept(store, v) for v in versions if v.label in locked]
        failed = {k: why for k, why in error.refused.items() if k not in locked}
        return [v.label for v in versions if v.label not in error.refused], kept, failed
    except UnavailableError as error:  # the whole request failed: every version is left
        return [], [], {v.label: error.message for v in versions}
    return [v.label for v in versions], [], {}


def unknown_why(error: UnavailableError) -> str:
    """The ``unknown: …`` sentence for a bucket whose versions could not be listed. Pure."""
    if isinstance(error, VersionsUnlistedError):
        return f"unknown: the provider does not list object versions ({error.message})"
    if isinstance(error, TransportError):
        return f"unknown: S3 unreachable ({error.message})"
    return f"unknown: S3 did not list the versions ({error.message})"


def _kept(store: ObjectStore, version: ObjectVersion) -> Kept:
    """A version object lock kept, with its retention when the bucket says (None otherwise)."""
    try:
        mode, until = store.retention_of(version)
    except UnavailableError:
        mode, until = None, None
    return Kept(version=version, mode=mode, retain_until=until)
