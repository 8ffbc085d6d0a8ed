"""The snapshot-repository port: where complete snapshots live, a directory or a bucket.

Every operation on stored snapshots (list, read, write then commit, verify, fetch, delete) goes
through ``SnapshotRepository``, in the manner of litestream's ``ReplicaClient``: each method
states what it raises when something is missing and whether it is idempotent. A snapshot is
complete exactly when its manifest is committed: files are written first, the manifest last.
The one conformance suite (tests/store/test_snapshot_repository.py) runs against every
implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from memsync.stores.manifest import FileEntry, Manifest
from memsync.stores.snapshots import Entry as Entry  # re-exported: the port's listing type

BytesProgress = Callable[[int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileProblem:
    """A stored file that does not match the manifest.

    Attributes:
        code: ``file-missing`` or ``checksum-mismatch`` (an unlisted file is a mismatch too).
        path: the file's path inside the snapshot.
        where: its full location for messages (a local path or an object key).
        message: one sentence for the operator.
        fix: what to do, or None.
    """

    code: str
    path: str
    where: str
    message: str
    fix: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FileCheck:
    """What reading back every stored file found.

    Attributes:
        manifest: the snapshot's manifest.
        problems: one per file missing, differing or unlisted, sorted by path.
        passed: the listed files whose stored size and sha256 match.
        root: a local directory where the stored bytes of ``passed`` files can be read.
    """

    manifest: Manifest
    problems: tuple[FileProblem, ...]
    passed: tuple[FileEntry, ...]
    root: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfer:
    """What a write sent: files sent, files already there (skipped), bytes sent."""

    sent: int
    skipped: int
    bytes: int

    def to_json(self) -> dict[str, int]:
        """``{"sent": n, "skipped": n, "bytes": n}`` (the upload document's keys)."""
        return {"sent": self.sent, "skipped": self.skipped, "bytes": self.bytes}


class SnapshotRepository(Protocol):
    """Where snapshots are stored. Implementations: ``LocalRepository``, ``S3Repository``."""

    @property
    def where(self) -> str:
        """The repository's location for messages (a directory, or ``s3://bucket/prefix``)."""
        ...

    def location(self, snapshot_id: str, path: str = "") -> str:
        """The full location of a snapshot (or one of its files) for messages. Pure."""
        ...

    def list(self) -> list[Entry]:
        """Every memsync snapshot id in the repository, complete or not, sorted by id.

        Names that are not snapshot ids are ignored. Reads only; an empty or absent
        repository lists nothing.

        Raises:
            UnavailableError: the repository is unreachable.
        """
        ...

    def exists(self, snapshot_id: str) -> bool:
        """Whether anything of the snapshot is stored (complete or not), besides its sidecars.

        A local snapshot directory that is a symbolic link does not exist (memsync never makes
        links; nothing is read or written through one). Reads only.

        Raises:
            UnavailableError: the repository is unreachable.
        """
        ...

    def read_manifest(self, snapshot_id: str) -> Manifest:
        """The committed manifest of a snapshot. Reads only.

        Raises:
            UnavailableError: no manifest (absent or incomplete), or not a valid one.
            ManifestTooNew: its format is newer than this memsync reads.
        """
        ...

    def read_json(self, snapshot_id: str, name: str) -> dict[str, Any] | None:
        """A small JSON object stored beside the snapshot (``verified.json``). Reads only.

        Returns None when it is absent or not a JSON object (never raises for that).

        Raises:
            UnavailableError: the repository is unreachable.
        """
        ...

    def write_json(self, snapshot_id: str, name: str, document: dict[str, Any]) -> None:
        """Store a small JSON object beside a snapshot, replacing it. Atomic; idempotent.

        Raises:
            UnavailableError: the repository is unreachable or refuses the write.
        """
        ...

    def put(
        self,
        snapshot_id: str,
        source: Path,
        manifest: Manifest,
        progress: BytesProgress | None = None,
    ) -> Transfer:
        """Write every file ``manifest`` lists from ``source``, then commit the manifest.

        Until the manifest is committed the snapshot is incomplete (``list`` says so and
        ``read_manifest`` raises). Files already stored with the same size and sha256 are not
        written again, so a write that was interrupted resumes where it stopped; writing the
        same snapshot twice is idempotent. A different snapshot under the same id replaces it.

        Raises:
            UnavailableError: a source file differs from the manifest (nothing is committed),
                or the repository fails.
        """
        ...

    def fetch(
        self, snapshot_id: str, dest_parent: Path, progress: BytesProgress | None = None
    ) -> Path:
        """Copy a complete snapshot into ``dest_parent/<id>/``, checking every byte first.

        Built as ``<id>.partial/`` and renamed only when every file matches the manifest;
        nothing partial is left on failure. Returns the new directory.

        Raises:
            UnavailableError: no manifest, a file missing or differing, the repository fails.
            ManifestTooNew: its format is newer than this memsync reads.
            UsageError: ``dest_parent/<id>`` already exists, or ``dest_parent`` is a file.
        """
        ...

    def verify(self, snapshot_id: str, keep: Path) -> FileCheck:
        """Read back every stored file and compare its size and sha256 with the manifest.

        Writes nothing to the repository. ``keep`` is a scratch directory the implementation
        may fill with the bytes it read (S3) so they are not fetched twice; ``FileCheck.root``
        says where the stored bytes of the files that passed can be read.

        Raises:
            UnavailableError: no manifest, or not a valid one; the repository fails.
            ManifestTooNew: its format is newer than this memsync reads.
        """
        ...

    def verify_files(self, snapshot_id: str, paths: Iterable[str], keep: Path) -> FileCheck:
        """Read back only the named files and compare their size and sha256 with the manifest.

        The slice of a scheduled verification (``memsync.snapshot.verify_schedule``): the same
        read-back as ``verify``, for some of the listed files; files the manifest does not list
        are not looked for. Writes nothing to the repository; ``keep`` as in ``verify``.
        ``FileCheck.problems`` and ``passed`` cover ``paths`` only.

        Raises:
            UnavailableError: no manifest, or not a valid one; the repository fails.
            ManifestTooNew: its format is newer than this memsync reads.
            UsageError: a path the manifest does not list (nothing is read).
        """
        ...

    def delete(self, snapshot_id: str) -> None:
        """Remove a snapshot: its manifest first (incomplete from then on), then the rest.

        Idempotent: deleting a missing snapshot does nothing.

        Raises:
            UnavailableError: the repository fails.
        """
        ...
