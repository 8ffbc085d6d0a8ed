"""The old store a switched migration keeps: erased too, until ``migrate --cleanup``.

After ``memsync migrate --switch`` (journal phase ``switched``) the app runs on the new store
and the old one is kept for ``[migrate] keep_source_days``; it holds every memory of before
the switch. An erasure removes the erased memories' points from it as well: nobody holds it
(the app moved), so they are deleted from its files directly (embedded Qdrant: the port's
``erase_points`` on its directory, which rewrites the files) or its tables (pgvector: DELETE
and VACUUM FULL). Only vectors: history.db is shared with the new store and erased already.
The old deployment's config is read from ``<state_dir>/migrate-source.json`` (written by the
switch; ``memsync.migrate.source_record``, a higher layer: its reading is repeated here).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memsync.config import Config, parse
from memsync.config.accepted import read_accepted
from memsync.deployment import Deployment
from memsync.errors import MemsyncError
from memsync.stores.backends import vector_store_for
from memsync.stores.vector_store import VectorStore

MIGRATE_JOURNAL = "migrate.json"  # memsync.migrate.journal.JOURNAL
SOURCE_RECORD = "migrate-source.json"  # memsync.migrate.source_record.SOURCE_RECORD


def switched(state_dir: Path) -> bool:
    """Whether the migration journal is in phase ``switched`` (the old store kept). Reads only.

    An absent or damaged journal counts as not switched (erase lists the target of a damaged
    one as ``migration-target``).
    """
    try:
        document = json.loads((state_dir / MIGRATE_JOURNAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and document.get("phase") == "switched"


def _old_store(state_dir: Path) -> VectorStore:
    """The old store from the source record. Raises ConfigError when it is missing or bad."""
    path = state_dir / SOURCE_RECORD
    if not path.is_file():
        raise MemsyncError(f"the old deployment's config {path} (written by the switch) is missing")
    record = read_accepted(path, str(path))
    origin, document = record.get("from"), record.get("document")
    if not isinstance(origin, str) or not isinstance(document, dict):
        raise MemsyncError(f"{path} is not a migrate source record (keys from, document)")
    old: Config = parse(
        document, source=str(path), base_dir=Path(origin).parent, environ=os.environ
    )
    return vector_store_for(old)


def erase_old_store(deployment: Deployment, memory_ids: Sequence[str]) -> dict[str, Any] | None:
    """Remove ``memory_ids``' points from a switched migration's old store; None when none.

    None too when the old store is the live store again (the old config put back by hand).

    Returns ``{"where", "erased", "holds", "why", "remove"}``: ``erased`` the stored rows
    removed (None when not erased), ``holds`` ``"no"`` once erased, ``"yes"`` when the store
    is held by a process, ``"unknown"`` when it could not be read or written, or an embedded
    directory is not there (moved by hand: it may still hold them; ``why`` says which,
    ``remove`` what to do). Never raises for the old store: the erasure of the live
    deployment is done and stays done. Writes the old store. Idempotent.
    """
    config = deployment.config
    if not memory_ids or not switched(config.state_dir):
        return None
    where = str(config.state_dir / SOURCE_RECORD)
    retry = "memsync forget --erase with the same selection again (it is idempotent)"
    try:
        store = _old_store(config.state_dir)
        where = store.where
        if where == deployment.vector_store.where:
            return None  # the old config was put back by hand: the live store, erased as such
        holder = store.holder()
        if holder is not None:
            return _not_erased(where, "yes", f"held by {holder.describe()}",
                               f"stop that process (the old app), then {retry}")  # fmt: skip
        erased = _erase(store, memory_ids)
    except MemsyncError as error:
        return _not_erased(where, "unknown", error.message,
                           f"put it back (or fix the cause), then {retry}; or memsync migrate "
                           "--cleanup ends the migration once it is due")  # fmt: skip
    return {"where": where, "erased": erased, "holds": "no", "why": None, "remove": None}


def _erase(store: VectorStore, memory_ids: Sequence[str]) -> int:
    """Delete the points (rows) from the old store's collections; the rows removed."""
    return store.erase_old(memory_ids)


def _not_erased(where: str, holds: str, why: str, remove: str) -> dict[str, Any]:
    return {"where": where, "erased": None, "holds": holds, "why": why, "remove": remove}
