"""``LocalRepository``: snapshots as directories, ``<directory>/<id>/`` (docs/reference/commands/snapshot.md).

A snapshot is written into ``<id>.partial/`` while ``.creating`` is flock-held inside it, and
committed by writing ``manifest.json`` and renaming the directory; a ``.partial`` whose writer
is gone is stale (``stores.snapshots.remove_stale_partials``), and the next write of the same
id resumes from the files in it that already match.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from memsync import flock
from memsync.errors import UnavailableError
from memsync.repository.base import BaseRepository
from memsync.repository.port import BytesProgress, Entry, Transfer
from memsync.state import fsync_dir, write_json_atomic
from memsync.stores import snapshots
from memsync.stores.manifest import MANIFEST, FileEntry, Manifest
from memsync.stores.snapshots import CREATING_LOCK, PARTIAL_SUFFIX, SnapshotInfo, sha256_file

CHANGED_HINT = "memsync snapshot verify {id}; write another snapshot"


class LocalRepository(BaseRepository):
    """Snapshots under one local directory (``snapshot.directory``, or any parent directory).

    Args:
        directory: the directory holding ``<id>/`` snapshots (need not exist yet).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def where(self) -> str:
        """The directory, as text."""
        return str(self.directory)

    def location(self, snapshot_id: str, path: str = "") -> str:
        """``<directory>/<id>[/<path>]``. Pure."""
        return (
            str(self.directory / snapshot_id / path) if path else str(self.directory / snapshot_id)
        )

    def path(self, snapshot_id: str) -> Path:
        """The directory of a complete snapshot (whether or not it exists). Pure."""
        return self.directory / snapshot_id

    def exists(self, snapshot_id: str) -> bool:
        """Whether the snapshot's directory is there (and not a symbolic link). Reads only."""
        final = self.path(snapshot_id)
        return final.is_dir() and not final.is_symlink()

    def infos(self) -> list[SnapshotInfo]:
        """Every memsync entry of the directory with its path, sorted by id. Reads only."""
        return list(snapshots.iter_local(self.directory))

    def describe(self, snapshot_id: str) -> SnapshotInfo | None:
        """The entry of one complete-or-not snapshot directory, or None. Reads only."""
        return snapshots.describe(self.path(snapshot_id))

    def list(self) -> list[Entry]:
        """Every memsync entry, complete or ``.partial`` (see ``SnapshotRepository.list``)."""
        return [
            Entry(
                id=i.id,
                complete=i.complete,
                manifest=i.manifest,
                verified=i.verified,
                size_bytes=i.size_bytes,
                pin=i.pin,
            )
            for i in self.infos()
        ]

    def read_json(self, snapshot_id: str, name: str) -> dict[str, Any] | None:
        """A small JSON object beside the snapshot, or None (see the port)."""
        return snapshots.read_json(self.path(snapshot_id) / name)

    def write_json(self, snapshot_id: str, name: str, document: dict[str, Any]) -> None:
        """Write a small JSON object beside the snapshot (0600). Atomic; idempotent.

        Raises:
            UnavailableError: the snapshot's directory does not exist.
        """
        final = self.path(snapshot_id)
        if final.is_symlink() or not final.is_dir():
            raise UnavailableError(
                f"snapshot {self.location(snapshot_id)} does not exist (or is a symbolic link)"
            )
        write_json_atomic(self.path(snapshot_id) / name, document)

    def delete(self, snapshot_id: str) -> None:
        """Remove the snapshot: renamed ``<id>.partial`` first, then its directory. Idempotent.

        The rename makes it incomplete at once; a removal killed midway leaves a ``.partial``
        directory nobody holds, which the next ``snapshot create`` removes (never a directory
        without a manifest, which is left to the operator as a damaged snapshot).
        """
        final = self.path(snapshot_id)
        doomed = final.with_name(f"{final.name}{PARTIAL_SUFFIX}")
        if final.is_dir() and not final.is_symlink() and not doomed.exists():
            final.rename(doomed)
            fsync_dir(self.directory)
            shutil.rmtree(doomed, ignore_errors=True)
            if doomed.exists():
                raise UnavailableError(f"cannot remove {doomed}", "check its permissions")
        (final / MANIFEST).unlink(missing_ok=True)
        shutil.rmtree(final, ignore_errors=True)
        if final.exists():
            raise UnavailableError(f"cannot remove {final}", "check its permissions")

    @contextmanager
    def building(self, now: datetime) -> Iterator[tuple[str, Path]]:
        """Reserve a new id for ``now`` and yield ``(id, <id>.partial/)`` with ``.creating`` held.

        The caller fills the partial directory and commits with ``commit``; on any exception
        the partial directory is removed. Two builds in the same second get ``-N`` ids.

        Raises:
            OSError: the directory cannot be written.
        """
        while True:
            snapshot_id = snapshots.new_id(now, {child.name for child in self.directory.iterdir()})
            partial = self.directory / f"{snapshot_id}{PARTIAL_SUFFIX}"
            try:
                partial.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        try:
            with flock.hold(partial / CREATING_LOCK):
                yield snapshot_id, partial
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise

    def commit(self, snapshot_id: str, partial: Path, manifest: Manifest | None) -> Path:
        """Write ``manifest`` (unless None: already written) into ``partial``, rename it to ``<id>/``.

        Atomic: the rename is the commit (fsynced). Returns the snapshot's directory.
        """
        if manifest is not None:
            write_json_atomic(partial / MANIFEST, manifest.to_json())
        (partial / CREATING_LOCK).unlink(missing_ok=True)
        final = self.path(snapshot_id)
        os.rename(partial, final)
        fsync_dir(self.directory)
        return final

    def put(
        self,
        snapshot_id: str,
        source: Path,
        manifest: Manifest,
        progress: BytesProgress | None = None,
    ) -> Transfer:
        """Copy the listed files from ``source``, then commit (see ``SnapshotRepository.put``).

        A new snapshot is written into ``<id>.partial/`` (resuming a stale one) and renamed; an
        existing one is updated in place, file by file (each replaced atomically), manifest last.
        """
        final = self.path(snapshot_id)
        if final.exists() and source.resolve() == final.resolve():
            write_json_atomic(final / MANIFEST, manifest.to_json())
            return Transfer(sent=0, skipped=len(manifest.files), bytes=0)
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if final.is_dir():
            transfer = self._copy_files(snapshot_id, source, final, manifest, progress)
            write_json_atomic(final / MANIFEST, manifest.to_json())
            return transfer
        partial = self.directory / f"{snapshot_id}{PARTIAL_SUFFIX}"
        partial.mkdir(exist_ok=True, mode=0o700)
        with flock.hold(partial / CREATING_LOCK):
            transfer = self._copy_files(snapshot_id, source, partial, manifest, progress)
            self.commit(snapshot_id, partial, manifest)
        return transfer

    def _copy_files(
        self,
        snapshot_id: str,
        source: Path,
        target: Path,
        manifest: Manifest,
        progress: BytesProgress | None,
    ) -> Transfer:
        sent = skipped = sent_bytes = 0
        for entry in manifest.files:
            here = target / entry.path
            if here.is_file() and sha256_file(here) == entry.stored:
                skipped += 1
            else:
                _copy_checked(source / entry.path, here, entry, snapshot_id)
                sent, sent_bytes = sent + 1, sent_bytes + entry.stored[0]
            if progress is not None:
                progress(entry.stored[0])
        for directory in sorted({p.parent for p in target.rglob("*")} | {target}):
            fsync_dir(directory)
        return Transfer(sent=sent, skipped=skipped, bytes=sent_bytes)

    def _read_small(self, snapshot_id: str, name: str) -> bytes | None:
        if self.path(snapshot_id).is_symlink():
            return None
        try:
            return snapshots.read_small(self.path(snapshot_id) / name)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise UnavailableError(
                f"{self.location(snapshot_id, name)} is unreadable: {error.strerror}"
            ) from error

    def _stored_names(self, snapshot_id: str) -> set[str]:
        root = self.path(snapshot_id)
        return (
            {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
            if root.is_dir() and not root.is_symlink()
            else set()
        )

    def _root(self, snapshot_id: str, keep: Path) -> Path:
        return self.path(snapshot_id)

    def _readable(
        self, snapshot_id: str, path: str, root: Path, progress: BytesProgress | None
    ) -> Path:
        return root / path

    def _copy_to(
        self, snapshot_id: str, path: str, target: Path, progress: BytesProgress | None
    ) -> None:
        shutil.copyfile(self.path(snapshot_id) / path, target)
        if progress is not None:
            progress(target.stat().st_size)


def _copy_checked(source: Path, dest: Path, entry: FileEntry, snapshot_id: str) -> None:
    """Copy ``source`` to ``dest`` (0600, fsynced, atomic) after checking it matches ``entry``.

    Raises:
        UnavailableError: the source differs from the manifest.
    """
    if not source.is_file() or sha256_file(source) != entry.stored:
        raise UnavailableError(
            f"{source} differs from its manifest: it was changed after the snapshot",
            CHANGED_HINT.format(id=snapshot_id),
        )
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = dest.with_name(f".{dest.name}.copying")
    shutil.copyfile(source, temporary)
    os.chmod(temporary, 0o600)
    with temporary.open("rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, dest)
