"""Pins: a snapshot retention never removes until an operator unpins it.

A pin is a small JSON document beside the snapshot (``pinned.json``, one of the sidecars a
manifest never lists), written through ``SnapshotRepository.write_json`` on each side where the
snapshot is stored: ``{"pinned": true, "reason": str, "by": "operator" | "tripwire", "at":
ISO 8601 UTC}``. Unpinning writes ``{"pinned": false, ...}`` so the record of who unpinned it
and when stays beside the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from memsync.errors import UsageError
from memsync.repository import Entry, SnapshotRepository
from memsync.stores.snapshots import PINNED, damaged_pin

PinnedBy = Literal["operator", "tripwire"]


def pin_of(entry: Entry) -> dict[str, Any] | None:
    """The active pin of a listed snapshot, or None (unpinned or never pinned). Pure.

    A pin document memsync cannot read (``pinned`` neither true nor false, an unreadable
    ``pinned.json``) counts as a pin (``damaged_pin``): retention never removes a snapshot
    because its pin was damaged.
    """
    document = entry.pin
    if document is None or document.get("pinned") is False:
        return None
    return document if document.get("pinned") is True else damaged_pin()


def pin(
    repository: SnapshotRepository,
    snapshot_id: str,
    *,
    reason: str,
    by: PinnedBy,
    now: datetime,
) -> dict[str, Any]:
    """Pin a stored snapshot; returns the pin document written. Writes atomically; idempotent.

    Pinning again replaces the reason (the newest one wins).

    Raises:
        UsageError: nothing of the snapshot is stored in ``repository``.
        UnavailableError: the repository is unreachable or refuses the write.
    """
    _require(repository, snapshot_id)
    document = {"pinned": True, "reason": reason, "by": by, "at": _iso(now)}
    repository.write_json(snapshot_id, PINNED, document)
    return document


def unpin(repository: SnapshotRepository, snapshot_id: str, *, now: datetime) -> bool:
    """Unpin a stored snapshot; returns whether it was pinned. Writes atomically; idempotent.

    An unreadable ``pinned.json`` (which retention counts as a pin) is replaced by the unpin
    document too.

    Raises:
        UsageError: nothing of the snapshot is stored in ``repository``.
        UnavailableError: the repository is unreachable or refuses the write.
    """
    _require(repository, snapshot_id)
    previous = repository.read_json(snapshot_id, PINNED)
    if previous is None and not _has_pin_file(repository, snapshot_id):
        return False
    was_pinned = previous is None or previous.get("pinned") is not False
    repository.write_json(
        snapshot_id,
        PINNED,
        {**(previous or {}), "pinned": False, "unpinned_at": _iso(now)},
    )
    return was_pinned


def _has_pin_file(repository: SnapshotRepository, snapshot_id: str) -> bool:
    """Whether the snapshot's listing shows a pin document (readable or not). Reads only."""
    listed = [e for e in repository.list() if e.id == snapshot_id and e.pin is not None]
    return bool(listed)


def _require(repository: SnapshotRepository, snapshot_id: str) -> None:
    if not repository.exists(snapshot_id):
        raise UsageError(
            f"snapshot {snapshot_id} is not stored at {repository.where}",
            "memsync snapshot list (--remote) shows the snapshots there",
        )


def _iso(now: datetime) -> str:
    return now.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class Pinned:
    """``snapshot pin``: the sides storing the snapshot and the pin written (None: a dry run)."""

    id: str
    dry_run: bool
    sides: tuple[str, ...]
    pin: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """``snapshot pin --json`` (docs/reference/json-output.md)."""
        return {
            "command": "snapshot pin",
            "id": self.id,
            "dry_run": self.dry_run,
            "sides": list(self.sides),
            "pin": self.pin,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Unpinned:
    """``snapshot unpin``: the sides storing the snapshot, and per side whether it was pinned."""

    id: str
    dry_run: bool
    was_pinned: dict[str, bool]

    def to_json(self) -> dict[str, Any]:
        """``snapshot unpin --json`` (docs/reference/json-output.md)."""
        return {
            "command": "snapshot unpin",
            "id": self.id,
            "dry_run": self.dry_run,
            "sides": list(self.was_pinned),
            "was_pinned": self.was_pinned,
        }
