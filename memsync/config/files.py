"""Reading the small text files a configuration names: bounded, UTF-8, never a crash."""

from __future__ import annotations

from pathlib import Path

MAX_BYTES = 1024 * 1024  # a memsync or mem0 configuration is a few KiB


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
