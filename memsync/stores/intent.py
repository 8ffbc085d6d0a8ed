"""The forget journal (``<state_dir>/forget-journal.json``), read by reconcile.

forget and prune write the memory ids they are about to delete before touching anything and
remove the file once every delete is proven. A memory listed here that shows up as
``missing-point`` was being forgotten when memsync died: reconcile closes it, never restores it.
"""

from __future__ import annotations

import json
from pathlib import Path

FORGET_JOURNAL = "forget-journal.json"


def load_forgetting(state_dir: Path) -> list[str]:
    """Memory ids of a forget or prune that did not finish; empty when none. Reads only."""
    try:
        document = json.loads((state_dir / FORGET_JOURNAL).read_text(encoding="utf-8"))
        return [str(m) for m in document.get("memory_ids", [])]
    except (OSError, ValueError, AttributeError):
        return []
