"""What every repository does the same way: fetch and verify over three primitives.

An implementation provides ``_read_small`` (a small object's bytes, or None), ``_stored_names``
(the relative names stored under a snapshot) and ``_readable`` (a local path holding one stored
file's bytes); ``fetch`` and ``verify`` are written once here, so a directory and a bucket
check bytes identically.
"""

from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path

from memsync.errors import UnavailableError, UsageError
from memsync.repository.port import BytesProgress, FileCheck, FileProblem
from memsync.stores import manifest as manifests
from memsync.stores.manifest import MANIFEST, FileEntry, Manifest
from memsync.stores.snapshots import PARTIAL_SUFFIX, SIDECARS, sha256_file

DAMAGED_FIX = "the file was changed or truncated after the snapshot: use another snapshot"


class BaseRepository(ABC):
    """Shared algorithms of ``SnapshotRepository`` implementations (see ``port``)."""

    @property
    @abstractmethod
    def where(self) -> str:
        """The repository's location for messages."""

    @abstractmethod
    def location(self, snapshot_id: str, path: str = "") -> str:
        """The full location of a snapshot (or one of its files) for messages. Pure."""

    @abstractmethod
    def _read_small(self, snapshot_id: str, name: str) -> bytes | None:
        """The bytes of a small stored object (manifest, verified.json); None when absent."""

    @abstractmethod
    def _stored_names(self, snapshot_id: str) -> set[str]:
        """Relative names of every file stored under the snapshot (manifest included)."""

    @abstractmethod
    def _root(self, snapshot_id: str, keep: Path) -> Path:
        """The local directory where ``_readable`` puts (or finds) a snapshot's stored files."""

    @abstractmethod
    def _readable(
        self, snapshot_id: str, path: str, root: Path, progress: BytesProgress | None
    ) -> Path:
        """A local path under ``root`` holding the stored bytes of ``path`` (copied there if need be).

        Raises:
            UnavailableError: the file cannot be read.
        """

    def exists(self, snapshot_id: str) -> bool:
        """Whether anything but its sidecars (``verified.json``, ``pinned.json``) is stored. Reads only."""
        return bool(self._stored_names(snapshot_id) - SIDECARS)

    def read_manifest(self, snapshot_id: str) -> Manifest:
        """The committed manifest of a snapshot (see ``SnapshotRepository.read_manifest``)."""
        return self._manifest_and_bytes(snapshot_id)[0]

    def _manifest_and_bytes(self, snapshot_id: str) -> tuple[Manifest, bytes]:
        raw = self._read_small(snapshot_id, MANIFEST)
        if raw is None:
            raise UnavailableError(
                f"snapshot {snapshot_id} at {self.where} has no manifest: it is incomplete or absent",
                "memsync snapshot list (--remote) shows the complete snapshots",
            )
        return manifests.loads(raw, snapshot_id, self.location(snapshot_id, MANIFEST)), raw

    def fetch(
        self, snapshot_id: str, dest_parent: Path, progress: BytesProgress | None = None
    ) -> Path:
        """Copy a complete snapshot into ``dest_parent/<id>/`` (see ``SnapshotRepository.fetch``)."""
        manifest, raw = self._manifest_and_bytes(snapshot_id)
        final = dest_parent / snapshot_id
        if dest_parent.exists() and not dest_parent.is_dir():
            raise UsageError(f"{dest_parent} is not a directory")
        if final.exists():
            raise UsageError(f"{final} already exists", "choose another directory or remove it")
        partial = dest_parent / f"{snapshot_id}{PARTIAL_SUFFIX}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True, mode=0o700)
        try:
            names = self._stored_names(snapshot_id)
            for entry in manifest.files:
                target = partial / entry.path
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                if entry.path not in names:
                    raise UnavailableError(
                        f"{self.location(snapshot_id, entry.path)} is missing: the copy "
                        "differs from its manifest",
                        "use another snapshot",
                    )
                self._copy_to(snapshot_id, entry.path, target, progress)
                if sha256_file(target) != entry.stored:
                    raise UnavailableError(
                        f"{self.location(snapshot_id, entry.path)} differs from its manifest (size or sha256)",
                        "the stored copy is damaged: use another snapshot",
                    )
                os.chmod(target, 0o600)
            (partial / MANIFEST).write_bytes(raw)
            os.chmod(partial / MANIFEST, 0o600)
            os.rename(partial, final)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        return final

    @abstractmethod
    def _copy_to(
        self, snapshot_id: str, path: str, target: Path, progress: BytesProgress | None
    ) -> None:
        """Copy one stored file's bytes to ``target`` (overwritten).

        Raises:
            UnavailableError: the file cannot be read.
        """

    def verify(self, snapshot_id: str, keep: Path) -> FileCheck:
        """Read back every stored file (see ``SnapshotRepository.verify``)."""
        manifest = self.read_manifest(snapshot_id)
        names = self._stored_names(snapshot_id)
        listed = {entry.path for entry in manifest.files}
        problems = [
            FileProblem(
                code="checksum-mismatch",
                path=name,
                where=self.location(snapshot_id, name),
                message=f"{name} is not listed in the manifest: something was added to the snapshot "
                "after it was made",
            )
            for name in sorted(names - listed - {MANIFEST} - SIDECARS)
        ]
        return self._check(snapshot_id, manifest, manifest.files, names, keep, problems)

    def verify_files(self, snapshot_id: str, paths: Iterable[str], keep: Path) -> FileCheck:
        """Read back only the listed files ``paths`` (see ``SnapshotRepository.verify_files``)."""
        manifest = self.read_manifest(snapshot_id)
        wanted = set(paths)
        unlisted = sorted(wanted - {entry.path for entry in manifest.files})
        if unlisted:
            raise UsageError(
                f"{self.location(snapshot_id, unlisted[0])} is not listed in the manifest of "
                f"{snapshot_id}",
                "name files as the manifest lists them (memsync snapshot verify ID reads all)",
            )
        entries = tuple(entry for entry in manifest.files if entry.path in wanted)
        names = self._stored_names(snapshot_id)
        return self._check(snapshot_id, manifest, entries, names, keep, [])

    def _check(
        self,
        snapshot_id: str,
        manifest: Manifest,
        entries: tuple[FileEntry, ...],
        names: set[str],
        keep: Path,
        problems: list[FileProblem],
    ) -> FileCheck:
        """Read back ``entries`` and compare each with the manifest; add to ``problems``."""
        passed: list[FileEntry] = []
        root = self._root(snapshot_id, keep)
        for entry in entries:
            where = self.location(snapshot_id, entry.path)
            if entry.path not in names:
                problems.append(
                    FileProblem(
                        code="file-missing",
                        path=entry.path,
                        where=where,
                        message=f"{entry.path} listed in the manifest is missing",
                    )
                )
                continue
            readable = self._readable(snapshot_id, entry.path, root, None)
            size, digest = sha256_file(readable)
            if (size, digest) != entry.stored:
                problems.append(
                    FileProblem(
                        code="checksum-mismatch",
                        path=entry.path,
                        where=where,
                        fix=DAMAGED_FIX,
                        message=f"{entry.path} is {size} bytes with sha256 {digest[:16]}…, the manifest says "
                        f"{entry.stored[0]} bytes, {entry.stored[1][:16]}…",
                    )
                )
                continue
            passed.append(entry)
        return FileCheck(
            manifest=manifest,
            problems=tuple(sorted(problems, key=lambda p: p.path)),
            passed=tuple(passed),
            root=root,
        )
