"""After an erasure's rewrites: WAL files checkpointed and truncated, then every byte searched.

In WAL mode a ``VACUUM`` writes the rewritten pages into the ``-wal`` file: the main file keeps
the old pages (the text) until a checkpoint copies them back, and the ``-wal`` file keeps the
frames of earlier transactions (the text again) until it is truncated. So after the rewrites
each live file in WAL mode gets ``PRAGMA wal_checkpoint(TRUNCATE)``: through the app's agent
when the app holds the store (``checkpoint`` runs alone there: no app call, read or write, is in
flight), else on a connection of memsync's own (nobody holds the store, or a window stopped the
app). Then the main files and their ``-wal``, ``-shm`` and ``-journal`` files are searched byte
by byte for every version of the erased texts. Only a checkpoint that truncated and a search
with no hit make the erasure ``verified``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memsync.errors import MemsyncError
from memsync.stores.journal_mode import WAL, LiveFile

SIDE_FILES = ("-wal", "-shm", "-journal")
CHUNK = 1 << 20
TRUNCATED = "truncated"
CHECKPOINT_TIMEOUT_S = 5.0  # the app's own busy timeout

# ``paths -> {path: [busy, log frames, checkpointed frames]}``, the agent's ``checkpoint``
Checkpointer = Callable[[Sequence[str]], Mapping[str, Any]]


def own_checkpoint(paths: Sequence[str]) -> dict[str, list[int]]:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` on a connection of memsync's own, per file.

    Raises:
        sqlite3.Error: a file cannot be opened.
    """
    answers: dict[str, list[int]] = {}
    for path in paths:
        connection = sqlite3.connect(path, timeout=CHECKPOINT_TIMEOUT_S)
        try:
            row = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            answers[path] = [int(value) for value in row]
        finally:
            connection.close()
    return answers


def checkpoint(files: Sequence[LiveFile], through: Checkpointer | None) -> dict[str, str]:
    """Checkpoint and truncate every live file in WAL mode: ``{label: verdict}``.

    ``verdict``: ``"truncated"`` (the ``-wal`` file is empty or gone), or why not (a reader or
    writer kept it: ``"busy: ..."``). Files in rollback mode are not listed.
    """
    wal = [f for f in files if f.mode == WAL]
    if not wal:
        return {}
    paths = [str(f.path) for f in wal]
    answers: Mapping[str, Any] = {}
    try:
        if through is not None:
            try:
                answers = through(paths)
            except MemsyncError:  # an agent of an older memsync, or busy: memsync's own connection
                answers = own_checkpoint(paths)
        else:
            answers = own_checkpoint(paths)
    except (sqlite3.Error, OSError) as error:
        return {f.label: f"not checkpointed: {error}" for f in wal}
    verdicts = {}
    for live in wal:
        answer = answers.get(str(live.path))
        left = Path(f"{live.path}-wal")
        size = left.stat().st_size if left.exists() else 0
        if isinstance(answer, list) and answer and answer[0] == 0 and size == 0:
            verdicts[live.label] = TRUNCATED
        else:
            verdicts[live.label] = (
                f"busy: another connection kept {left.name} ({size} bytes; checkpoint answered "
                f"{answer})"
            )
    return verdicts


def store_files(files: Iterable[LiveFile]) -> list[Path]:
    """Each live file and its ``-wal``, ``-shm`` and ``-journal`` files that exist."""
    found = []
    for live in files:
        for path in (live.path, *(Path(f"{live.path}{s}") for s in SIDE_FILES)):
            if path.is_file():
                found.append(path)
    return found


def holds(path: Path, needles: Sequence[bytes]) -> bool:
    """Whether any of ``needles`` occurs in the file's bytes (read in 1 MiB chunks)."""
    if not needles:
        return False
    overlap = max(len(n) for n in needles) - 1
    tail = b""
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            window = tail + chunk
            if any(n in window for n in needles):
                return True
            tail = window[-overlap:] if overlap else b""
    return False


def byte_hits(files: Sequence[LiveFile], texts: Iterable[str]) -> dict[str, Any]:
    """``{"files": n searched, "hits": [paths holding a text]}``. Reads only."""
    needles = sorted({t.encode("utf-8") for t in texts if t})
    searched = store_files(files)
    return {"files": len(searched), "hits": [str(p) for p in searched if holds(p, needles)]}
