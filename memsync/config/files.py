"""Reading the small files a configuration names: bounded, never a crash, never echoed."""

from __future__ import annotations

from pathlib import Path

from memsync.errors import ConfigError

MAX_BYTES = 1024 * 1024  # a memsync or mem0 configuration is a few KiB
MAX_KEY_BYTES = 64 * 1024  # a key file holds 32 bytes, a signing key a few more


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path``, universal newlines. Reads at most ``MAX_BYTES`` + 1 bytes.

    Raises:
        OSError: the file is missing or unreadable.
        ValueError: it is larger than ``MAX_BYTES`` or not UTF-8 (the message never quotes it).
    """
    with path.open("rb") as stream:
        data = stream.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path} is too large (more than {MAX_BYTES} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_key_file(path: Path, key: str, source: str) -> bytes:
    """The bytes of the key file ``path`` that the configuration key ``key`` names. Reads only.

    For ``snapshot.encrypt_key_file`` and ``snapshot.signing_key_file``: a problem names the
    key's dotted path and the file, never its content.

    Args:
        path: the key file.
        key: the dotted path of the key naming it (``"snapshot.signing_key_file"``).
        source: the configuration file, for the message.

    Raises:
        ConfigError: the file is unreadable or larger than ``MAX_KEY_BYTES``.
    """
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_KEY_BYTES + 1)
    except OSError as error:
        problem = f"{key}: key file {path} is unreadable: {error.strerror or error}"
        raise ConfigError(source, [problem]) from error
    if len(data) > MAX_KEY_BYTES:
        raise ConfigError(source, [f"{key}: key file {path} is too large to be a key"])
    return data
