"""The plaintext of a snapshot: the one way verify, restore, reconcile and purge read its files.

An unencrypted snapshot's files are their own plaintext; a sealed one (``snapshot.encrypt_key_file``)
is opened file by file with ``memsync.seal`` and every decrypted file checked against the
manifest's plaintext size and sha256.
"""

from __future__ import annotations

import errno
import hashlib
import os
import queue
import shutil
import threading
from collections.abc import Iterable
from pathlib import Path

from memsync import seal
from memsync.config import Config
from memsync.errors import ConfigError, UnavailableError
from memsync.stores.manifest import FileEntry, Manifest
from memsync.stores.snapshots import CHUNK_BYTES, sha256_file

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


def copy_checked(
    directory: Path, entry: FileEntry, key: bytes | None, target: Path, *, durable: bool = False
) -> bool:
    """Copy one snapshot file's plaintext to ``target`` and hash what was written, in one pass.

    A plain file is copied by the kernel (``sendfile``, as ``cp`` copies; ``_copy_hashed``)
    while a thread hashes the copy from the page cache behind it; a sealed one (``key`` given) is decrypted
    into ``target`` and hashed as it is written. ``durable``: a plain copy is fsynced as soon
    as the kernel has copied it, while the hash catches up (the caller fsyncs again, cheaply,
    once the file is complete). Returns whether ``target`` holds the
    manifest's plaintext size and sha256 (a file that fails authentication does not: nothing
    of it is left at ``target``). Reads ``directory``; writes ``target`` only (created or
    replaced; a plain file keeps the source's mode and times).

    Raises:
        OSError: the file cannot be read or ``target`` written.
    """
    source = directory / entry.path
    target.unlink(missing_ok=True)
    if key is None:
        return _copy_hashed(source, target, durable=durable) == (entry.size, entry.sha256)
    digest = hashlib.sha256()
    try:
        seal.open_file(source, target, key, entry.path, digest)
    except seal.SealError:
        return False
    return (target.stat().st_size, digest.hexdigest()) == (entry.size, entry.sha256)


_SENDFILE_BYTES = 8 << 20  # what the kernel copies between two looks of the hashing thread


def _copy_hashed(source: Path, target: Path, *, durable: bool = False) -> tuple[int, str]:
    """``shutil.copy2(source, target)``, then ``sha256_file(target)``, the two overlapping.

    The kernel copies ``_SENDFILE_BYTES`` at a time (``os.sendfile``); after each, a thread
    reads and hashes the copy up to there (from the page cache: what was written, not the
    source). The hash is the slower of the two (about 1.5 GB/s against the kernel's 3), so
    with ``durable`` the copy's fsync runs while the hash finishes. Where ``sendfile`` is
    refused (a file system without it), a plain ``copy2`` and then the hash.

    Raises:
        OSError: ``source`` cannot be read or ``target`` written.
    """
    written: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    hashed: list[tuple[int, str] | BaseException] = []

    def hash_behind() -> None:
        digest, size = hashlib.sha256(), 0
        try:
            with target.open("rb", buffering=0) as copy:
                while (end := written.get()) is not None:
                    while size < end and (chunk := copy.read(min(CHUNK_BYTES, end - size))):
                        digest.update(chunk)
                        size += len(chunk)
            hashed.append((size, digest.hexdigest()))
        except BaseException as error:  # noqa: BLE001 - raised again by the copying thread
            hashed.append(error)

    with source.open("rb") as reading, target.open("wb") as writing:
        hasher = threading.Thread(target=hash_behind, name="memsync-hash-copy", daemon=True)
        hasher.start()
        try:
            offset = 0
            while sent := os.sendfile(writing.fileno(), reading.fileno(), offset, _SENDFILE_BYTES):
                offset += sent
                written.put(offset)
            if durable:
                os.fsync(writing.fileno())  # the disk's write-back beside the hash's last reads
        except OSError as error:
            if offset or error.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
                raise
            offset = -1  # sendfile refused before a byte: copy2 below
        finally:
            written.put(None)
            hasher.join()
    if offset < 0:
        shutil.copy2(source, target)
        return sha256_file(target)
    shutil.copystat(source, target)
    result = hashed[0]
    if isinstance(result, BaseException):
        raise result
    return result
