"""One way to take, probe and describe ``flock(2)`` locks on files.

memsync marks "in use" with exclusive flocks: the operation lock, the daemon lock, a capture
or snapshot being built. A lock dies with its process, so a stale file never blocks anyone.
A holder writes ``pid N (argv)`` into the file so that others can name it in their errors.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


class LockHeld(Exception):  # noqa: N818 - a state, not a failure of this module
    """Another process holds the lock; ``holder`` is what it wrote (``pid N (argv)``) or ''."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by {holder or 'an unknown process'}")
        self.path = path
        self.holder = holder


def acquire(path: Path, *, wait: bool = False, note: bool = True) -> TextIO:
    """Take an exclusive flock on ``path`` (created if missing) and return its open handle.

    The lock lasts until the handle is closed or the process exits.

    Args:
        path: the lock file.
        wait: block until the lock is free instead of raising.
        note: replace the file's text with ``pid N (argv)`` once held.

    Raises:
        LockHeld: another process holds it (only when ``wait`` is False).
        OSError: the file cannot be created or opened.
    """
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise LockHeld(path, holder) from None
    except BaseException:
        handle.close()
        raise
    if note:
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} ({' '.join(sys.argv)})\n")
        handle.flush()
    return handle


@contextmanager
def hold(path: Path, *, wait: bool = False, note: bool = True) -> Iterator[TextIO]:
    """Hold an exclusive flock on ``path`` for the ``with`` block (see ``acquire``).

    Raises:
        LockHeld: another process holds it (only when ``wait`` is False).
        OSError: the file cannot be created or opened.
    """
    handle = acquire(path, wait=wait, note=note)
    try:
        yield handle
    finally:
        handle.close()


def holder(path: Path) -> str | None:
    """Return the holder's note (``pid N (argv)``, or '' if it wrote none), or None when free.

    A missing or unopenable file counts as free. Probes without blocking; writes nothing.
    """
    try:
        handle = path.open("r")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip()
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def holder_pid(note: str) -> int | None:
    """Return the pid in a holder's note (``pid N (argv)``), or None when it names none. Pure."""
    words = note.split()
    return int(words[1]) if len(words) > 1 and words[0] == "pid" and words[1].isdigit() else None
