"""Remove a whole embedded Qdrant directory, only when it holds nothing but a store's files.

``migrate --cleanup`` removes the old store a migration left behind. A directory named in an
old config may have been reused since (or named a parent directory by mistake): every entry
must be one qdrant-client 1.20's local mode writes, or nothing is removed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from memsync.errors import ConfigError, UnavailableError

META_FILE = "meta.json"
LOCK_FILE = ".lock"
COLLECTIONS_DIR = "collection"
STORAGE_FILES = frozenset("storage.sqlite" + suffix for suffix in ("", "-journal", "-wal", "-shm"))


def find_stranger(path: Path) -> str | None:
    """The first entry under ``path`` qdrant-client never writes (relative), or None. Reads only.

    Allowed: ``meta.json``, ``.lock``, ``collection/<name>/`` holding only ``storage.sqlite``
    and its SQLite journals (a legacy ``storage.dbm*`` is refused: its points were never
    migrated). Without ``meta.json`` only ``.lock`` may be there.
    """
    entries = sorted(path.iterdir())
    has_meta = any(e.name == META_FILE and e.is_file() for e in entries)
    for entry in entries:
        if entry.name == LOCK_FILE or (entry.name == META_FILE and entry.is_file()):
            continue
        if entry.name != COLLECTIONS_DIR or not entry.is_dir() or entry.is_symlink():
            return entry.name
        for collection in sorted(entry.iterdir()):
            if not has_meta or not collection.is_dir() or collection.is_symlink():
                return str(collection.relative_to(path))
            for stored in sorted(collection.iterdir()):
                if stored.name not in STORAGE_FILES or not stored.is_file() or stored.is_symlink():
                    return str(stored.relative_to(path))
    return None


def remove_directory(path: Path, *, dry_run: bool = False) -> int:
    """Remove the embedded Qdrant directory ``path``; return the bytes its files took.

    An absent directory gives 0. See ``VectorStore.remove_store``. Idempotent. ``collection/``
    goes first and ``meta.json`` after it, so a removal killed midway leaves a directory the
    next one accepts.

    Raises:
        ConfigError: (exit 10) an entry qdrant-client never writes is there (named); nothing
            is removed.
        UnavailableError: the directory cannot be listed or removed.
    """
    if not path.exists() and not path.is_symlink():
        return 0
    try:
        if path.is_symlink() or not path.is_dir():
            stranger: str | None = "(the path itself is not a directory)"
        else:
            stranger = find_stranger(path)
        if stranger is not None:
            raise ConfigError(
                str(path),
                [f"{stranger} is not an embedded Qdrant file: the directory is not only a store"],
                "remove the store's files by hand if it is no longer needed; memsync removes "
                "only a directory holding nothing but an embedded Qdrant store",
            )
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if not dry_run:
            if (path / COLLECTIONS_DIR).is_dir():  # first: killed midway, meta.json still
                shutil.rmtree(path / COLLECTIONS_DIR)  # vouches for what is left
            shutil.rmtree(path)
    except OSError as error:
        raise UnavailableError(
            f"removing the embedded Qdrant store {path} failed: {error}",
            "check the directory's permissions, then run the same command again",
        ) from error
    return size
