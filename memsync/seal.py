"""Client-side encryption of snapshot files: AES-256-GCM in the STREAM construction.

Uses ``cryptography``'s AESGCM for every cipher operation; this module only frames the chunks.
A sealed file is ``MAGIC`` + a 7-byte random nonce prefix, then the plaintext in 1 MiB chunks,
each encrypted with nonce ``prefix || chunk counter (4 bytes) || last flag (1 byte)`` and the
associated data ``MAGIC || prefix || name`` (the file's path inside the snapshot). Reordering,
dropping or truncating chunks, or moving a file to another name, fails authentication
(Hoang, Reyhanitabar, Rogaway, Vizár: online authenticated encryption, STREAM).

Key files hold 32 bytes: raw, hex (64 characters) or base64 (``head -c 32 /dev/urandom |
base64 > snapshot.key``).
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Protocol

from memsync.config import read_key_file
from memsync.errors import ConfigError

MAGIC = b"MEMSYNC-SEALED-1"
PREFIX_BYTES = 7
CHUNK_BYTES = 1024 * 1024
TAG_BYTES = 16
ALGORITHM = "AES-256-GCM STREAM, 1 MiB chunks"


class Hasher(Protocol):
    """What ``open_file`` feeds the plaintext to (a ``hashlib`` object)."""

    def update(self, data: bytes, /) -> None:
        """Add ``data`` to the digest."""


class SealError(Exception):
    """A sealed file failed authentication: wrong key, tampered, truncated or renamed."""


def load_key(
    path: Path, source: str | None = None, key: str = "snapshot.encrypt_key_file"
) -> bytes:
    """Read a 32-byte key from ``path`` (raw, hex or base64). Reads only.

    Args:
        path: the key file.
        source: the configuration file that names it, for messages (default: the key file).
        key: the dotted configuration key that names it.

    Raises:
        ConfigError: unreadable, too large, or not 32 bytes in any of the three forms; the
            message names ``key`` and the file, never its content.
    """
    raw = read_key_file(path, key, source or str(path))
    if len(raw) == 32:
        return raw
    text = raw.strip()
    for decode in (bytes.fromhex, base64.b64decode):
        try:
            decoded = decode(text.decode("ascii"))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            continue
        if len(decoded) == 32:
            return decoded
    raise ConfigError(
        source or str(path), [f"{key}: key file {path} must hold 32 bytes (raw, hex or base64)"]
    )


def _nonce(prefix: bytes, counter: int, last: bool) -> bytes:
    return prefix + counter.to_bytes(4, "big") + (b"\x01" if last else b"\x00")


def seal_file(source: Path, dest: Path, key: bytes, name: str) -> None:
    """Encrypt ``source`` into ``dest`` (created; 0600). Streams 1 MiB at a time."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # only when encrypting

    cipher = AESGCM(key)
    prefix = os.urandom(PREFIX_BYTES)
    associated = MAGIC + prefix + name.encode("utf-8")
    with source.open("rb") as reader, dest.open("xb") as writer:
        os.fchmod(writer.fileno(), 0o600)
        writer.write(MAGIC + prefix)
        counter = 0
        chunk = reader.read(CHUNK_BYTES)
        while True:
            following = reader.read(CHUNK_BYTES) if len(chunk) == CHUNK_BYTES else b""
            last = not following
            writer.write(cipher.encrypt(_nonce(prefix, counter, last), chunk, associated))
            if last:
                break
            chunk, counter = following, counter + 1
        writer.flush()
        os.fsync(writer.fileno())


def open_file(
    source: Path, dest: Path, key: bytes, name: str, digest: Hasher | None = None
) -> None:
    """Decrypt the sealed ``source`` into ``dest`` (created; 0600).

    ``digest`` (a ``hashlib`` object), when given, is updated with the plaintext as it is written.

    Raises:
        SealError: authentication failed anywhere (``dest`` is removed).
    """
    from cryptography.exceptions import InvalidTag  # only where a snapshot is encrypted
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    cipher = AESGCM(key)
    try:
        with source.open("rb") as reader, dest.open("xb") as writer:
            os.fchmod(writer.fileno(), 0o600)
            header = reader.read(len(MAGIC) + PREFIX_BYTES)
            if len(header) != len(MAGIC) + PREFIX_BYTES or not header.startswith(MAGIC):
                raise SealError(f"{source} is not a sealed memsync file")
            prefix = header[len(MAGIC) :]
            associated = MAGIC + prefix + name.encode("utf-8")
            counter = 0
            block = reader.read(CHUNK_BYTES + TAG_BYTES)
            while True:
                following = reader.read(CHUNK_BYTES + TAG_BYTES)
                last = not following
                try:
                    plain = cipher.decrypt(_nonce(prefix, counter, last), block, associated)
                except InvalidTag:
                    raise SealError(
                        f"{source} failed authentication at chunk {counter} "
                        "(wrong key, tampered, truncated or renamed)"
                    ) from None
                writer.write(plain)
                if digest is not None:
                    digest.update(plain)
                if last:
                    break
                block, counter = following, counter + 1
    except SealError:
        dest.unlink(missing_ok=True)
        raise
