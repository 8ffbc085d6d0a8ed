"""Reading some files of a snapshot where it is: local in place, remote into a scratch area.

``scratch`` is a directory under ``work_dir`` removed on exit (an error or an interrupt too;
one a killed memsync left is removed by the next); ``open_files`` checks the named files of a
snapshot against its manifest (``verify_files``: a local snapshot is read in place, a remote one
downloads only those files into the scratch area) and decrypts them there when the snapshot is
sealed. Reconcile's search for a lost point and the tripwire's look at the snapshot before a drop
read snapshots this way, so nothing they read is left in the snapshot directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memsync.config import Config
from memsync.errors import ConfigError, UnavailableError
from memsync.repository.plaintext import NO_KEY, decrypt, encryption_key
from memsync.repository.port import SnapshotRepository
from memsync.repository.remote import S3Repository
from memsync.stores.sqlite_files import work_dir_error


@dataclass(frozen=True, slots=True, kw_only=True)
class Opened:
    """Files of one snapshot, readable: ``root`` holds their plaintext (paths as the manifest's).

    ``fetched_bytes``: bytes downloaded to get them (0 for a local snapshot, read in place).
    """

    snapshot_id: str
    root: Path
    paths: tuple[str, ...]
    fetched_bytes: int


@contextmanager
def scratch(config: Config, prefix: str) -> Iterator[Path]:
    """A new directory ``<work_dir>/<prefix>-<pid>-*``, removed on exit whatever happens.

    Directories of the same prefix whose process is gone (a memsync killed with SIGKILL) are
    removed first.

    Raises:
        TryLaterError, UnavailableError: ``work_dir`` cannot be made or written (``work_dir_error``).
    """
    try:
        config.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for stale in config.work_dir.glob(f"{prefix}-*"):
            pid = stale.name[len(prefix) + 1 :].partition("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        path = Path(tempfile.mkdtemp(dir=config.work_dir, prefix=f"{prefix}-{os.getpid()}-"))
    except OSError as error:
        raise work_dir_error(config.work_dir, error) from error
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (signal 0; another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def open_files(
    config: Config,
    repo: SnapshotRepository,
    snapshot_id: str,
    paths: Iterable[str],
    area: Path,
) -> Opened:
    """Check ``paths`` of a snapshot against its manifest and make their plaintext readable.

    Paths the manifest does not list are left out. A local snapshot is read in place (sealed
    files are decrypted into ``area/<id>.plain``); a remote one's files are downloaded into
    ``area/<id>`` (and decrypted beside them when sealed). Writes only under ``area``.

    Raises:
        UnavailableError: a file is missing or differs from the manifest, does not decrypt, or
            the repository fails.
        ConfigError: the snapshot is encrypted and no ``snapshot.encrypt_key_file`` is set.
    """
    manifest = repo.read_manifest(snapshot_id)
    listed = {entry.path for entry in manifest.files}
    wanted = sorted(set(paths) & listed)
    checked = repo.verify_files(snapshot_id, wanted, area / snapshot_id)
    if checked.problems:
        problem = checked.problems[0]
        raise UnavailableError(
            f"snapshot {snapshot_id}: {problem.message} ({problem.where})",
            problem.fix or "use another snapshot",
        )
    fetched = (
        sum(entry.stored[0] for entry in checked.passed) if isinstance(repo, S3Repository) else 0
    )
    root = checked.root
    if manifest.encrypted:
        key = encryption_key(config)
        if key is None:
            raise ConfigError(config.source, [NO_KEY])
        root = area / f"{snapshot_id}.plain"
        failed = decrypt(checked.root, checked.passed, key, root)
        if failed:
            raise UnavailableError(
                f"snapshot {snapshot_id}: {sorted(failed.values())[0]}",
                "use another snapshot, or the key it was made with",
            )
    return Opened(snapshot_id=snapshot_id, root=root, paths=tuple(wanted), fetched_bytes=fetched)
