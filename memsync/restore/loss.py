"""What a restored snapshot lacks, as far as memsync saw: its last check against the snapshot.

``since_snapshot`` is pure: the last check memsync recorded (``state.last_check``, read before
the restore's own check replaces it) against the snapshot's manifest (``scopes``, or its point
count in manifests older than that field). Counts only: a memory written and another deleted
after the snapshot leave the count alone, so the answer is "about".
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from memsync import utc
from memsync.model import SCOPE_KINDS, TOTAL
from memsync.stores.manifest import Manifest

CLOCK_SKEW = timedelta(minutes=5)  # a check stamped later than now by more: a clock set wrong


def since_snapshot(
    seen: dict[str, Any] | None, manifest: Manifest, now: datetime
) -> dict[str, Any]:
    """The ``since_snapshot`` object of restore's report (docs/reference/json-output.md). Pure.

    ``known`` is False when no check is recorded (the state directory did not survive) or the
    last one was made before the snapshot: then nothing can be said of what came after it.
    ``missing``: memories the last check counted beyond what the snapshot holds (0 when it
    holds as many or more); ``scopes``: each scope the snapshot holds fewer memories of than
    the last check counted, ``{"scope": "user_id=bob", "seen": n, "in_snapshot": m}``.
    """
    in_snapshot = (manifest.scopes or {}).get(TOTAL, manifest.points)
    document: dict[str, Any] = {
        "known": False,
        "last_check_at": None,
        "last_check_age_s": None,
        "after_snapshot": None,
        "memories_seen": None,
        "memories_in_snapshot": in_snapshot,
        "missing": None,
        "scopes": [],
    }
    if seen is None:
        return document
    checked_at: datetime = seen["checked_at"]
    after = checked_at > manifest.created_at
    document |= {
        "last_check_at": utc.iso(checked_at),
        "last_check_age_s": round((now - checked_at).total_seconds(), 1),
        "after_snapshot": after,
        "memories_seen": seen["memories"],
    }
    if checked_at > now + CLOCK_SKEW:  # stamped in the future: its order with the snapshot is moot
        return document | {"after_snapshot": None}
    if not after or not isinstance(in_snapshot, int):
        return document
    return document | {
        "known": True,
        "missing": max(seen["memories"] - in_snapshot, 0),
        "scopes": _fewer(seen["scopes"], manifest.scopes) if manifest.scopes else [],
    }


def _fewer(seen: dict[str, Any], held: dict[str, Any]) -> list[dict[str, Any]]:
    """The scopes the snapshot holds fewer memories of than were seen, most missing first."""
    found = []
    for kind in SCOPE_KINDS:
        counted, kept = seen.get(kind), held.get(kind)
        counted = counted if isinstance(counted, dict) else {}  # a hand-edited or foreign file
        kept = kept if isinstance(kept, dict) else {}
        for scope_id, count in counted.items():
            in_snapshot = kept.get(scope_id, 0)
            if not isinstance(in_snapshot, int) or isinstance(in_snapshot, bool):
                continue
            if isinstance(count, int) and not isinstance(count, bool) and count > in_snapshot:
                found.append(
                    {"scope": f"{kind}={scope_id}", "seen": count, "in_snapshot": in_snapshot}
                )
    return sorted(found, key=lambda s: (s["in_snapshot"] - s["seen"], s["scope"]))
