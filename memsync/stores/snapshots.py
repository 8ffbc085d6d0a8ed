"""The local snapshot catalogue: ids, directories, checksums (docs/reference/contract.md, "Snapshot layout").

A snapshot is ``<snapshot.directory>/<id>/`` holding ``qdrant/meta.json``,
``qdrant/collection/<name>/storage.sqlite``, ``history.db`` and ``manifest.json``, built as
``<id>.partial/`` and renamed when complete. "Verified" lives beside it in ``verified.json``.
The manifest itself is ``memsync.stores.manifest``; snapshots in a bucket, and the operations
common to both places (list, read, write then commit, verify, delete), are
``memsync.repository``, which builds on this module.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsync import flock
from memsync.errors import UnavailableError
from memsync.stores import manifest as manifests
from memsync.stores.manifest import MANIFEST, Manifest
from memsync.stores.manifest_schema import FORMAT_VERSION, ID_PATTERN, id_time, valid_id

__all__ = [
    "CHUNK_BYTES",
    "CREATING_LOCK",
    "FORMAT_VERSION",
    "ID_PATTERN",
    "MANIFEST",
    "PARTIAL_SUFFIX",
    "PINNED",
    "SIDECARS",
    "UPLOAD_PENDING",
    "VERIFIED",
    "SnapshotInfo",
    "describe",
    "id_time",
    "iter_local",
    "manifest_problem",
    "new_id",
    "parse_or_none",
    "read_json",
    "read_pin",
    "damaged_pin",
    "read_manifest",
    "read_small",
    "remove_stale_partials",
    "resolve_local",
    "sha256_file",
]

PARTIAL_SUFFIX = ".partial"
VERIFIED = "verified.json"
PINNED = "pinned.json"
UPLOAD_PENDING = "upload-pending.json"  # local only: an upload was started and has not finished
# Small JSON documents stored beside a snapshot's files, never listed in its manifest.
SIDECARS = frozenset({VERIFIED, PINNED, UPLOAD_PENDING})
CREATING_LOCK = ".creating"
CHUNK_BYTES = 1024 * 1024
manifest_problem = manifests.problem
read_manifest = manifests.read
read_small = manifests.read_small


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One snapshot in a repository (a directory or a bucket), complete or not.

    Attributes:
        id: the snapshot id (``YYYYMMDDTHHMMSSZ`` or with ``-N``).
        complete: its manifest is committed and valid (a damaged, foreign or newer one is not).
        manifest: the manifest, or None when incomplete.
        verified: the ``verified.json`` document, or None.
        size_bytes: local: plaintext bytes the manifest lists (0 when incomplete); S3: bytes of
            the objects stored.
        pin: the ``pinned.json`` document, or None (``memsync.snapshot.pins`` reads it).
    """

    id: str
    complete: bool
    manifest: Manifest | None
    verified: dict[str, Any] | None
    size_bytes: int
    pin: dict[str, Any] | None = None

    @property
    def created_at(self) -> datetime:
        """The snapshot's time (UTC), from its id."""
        return id_time(self.id)

    @property
    def is_verified(self) -> bool:
        """True when the last verification found no problem."""
        return self.verified is not None and self.verified.get("ok") is True

    @property
    def is_safety(self) -> bool:
        """True for a safety snapshot (``Manifest.safety``: it holds the damage a repair settled)."""
        return self.manifest is not None and self.manifest.safety


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotInfo(Entry):
    """A snapshot of a local snapshot directory: an ``Entry`` and its directory ``path``."""

    path: Path


def new_id(now: datetime, taken: set[str]) -> str:
    """Return ``YYYYMMDDTHHMMSSZ`` for ``now`` (UTC), with ``-N`` when taken. Pure."""
    base = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate, number = base, 1
    while candidate in taken or f"{candidate}{PARTIAL_SUFFIX}" in taken:
        candidate = f"{base}-{number}"
        number += 1
    return candidate


def sha256_file(path: Path) -> tuple[int, str]:
    """Return ``(size in bytes, sha256 hex)`` of a file, read in 1 MiB chunks. Reads only."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def read_json(path: Path) -> dict[str, Any] | None:
    """A small JSON object file (``verified.json``), or None when absent or not a JSON object."""
    try:
        document = manifests.decode(manifests.read_small(path))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def read_pin(path: Path) -> dict[str, Any] | None:
    """The ``pinned.json`` document at ``path``, or None when there is none. Reads only.

    One that exists but is not a readable JSON object (truncated, edited by hand) reads as
    ``damaged_pin``: retention keeps a snapshot whose pin it cannot read.
    """
    if not path.exists() and not path.is_symlink():
        return None
    return read_json(path) or damaged_pin(path.name)


def damaged_pin(name: str = PINNED) -> dict[str, Any]:
    """The pin document standing for an unreadable ``pinned.json``: pinned, by "unknown". Pure."""
    return {
        "pinned": True,
        "by": "unknown",
        "damaged": True,
        "reason": f"{name} is unreadable; snapshot pin ID rewrites it, snapshot unpin ID drops it",
    }


def parse_or_none(document: object, snapshot_id: str) -> Manifest | None:
    """The manifest of ``document``, or None when it is absent, damaged, foreign or newer. Pure."""
    if document is None:
        return None
    try:
        return manifests.parse(document, snapshot_id, MANIFEST)
    except UnavailableError:  # ManifestTooNew too
        return None


def describe(directory: Path) -> SnapshotInfo | None:
    """Describe one directory of the snapshot directory; None when it is not memsync's. Reads only.

    A manifest that is damaged, foreign or of a newer format leaves the snapshot incomplete here
    (listing never fails); reading it (``read_manifest``) says why.
    """
    name = directory.name
    partial = name.endswith(PARTIAL_SUFFIX)
    snapshot_id = name[: -len(PARTIAL_SUFFIX)] if partial else name
    if not ID_PATTERN.match(snapshot_id) or not valid_id(snapshot_id):
        return None
    if directory.is_symlink() or not directory.is_dir():
        return None  # memsync never makes links: not one of its snapshots
    manifest = None if partial else parse_or_none(read_json(directory / MANIFEST), snapshot_id)
    return SnapshotInfo(
        id=snapshot_id,
        path=directory,
        complete=manifest is not None,
        manifest=manifest,
        verified=None if partial else read_json(directory / VERIFIED),  # a copy's is not its own
        size_bytes=manifest.size_bytes if manifest else 0,
        pin=None if partial else read_pin(directory / PINNED),
    )


def iter_local(directory: Path) -> Iterator[SnapshotInfo]:
    """Every memsync entry of the snapshot directory (complete or partial), sorted by id. Reads only."""
    if not directory.is_dir():
        return
    entries = [describe(child) for child in sorted(directory.iterdir())]
    yield from sorted((e for e in entries if e is not None), key=lambda e: (e.id, e.complete))


def remove_stale_partials(directory: Path) -> list[Path]:
    """Remove ``<id>.partial`` directories whose writer is gone (its ``.creating`` flock is free).

    A create or a local write in progress holds ``.creating`` inside its partial directory;
    those are left. Returns the removed paths.
    """
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    for child in sorted(directory.glob(f"*{PARTIAL_SUFFIX}")):
        if not child.is_dir() or not ID_PATTERN.match(child.name[: -len(PARTIAL_SUFFIX)]):
            continue
        if flock.holder(child / CREATING_LOCK) is not None:
            continue  # a create is running
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
    return removed


def resolve_local(target: str, directory: Path | None) -> Path:
    """Return the snapshot directory named by ``target``: an id in ``directory``, or a path.

    A symbolic link is refused (memsync never makes one; nothing is read or written through it).

    Raises:
        UnavailableError: nothing is there, or it is a symbolic link.
    """
    candidate = Path(target)
    if directory is not None and ID_PATTERN.match(target):
        if (directory / target).is_symlink():
            candidate = directory / target
        elif (directory / target).is_dir():
            return directory / target
    if candidate.is_symlink():
        raise UnavailableError(
            f"snapshot {target!r} is a symbolic link, not a memsync snapshot directory",
            "name the snapshot's own directory (memsync never makes links)",
        )
    if candidate.is_dir():
        return candidate
    if "/" in target:  # a path, not an id
        raise UnavailableError(
            f"snapshot directory {target} does not exist",
            "check the path, or name the snapshot by its id (memsync snapshot list)",
        )
    where = f" in {directory}" if directory else ""
    raise UnavailableError(
        f"snapshot {target!r} not found{where}",
        "memsync snapshot list shows the snapshots there",
    )
