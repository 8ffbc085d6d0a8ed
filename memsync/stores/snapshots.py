"""The snapshot catalogue: ids, directories, manifests, checksums (CONTRACT.md, "Snapshots").

A snapshot is ``<snapshot.directory>/<id>/`` holding ``qdrant/meta.json``,
``qdrant/collection/<name>/storage.sqlite``, ``history.db`` and ``manifest.json``, built as
``<id>.partial/`` and renamed when complete. "Verified" lives beside it in ``verified.json``.
Restore and reconcile read snapshots through this module, never through ``memsync.snapshot``.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from memsync.errors import UnavailableError

ID_PATTERN = re.compile(r"^(\d{8}T\d{6}Z)(?:-(\d+))?$")
PARTIAL_SUFFIX = ".partial"
MANIFEST = "manifest.json"
VERIFIED = "verified.json"
CREATING_LOCK = ".creating"
FORMAT_VERSION = 1
CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotInfo:
    """One entry of a snapshot directory (complete or not).

    Attributes:
        id: the snapshot id (``YYYYMMDDTHHMMSSZ`` or with ``-N``).
        path: its directory.
        complete: renamed from ``.partial`` and holding a readable memsync manifest.
        manifest: the manifest document, or None.
        verified: the ``verified.json`` document, or None.
        size_bytes: bytes of the files the manifest lists (0 when incomplete).
    """

    id: str
    path: Path
    complete: bool
    manifest: dict[str, Any] | None
    verified: dict[str, Any] | None
    size_bytes: int

    @property
    def created_at(self) -> datetime:
        """The snapshot's time (UTC), from its id."""
        return id_time(self.id)

    @property
    def is_verified(self) -> bool:
        """True when the last verification found no problem."""
        return bool(self.verified and self.verified.get("ok"))


def id_time(snapshot_id: str) -> datetime:
    """The UTC time a snapshot id encodes. Raises ValueError for a malformed id."""
    match = ID_PATTERN.match(snapshot_id)
    if not match:
        raise ValueError(f"not a snapshot id: {snapshot_id!r}")
    return datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def new_id(now: datetime, taken: set[str]) -> str:
    """Return ``YYYYMMDDTHHMMSSZ`` for ``now`` (UTC), with ``-N`` when taken. Pure."""
    base = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate, number = base, 1
    while candidate in taken or f"{candidate}{PARTIAL_SUFFIX}" in taken:
        candidate = f"{base}-{number}"
        number += 1
    return candidate


def sha256_file(path: Path) -> tuple[int, str]:
    """Return ``(size in bytes, sha256 hex)`` of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def sha256_stream(stream: BinaryIO) -> tuple[int, str]:
    """Return ``(size, sha256 hex)`` of what remains in a binary stream."""
    digest = hashlib.sha256()
    size = 0
    while chunk := stream.read(CHUNK_BYTES):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def canonical(document: dict[str, Any]) -> bytes:
    """The bytes a manifest signature covers: sorted keys, no ``signature`` field."""
    unsigned = {key: value for key, value in document.items() if key != "signature"}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":")).encode("utf-8")


def sign(document: dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 (hex) of the manifest's canonical bytes."""
    return hmac.new(key, canonical(document), hashlib.sha256).hexdigest()


def signature_ok(document: dict[str, Any], key: bytes) -> bool:
    """True when the manifest carries a valid signature for ``key``."""
    stated = document.get("signature")
    return isinstance(stated, str) and hmac.compare_digest(stated, sign(document, key))


def read_manifest(directory: Path) -> dict[str, Any]:
    """Read ``manifest.json`` of a snapshot directory. Reads only.

    Raises:
        UnavailableError: it is missing, unreadable or not a memsync manifest.
    """
    path = directory / MANIFEST
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UnavailableError(f"snapshot {directory} has no {MANIFEST}", "it is incomplete") from None
    except (OSError, ValueError) as error:
        raise UnavailableError(f"manifest {path} is unreadable: {error}") from error
    problem = manifest_problem(document, directory.name)
    if problem or not isinstance(document, dict):
        raise UnavailableError(f"manifest {path} is not valid: {problem}", "use another snapshot")
    return document


_LAYOUT = re.compile(r"^(history\.db|qdrant/meta\.json|qdrant/collection/(?!\.{1,2}/)[A-Za-z0-9_.-]{1,255}/storage\.sqlite)$")


def manifest_problem(document: object, expected_id: str | None) -> str | None:
    """What makes a manifest unusable, or None. Pure.

    Every listed path must be one of the snapshot layout's own files (``history.db``,
    ``qdrant/meta.json``, ``qdrant/collection/<name>/storage.sqlite``), listed once, with an
    integer size and a hex sha256; the id must be a snapshot id (and the expected one). A
    manifest is data from disk or a bucket: nothing in it may name a path outside the snapshot.
    """
    if not isinstance(document, dict) or document.get("format") != FORMAT_VERSION:
        return f"not a memsync manifest (format {FORMAT_VERSION})"
    snapshot_id = document.get("id")
    if not isinstance(snapshot_id, str) or not ID_PATTERN.match(snapshot_id) or not _valid_time(snapshot_id):
        return f"invalid snapshot id {snapshot_id!r}"
    if expected_id is not None and snapshot_id != expected_id.split(".", 1)[0]:  # id, id.partial, id.purging
        return f"its id {snapshot_id!r} is not the snapshot's name {expected_id!r}"
    files = document.get("files")
    if not isinstance(files, list) or not files:
        return "no file list"
    seen: set[str] = set()
    for entry in files:
        if not isinstance(entry, dict):
            return "a file entry is not an object"
        path = entry.get("path")
        if not isinstance(path, str) or not _LAYOUT.match(path) or path in seen:
            return f"file path {path!r} is not part of the snapshot layout (or listed twice)"
        seen.add(path)
        for size_key, sha_key in (("size", "sha256"), ("stored_size", "stored_sha256")):
            if size_key not in entry and size_key == "stored_size":
                continue
            size, digest = entry.get(size_key), entry.get(sha_key)
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                return f"{path}: invalid {size_key}"
            if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
                return f"{path}: invalid {sha_key}"
    return None


def _valid_time(snapshot_id: str) -> bool:
    try:
        id_time(snapshot_id)
    except ValueError:
        return False
    return True


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def describe(directory: Path) -> SnapshotInfo | None:
    """Describe one directory of the snapshot directory; None when it is not memsync's."""
    name = directory.name
    partial = name.endswith(PARTIAL_SUFFIX)
    snapshot_id = name[: -len(PARTIAL_SUFFIX)] if partial else name
    if not ID_PATTERN.match(snapshot_id) or not _valid_time(snapshot_id):
        return None
    if directory.is_symlink() or not directory.is_dir():
        return None  # memsync never makes links: not one of its snapshots
    manifest = None if partial else _read_json(directory / MANIFEST)
    if manifest is not None and manifest_problem(manifest, snapshot_id) is not None:
        manifest = None
    size = sum(int(item.get("size", 0)) for item in (manifest or {}).get("files", []))
    return SnapshotInfo(
        id=snapshot_id,
        path=directory,
        complete=manifest is not None,
        manifest=manifest,
        verified=_read_json(directory / VERIFIED),
        size_bytes=size,
    )


def iter_local(directory: Path) -> Iterator[SnapshotInfo]:
    """Every memsync entry of the snapshot directory (complete or partial), sorted by id."""
    if not directory.is_dir():
        return
    entries = [describe(child) for child in sorted(directory.iterdir())]
    yield from sorted((e for e in entries if e is not None), key=lambda e: (e.id, e.complete))


def remove_stale_partials(directory: Path) -> list[Path]:
    """Remove ``<id>.partial`` directories whose creator is gone (its flock is free).

    A create in progress holds ``.creating`` inside its partial directory; those are left.
    Returns the removed paths.
    """
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    for child in sorted(directory.glob(f"*{PARTIAL_SUFFIX}")):
        if not child.is_dir() or not ID_PATTERN.match(child.name[: -len(PARTIAL_SUFFIX)]):
            continue
        lock = child / CREATING_LOCK
        if lock.exists():
            with lock.open("a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a create is running
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
    return removed


def resolve_local(target: str, directory: Path | None) -> Path:
    """Return the snapshot directory named by ``target``: an id in ``directory``, or a path.

    Raises:
        UnavailableError: nothing is there.
    """
    candidate = Path(target)
    if directory is not None and ID_PATTERN.match(target) and (directory / target).is_dir():
        return directory / target
    if candidate.is_dir():
        return candidate
    where = f" in {directory}" if directory else ""
    raise UnavailableError(
        f"snapshot {target!r} not found{where}",
        "memsync snapshot list shows the snapshots there",
    )
