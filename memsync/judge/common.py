"""What every judging module shares: scopes, the capture window, findings or ``in-flight``. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memsync import findings
from memsync.model import CaptureWindow, Finding, Inventory

LIVE_EVENTS = frozenset({"ADD", "UPDATE"})
SCOPE_KEYS = ("agent_id", "run_id", "user_id")  # mem0's scope order: sorted key names


def session_scope(payload: Mapping[str, Any]) -> str:
    """Return mem0's session scope string for a payload (mem0ai 2.2.1 ``_build_session_scope``)."""
    parts = []
    for key in SCOPE_KEYS:
        value = payload.get(key)
        if value:
            escaped = str(value).replace("%", "%25").replace("&", "%26").replace("=", "%3D")
            parts.append(f"{key}={escaped}")
    return "&".join(parts)


def in_window(moment: datetime | None, window: CaptureWindow) -> bool:
    """Tell whether ``moment`` lies inside the capture window.

    The window runs from the vector capture's start, less its in-flight margin
    (``[check] in_flight_margin_s``), to the history capture's end. None never counts.
    """
    if moment is None:
        return False
    return window.vectors_at - window.in_flight_margin <= moment <= window.history_finished_at


def finding_or_in_flight(
    inventory: Inventory,
    code: str,
    memory_id: str | None,
    message: str,
    moment: datetime | None = None,
    **fields: Any,
) -> Finding:
    """A finding of ``code``, or ``in-flight`` when ``moment`` falls in the capture window."""
    if moment is not None and in_window(moment, inventory.window):
        fields.pop("fix", None)
        return findings.make(
            "in-flight",
            f"{code} explained by a write inside the capture window ({moment.isoformat()}): {message}",
            collection=inventory.collection,
            memory_id=memory_id,
            **fields,
        )
    return findings.make(
        code, message, collection=inventory.collection, memory_id=memory_id, **fields
    )
