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


ERASE_JOURNAL = "erase-journal.json"


def load_erasing(state_dir: Path) -> tuple[list[str], dict[str, str]] | None:
    """An erasure that did not finish: (memory ids, scope), or None. Reads only.

    ``forget --erase`` writes ``erase-journal.json`` before its first delete and removes it once
    the texts are erased; the next forget, prune or ``pending apply`` finishes what it lists.
    An unreadable journal counts as none (the deletes themselves are journaled separately).
    """
    try:
        document = json.loads((state_dir / ERASE_JOURNAL).read_text(encoding="utf-8"))
        ids = [str(m) for m in document["memory_ids"]]
        scope = {str(k): str(v) for k, v in (document.get("scope") or {}).items()}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    return ids, scope
