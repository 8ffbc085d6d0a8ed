"""Snapshot repositories: the port (``SnapshotRepository``) and its directory and S3 implementations.

``local(config)`` and ``remote(config)`` open the configured ones; ``parse_s3_target`` reads an
``s3://bucket/prefix/ID`` argument. ``plaintext`` is the one reader of a snapshot's plaintext.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memsync.config import Config
from memsync.errors import ConfigError, UsageError
from memsync.repository.local import LocalRepository
from memsync.repository.plaintext import copy_checked, decrypt, encryption_key, plaintext
from memsync.repository.port import Entry, FileCheck, FileProblem, SnapshotRepository, Transfer
from memsync.repository.remote import S3Repository
from memsync.stores.manifest_schema import ID_PATTERN, valid_id

if TYPE_CHECKING:  # boto3 loads only when a command opens the bucket (object_store)
    from memsync.s3 import ObjectStore

__all__ = [
    "Entry",
    "FileCheck",
    "FileProblem",
    "LocalRepository",
    "S3Repository",
    "SnapshotRepository",
    "Transfer",
    "copy_checked",
    "decrypt",
    "encryption_key",
    "local",
    "local_or_none",
    "object_store",
    "parse_s3_target",
    "plaintext",
    "remote",
    "snapshot_dir",
]


def snapshot_dir(config: Config) -> Path:
    """The configured snapshot directory. Raises ConfigError when none is set."""
    if config.snapshot.directory is None:
        raise ConfigError(config.source, ["snapshot.directory: required for snapshots"])
    return config.snapshot.directory


def local(config: Config) -> LocalRepository:
    """The configured local repository. Raises ConfigError without ``snapshot.directory``."""
    return LocalRepository(snapshot_dir(config))


def local_or_none(config: Config) -> LocalRepository | None:
    """The configured local repository, or None without ``snapshot.directory``."""
    return (
        LocalRepository(config.snapshot.directory)
        if config.snapshot.directory is not None
        else None
    )


def object_store(config: Config) -> ObjectStore:
    """The configured object store. Raises ConfigError without an ``[s3]`` section."""
    if config.s3 is None:
        raise ConfigError(config.source, ["s3: an [s3] section is required for remote snapshots"])
    from memsync.s3 import ObjectStore

    return ObjectStore(config.s3)


def remote(config: Config) -> S3Repository:
    """The configured S3 repository. Raises ConfigError without an ``[s3]`` section."""
    return S3Repository(object_store(config))


def parse_s3_target(config: Config, target: str) -> tuple[S3Repository, str]:
    """Split ``s3://bucket/prefix/ID`` (or ``s3://ID``) into a repository and a snapshot id.

    Endpoint and region come from ``[s3]``; ``s3://ID`` uses the configured bucket and prefix.

    Raises:
        ConfigError: no ``[s3]`` section.
        UsageError: the target does not end in a snapshot id, or has an empty, ``.`` or ``..``
            part (an object key, not a path: nothing is resolved).
    """
    store = object_store(config)
    rest = target[len("s3://") :].strip("/")
    parts = rest.split("/")
    snapshot_id = parts[-1]
    if not ID_PATTERN.match(snapshot_id) or not valid_id(snapshot_id):
        raise UsageError(f"{target!r} does not end in a snapshot id")
    if any(part in ("", ".", "..") or not part.isprintable() for part in parts):
        raise UsageError(
            f"{target!r} is not s3://BUCKET/PREFIX/ID: empty, '.' or '..' parts are refused",
            "name the snapshot as memsync snapshot list --remote shows it",
        )
    if len(parts) > 1:
        store.bucket = parts[0]
        store.prefix = "/".join(parts[1:-1])
    return S3Repository(store), snapshot_id
