"""One way to write and read memsync's own UTC timestamps (``2026-12-01T11:18:09.5Z``).

Timestamps memsync writes (JSON output, manifests, state files) are ISO 8601 in UTC with a
``Z``. Timestamps mem0 writes are read leniently by ``memsync.model.parse_time`` instead.
"""

from __future__ import annotations

from datetime import UTC, datetime


def iso(moment: datetime) -> str:
    """Return ``moment`` as ISO 8601 UTC text with a ``Z`` suffix. Pure.

    Raises:
        ValueError: ``moment`` is naive (memsync never makes naive datetimes).
    """
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment!r}: memsync times are UTC-aware")
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def iso_or_none(moment: datetime | None) -> str | None:
    """``iso(moment)``, or None for None. Pure."""
    return None if moment is None else iso(moment)


def parse(text: str) -> datetime:
    """Read a timestamp written by ``iso`` (or any ISO 8601 text with an offset) as aware UTC. Pure.

    Raises:
        ValueError: the text is not ISO 8601 or has no offset.
    """
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no UTC offset")
    return parsed.astimezone(UTC)
