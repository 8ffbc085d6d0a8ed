"""What the restore breaker tests share: two snapshots of one deployment, an older and a newer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def two_snapshots(cli: Any, config: Path) -> tuple[str, str]:
    """``(older, newer)``: the ids of two snapshots taken one after the other (ids: seconds)."""
    ids = []
    for _ in range(2):
        if ids:
            time.sleep(1.1)  # a snapshot id has one-second resolution
        made = cli("snapshot", "create", "--json", config=config)
        assert made.code == 0, made.err
        ids.append(made.json()["id"])
    older, newer = ids
    assert older < newer
    return older, newer
