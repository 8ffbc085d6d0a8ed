"""``snapshot upload`` and ``download``: a complete local snapshot to S3 and back, via the port.

Upload is ``S3Repository.put`` (every file with its sha256, the manifest last, resuming);
download is ``fetch`` (into ``<id>.partial/``, every byte checked, renamed only then).
"""

from __future__ import annotations

from pathlib import Path

from memsync.config import Config
from memsync.repository import S3Repository, SnapshotRepository, remote
from memsync.repository.port import BytesProgress
from memsync.s3 import ObjectStore
from memsync.stores import manifest as manifests


def upload_snapshot(
    config: Config,
    directory: Path,
    progress: BytesProgress | None = None,
    store: ObjectStore | None = None,
) -> dict[str, int]:
    """Upload a complete local snapshot directory; ``store`` defaults to the configured bucket.

    Returns ``{"sent": n, "skipped": n, "bytes": n}``.

    Raises:
        ConfigError: no ``[s3]`` section.
        UnavailableError: the snapshot is incomplete or changed since it was made, or S3 fails
            (nothing local is removed).
    """
    manifest = manifests.read(directory)
    target = S3Repository(store) if store is not None else remote(config)
    return target.put(directory.name, directory, manifest, progress).to_json()


def download_snapshot(
    repository: SnapshotRepository,
    snapshot_id: str,
    dest_parent: Path,
    progress: BytesProgress | None = None,
) -> Path:
    """Download a snapshot into ``dest_parent/<id>/``, verifying every byte first.

    Raises:
        UnavailableError: incomplete, an object missing or differing, or S3 unreachable;
            nothing partial is left.
        UsageError: ``dest_parent/<id>`` already exists.
    """
    return repository.fetch(snapshot_id, dest_parent, progress)
