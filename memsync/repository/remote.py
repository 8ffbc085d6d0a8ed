"""``S3Repository``: snapshots as objects, ``s3://<bucket>/<prefix>/<id>/<path>``.

Every file is uploaded with its sha256 in the object metadata and the manifest last, so a
snapshot without its manifest object is incomplete by construction; an object whose size and
sha256 already match is not sent again, so an interrupted upload resumes. boto3 stays in
``memsync.s3``; this module speaks only ``ObjectStore``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from memsync.errors import UnavailableError
from memsync.repository.base import BaseRepository
from memsync.repository.port import BytesProgress, Entry, Transfer
from memsync.stores import manifest as manifests
from memsync.stores import snapshots
from memsync.stores.manifest import MANIFEST, Manifest
from memsync.stores.manifest_schema import ID_PATTERN
from memsync.stores.snapshots import PINNED, VERIFIED, sha256_file

if TYPE_CHECKING:  # boto3 loads with the store itself (``repository.object_store``)
    from memsync.s3 import ObjectStore

logger = structlog.get_logger(__name__)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class S3Repository(BaseRepository):
    """Snapshots under one bucket and prefix of an S3-compatible service.

    Args:
        store: the bucket and prefix (``memsync.s3.ObjectStore``).
    """

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    @property
    def where(self) -> str:
        """``s3://bucket/prefix`` (with the endpoint when one is set)."""
        return self.store.where

    def location(self, snapshot_id: str, path: str = "") -> str:
        """``s3://bucket/<key>`` of a snapshot or one of its files. Pure."""
        return f"s3://{self.store.bucket}/{self.store.key(snapshot_id, path)}"

    def _base(self) -> str:
        return self.store.key("") + "/" if self.store.prefix else ""

    def list(self) -> list[Entry]:
        """Every snapshot id under the prefix (see ``SnapshotRepository.list``).

        Complete means its manifest object exists and is a valid memsync manifest.
        """
        grouped: dict[str, tuple[set[str], list[int]]] = {}
        base = self._base()
        for item in self.store.iter_objects(base):
            snapshot_id, _, name = item.key[len(base) :].partition("/")
            if not name or not ID_PATTERN.match(snapshot_id):
                continue  # a bare object named like an id is not a snapshot
            names, size = grouped.setdefault(snapshot_id, (set(), [0]))
            names.add(name)
            size[0] += item.size
        results = []
        for snapshot_id, (names, size) in sorted(grouped.items()):
            manifest = snapshots.parse_or_none(
                self._json(snapshot_id, MANIFEST, names), snapshot_id
            )
            results.append(
                Entry(
                    id=snapshot_id,
                    complete=manifest is not None,
                    manifest=manifest,
                    verified=self._json(snapshot_id, VERIFIED, names),
                    size_bytes=size[0],
                    pin=self._pin(snapshot_id, names),
                )
            )
        return results

    def _json(
        self, snapshot_id: str, name: str, names: set[str] | None = None
    ) -> dict[str, Any] | None:
        if names is not None and name not in names:
            return None
        raw = self.store.get_bytes(self.store.key(snapshot_id, name))
        try:
            document = manifests.decode(raw) if raw else None
        except ValueError:
            return None
        return document if isinstance(document, dict) else None

    def _pin(self, snapshot_id: str, names: set[str]) -> dict[str, Any] | None:
        """The pin document; an unreadable ``pinned.json`` object reads as pinned."""
        if PINNED not in names:
            return None
        return self._json(snapshot_id, PINNED, names) or snapshots.damaged_pin()

    def read_json(self, snapshot_id: str, name: str) -> dict[str, Any] | None:
        """A small JSON object beside the snapshot, or None (see the port)."""
        return self._json(snapshot_id, name)

    def write_json(self, snapshot_id: str, name: str, document: dict[str, Any]) -> None:
        """Put a small JSON object (sorted keys) beside the snapshot. Idempotent."""
        data = json.dumps(document, sort_keys=True).encode()
        self.store.put_bytes(self.store.key(snapshot_id, name), data, _sha(data))

    def put(
        self,
        snapshot_id: str,
        source: Path,
        manifest: Manifest,
        progress: BytesProgress | None = None,
    ) -> Transfer:
        """Upload every listed file with its sha256, then the manifest (see the port)."""
        sent = skipped = sent_bytes = 0
        for entry in manifest.files:
            local = source / entry.path
            if not local.is_file() or sha256_file(local) != entry.stored:
                raise UnavailableError(
                    f"{local} differs from its manifest: it was changed after the snapshot",
                    f"memsync snapshot verify {snapshot_id}; upload another snapshot",
                )
            if self.store.put_file(
                self.store.key(snapshot_id, entry.path), local, entry.stored[1], progress
            ):
                sent, sent_bytes = sent + 1, sent_bytes + entry.stored[0]
            else:
                skipped += 1
        data = manifest.to_bytes()
        self.store.put_bytes(self.store.key(snapshot_id, MANIFEST), data, _sha(data))
        logger.info(
            "snapshot_uploaded",
            snapshot_id=snapshot_id,
            bucket=self.store.bucket,
            sent=sent,
            skipped=skipped,
        )
        return Transfer(sent=sent, skipped=skipped, bytes=sent_bytes)

    def delete(self, snapshot_id: str) -> None:
        """Delete the manifest object first, then every object under the snapshot. Idempotent."""
        self.store.delete([self.store.key(snapshot_id, MANIFEST)])
        self.store.delete(
            [item.key for item in self.store.iter_objects(self.store.key(snapshot_id) + "/")]
        )

    def _read_small(self, snapshot_id: str, name: str) -> bytes | None:
        return self.store.get_bytes(self.store.key(snapshot_id, name))

    def _stored_names(self, snapshot_id: str) -> set[str]:
        prefix = self.store.key(snapshot_id) + "/"
        return {item.key[len(prefix) :] for item in self.store.iter_objects(prefix)}

    def _root(self, snapshot_id: str, keep: Path) -> Path:
        return keep

    def _readable(
        self, snapshot_id: str, path: str, root: Path, progress: BytesProgress | None
    ) -> Path:
        key = self.store.key(snapshot_id, path)
        self.store.get_file(key, root / path, progress, f"verify {key} (reading it back)")
        return root / path

    def _copy_to(
        self, snapshot_id: str, path: str, target: Path, progress: BytesProgress | None
    ) -> None:
        self.store.get_file(self.store.key(snapshot_id, path), target, progress)
