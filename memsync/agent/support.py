"""Which mem0ai releases memsync writes through (docs/reference/compatibility.md). Pure.

Used by the one-shot writer before it builds a ``Memory``, and by ``memsync doctor``.
"""

from __future__ import annotations

import re
from typing import Any

# The mem0ai releases memsync writes through: tested from 0.1.118 to 2.2.x
# (docs/reference/compatibility.md).
OLDEST_MEM0 = (0, 1, 118)
NEWEST_MAJOR = 2
# mem0ai 0.0.7 to 1.0.7 delete an embedded Qdrant directory whenever a Memory opens it without
# ``on_disk = true`` (mem0's issue tracker): opening it would wipe the store.
WIPES_WITHOUT_ON_DISK = ((0, 0, 7), (1, 0, 7))


def _release(version: str | None) -> tuple[int, ...] | None:
    """The leading numbers of a version string (``"2.0.10"`` -> (2, 0, 10)), or None."""
    if not version:
        return None
    numbers = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?", version)
    if numbers is None:
        return None
    return tuple(int(part or 0) for part in numbers.groups())


def refusal(mem0_version: str | None, settings: dict[str, Any]) -> str | None:
    """Why this interpreter's mem0ai must not open the deployment, or None. Pure but for no I/O.

    Returns a one-line reason: mem0ai missing, older than memsync supports, of a newer major
    release, or one that deletes an embedded store opened without ``on_disk = true``.
    """
    release = _release(mem0_version)
    if release is None:
        return "mem0ai is not installed in this interpreter"
    if release < OLDEST_MEM0:
        return f"mem0ai {mem0_version} is older than 0.1.118, the oldest memsync writes through"
    if release[0] > NEWEST_MAJOR:
        return f"mem0ai {mem0_version} is newer than the 2.x releases memsync writes through"
    store = settings.get("vector_store") or {}
    store_config = store.get("config") or {} if isinstance(store, dict) else {}
    provider = store.get("provider", "qdrant") if isinstance(store, dict) else "qdrant"
    first, last = WIPES_WITHOUT_ON_DISK
    if (
        provider == "qdrant"
        and first <= release <= last
        and store_config.get("on_disk") is not True
    ):
        return (
            f"mem0ai {mem0_version} deletes the embedded Qdrant directory whenever a Memory opens "
            "it without vector_store.config.on_disk = true"
        )
    return None
