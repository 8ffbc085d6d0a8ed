"""The record of scheduled verification: ``<state_dir>/verify-state.json``.

When each stored file was last read back and matched its manifest, per repository location
(a directory, ``s3://bucket/prefix``), and when a run last found nothing wrong::

    {"version": 1, "last_run_at": time, "last_ok_at": time | null,
     "sides": {"<repository location>": {"<snapshot id>": {"<file path>": time}}}}

Times are ISO 8601 UTC. Written atomically (``memsync.state.write_json_atomic``) under
``verify.lock``, which a scheduled run holds for its duration.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from memsync import utc
from memsync.state import write_json_atomic

STATE_FILE = "verify-state.json"
LOCK_FILE = "verify.lock"


def load_state(state_dir: Path) -> dict[str, Any]:
    """``verify-state.json`` with times parsed; empty when absent or unreadable. Reads only.

    The record is a cache of what was read when: a damaged one reads as empty, and the next
    run reads the oldest-looking files first (nothing is lost but a little reading).
    """
    try:
        document = json.loads((state_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        document = {}
    raw = document.get("sides") if isinstance(document, dict) else None
    parsed: dict[str, dict[str, dict[str, datetime]]] = {}
    for where, snapshots in (raw or {}).items() if isinstance(raw, dict) else ():
        if isinstance(snapshots, dict):
            parsed[where] = {
                sid: {path: moment for path, text in files.items() if (moment := _time(text))}
                for sid, files in snapshots.items()
                if isinstance(files, dict)
            }
    last_ok = document.get("last_ok_at") if isinstance(document, dict) else None
    return {"version": 1, "sides": parsed, "last_ok_at": last_ok if _time(last_ok) else None}


def _time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return utc.parse(text)
    except ValueError:
        return None


def save_state(state_dir: Path, state: dict[str, Any]) -> None:
    """Write ``state`` (as ``load_state`` returns it) to ``verify-state.json`` atomically."""
    write_json_atomic(state_dir / STATE_FILE, _dump(state))


def _dump(state: dict[str, Any]) -> dict[str, Any]:
    return {
        **state,
        "sides": {
            where: {
                sid: {path: utc.iso(moment) for path, moment in sorted(files.items())}
                for sid, files in sorted(snapshots.items())
            }
            for where, snapshots in state["sides"].items()
        },
    }
