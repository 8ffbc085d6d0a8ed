"""The plaintext of a snapshot: the one way verify, restore, reconcile and purge read its files.

An unencrypted snapshot's files are their own plaintext; a sealed one (``snapshot.encrypt_key_file``)
is opened file by file with ``memsync.seal`` and every decrypted file checked against the
manifest's plaintext size and sha256.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterable
from pathlib import Path

from memsync import seal
from memsync.config import Config
from memsync.errors import ConfigError, UnavailableError
from memsync.stores.manifest import FileEntry, Manifest
from memsync.stores.snapshots import sha256_file

NO_KEY = "snapshot.encrypt_key_file: the snapshot is encrypted; set the key it was made with"


def encryption_key(config: Config) -> bytes | None:
    """The configured snapshot encryption key, or None. Reads the key file.

    Raises:
        ConfigError: the key file is unreadable or not 32 bytes.
    """
    path = config.snapshot.encrypt_key_file
    return seal.load_key(path, config.source) if path else None


def decrypt(
    directory: Path, entries: Iterable[FileEntry], key: bytes, target: Path
) -> dict[str, str]:
    """Open every sealed file of ``entries`` from ``directory`` into ``target`` and check it.

    A file that fails authentication or decrypts to other bytes than the manifest's plaintext
    size and sha256 is removed from ``target``. Returns ``{path: why}`` for those (empty when
    every file is good). Writes only under ``target`` (files 0600).
    """
    failed: dict[str, str] = {}
    for entry in entries:
        dest = target / entry.path
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        dest.unlink(missing_ok=True)
        try:
            seal.open_file(directory / entry.path, dest, key, entry.path)
        except seal.SealError as error:
            failed[entry.path] = str(error)
            continue
        if sha256_file(dest) != (entry.size, entry.sha256):
            dest.unlink()
            failed[entry.path] = f"{entry.path} decrypts to bytes that differ from the manifest"
    return failed


def plaintext(
    config: Config, directory: Path, manifest: Manifest, target: Path, *, copy: bool = False
) -> Path:
    """The directory holding the snapshot's plaintext files.

    ``directory`` itself when the snapshot is not encrypted (unless ``copy``: then its listed
    files are copied into ``target``); otherwise ``target``, with every listed file opened and
    checked. Writes only under ``target``.

    Raises:
        ConfigError: the snapshot is encrypted and no ``snapshot.encrypt_key_file`` is set.
        UnavailableError: a file fails authentication or decrypts to other bytes.
    """
    if not manifest.encrypted:
        if not copy:
            return directory
        for entry in manifest.files:
            (target / entry.path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copy2(directory / entry.path, target / entry.path)
        return target
    key = encryption_key(config)
    if key is None:
        raise ConfigError(config.source, [NO_KEY])
    failed = decrypt(directory, manifest.files, key, target)
    if failed:
        path, why = sorted(failed.items())[0]
        raise UnavailableError(
            f"snapshot {manifest.id}: {why}", "use another snapshot, or the key it was made with"
        )
    return target


def copy_checked(directory: Path, entry: FileEntry, key: bytes | None, target: Path) -> bool:
    """Copy one snapshot file's plaintext to ``target`` and hash what was written, in one pass.

    A plain file is copied by the kernel (``shutil.copy2``: ``sendfile``, as ``cp`` copies),
    then the copy is hashed from the page cache; a sealed one (``key`` given) is decrypted
    into ``target`` and hashed as it is written. Returns whether ``target`` holds the
    manifest's plaintext size and sha256 (a file that fails authentication does not: nothing
    of it is left at ``target``). Reads ``directory``; writes ``target`` only (created or
    replaced; a plain file keeps the source's mode and times).

    Raises:
        OSError: the file cannot be read or ``target`` written.
    """
    source = directory / entry.path
    target.unlink(missing_ok=True)
    if key is None:
        shutil.copy2(source, target)
        return sha256_file(target) == (entry.size, entry.sha256)
    digest = hashlib.sha256()
    try:
        seal.open_file(source, target, key, entry.path, digest)
    except seal.SealError:
        return False
    return (target.stat().st_size, digest.hexdigest()) == (entry.size, entry.sha256)
