"""``snapshot list``: every snapshot, local and (``remote``) in S3, with its state. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memsync import repository, utc
from memsync.config import Config
from memsync.repository import upload_marks
from memsync.snapshot import pins
from memsync.stores import snapshots
from memsync.stores.manifest import Manifest


@dataclass(frozen=True, slots=True, kw_only=True)
class Listing:
    """The snapshots by id, oldest first: one row per id on any side (``_row``)."""

    snapshots: tuple[dict[str, Any], ...]

    @property
    def pending_upload(self) -> int:
        """How many local snapshots wait for their upload."""
        return sum(1 for row in self.snapshots if row.get("upload_pending"))

    def to_json(self) -> dict[str, Any]:
        """``snapshot list --json`` (docs/reference/json-output.md)."""
        return {
            "command": "snapshot list",
            "snapshots": list(self.snapshots),
            "pending_upload": self.pending_upload,
        }


def list_snapshots(config: Config, *, remote: bool) -> Listing:
    """Every local snapshot and, with ``remote``, every one in S3, merged by id."""
    rows: dict[str, dict[str, Any]] = {}
    if config.snapshot.directory is not None:
        for info in snapshots.iter_local(config.snapshot.directory):
            rows[info.id] = _row(
                info.id, info.manifest, info.complete, info.is_verified, info.size_bytes, "local"
            )
            rows[info.id]["pin"] = pins.pin_of(info)
            rows[info.id]["local"]["verified_at"] = _verified_at(info.verified)
            rows[info.id]["local"]["failed"] = _failed(info.verified)
            rows[info.id]["upload_pending"] = upload_marks.read(info.path) is not None
    if remote:
        for entry in repository.remote(config).list():
            row = rows.get(entry.id)
            if row is None:
                rows[entry.id] = _row(
                    entry.id,
                    entry.manifest,
                    entry.complete,
                    entry.is_verified,
                    entry.size_bytes,
                    "remote",
                )
                rows[entry.id]["pin"] = pins.pin_of(entry)
            else:
                row["remote"] = {"complete": entry.complete, "verified": entry.is_verified}
                row["pin"] = row["pin"] or pins.pin_of(entry)
            rows[entry.id]["remote"]["verified_at"] = _verified_at(entry.verified)
            rows[entry.id]["remote"]["failed"] = _failed(entry.verified)
    return Listing(snapshots=tuple(rows[key] for key in sorted(rows)))


def _failed(document: dict[str, Any] | None) -> bool:
    """Whether the last verification recorded found a problem (False: passed, or never run)."""
    return document is not None and document.get("ok") is False


def _verified_at(document: dict[str, Any] | None) -> str | None:
    """When a snapshot was last read back and matched; None when its verification failed.

    The later of ``verified_at`` (a full verification) and ``files_read_at`` (a scheduled slice).
    """
    if not document or document.get("ok") is not True:
        return None
    times = [document.get(k) for k in ("verified_at", "files_read_at")]
    return max((t for t in times if isinstance(t, str)), default=None)


def _row(
    snapshot_id: str,
    manifest: Manifest | None,
    complete: bool,
    verified: bool,
    size: int,
    where: str,
) -> dict[str, Any]:
    return {
        "id": snapshot_id,
        "created_at": utc.iso(snapshots.id_time(snapshot_id)),
        "complete": complete,
        "verified": verified,
        "size_bytes": size,
        "points": manifest.points if manifest else None,
        "memories": manifest.history.get("memories") if manifest else None,
        "label": manifest.label if manifest else None,
        "local": {"complete": complete, "verified": verified} if where == "local" else None,
        "remote": {"complete": complete, "verified": verified} if where == "remote" else None,
    }
