"""``repair-meta``: make an embedded store's ``meta.json`` loadable by the app's qdrant-client again.

A qdrant-client newer than the app's (memsync 0.1's own writes, or another tool) rewrites
``<path>/meta.json`` with keys the app's qdrant-client refuses, and the app no longer starts
(``ValidationError ... CreateCollection ... Extra inputs are not permitted``). This asks the
app's own qdrant-client, in the app's interpreter (``stores.mem0.app_meta``), which keys it
refuses; when every such key is null (unset), it takes a snapshot, then rewrites the file
without them and keeps the old one beside it (``meta.json.memsync-<unix time>``). A refused key
with a value is never dropped: the command stops (exit 11) and names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from memsync import snapshot
from memsync.deployment import Deployment
from memsync.errors import ConfigError, UnavailableError
from memsync.stores import app_process, interpreter, mem0
from memsync.stores.interpreter import AppInterpreter

logger = structlog.get_logger(__name__)


@dataclass(slots=True)
class MetaRepaired:
    """What ``repair-meta`` found and did.

    Attributes:
        path: the store's ``meta.json``.
        app: the interpreter whose qdrant-client judged it.
        loads: whether the app's qdrant-client loads it now (after the repair, if one ran).
        refused: per collection, the keys that qdrant-client refused (before the repair).
        repaired: whether the file was rewritten.
        kept: the old file's new name, when it was rewritten.
        snapshot_id: the snapshot taken first (None: dry run, nothing to do, or --no-snapshot).
        dry_run: nothing was changed.
    """

    path: str
    app: AppInterpreter
    loads: bool
    refused: dict[str, list[str]] = field(default_factory=dict)
    repaired: bool = False
    kept: str | None = None
    snapshot_id: str | None = None
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        """``repair-meta --json`` (docs/reference/json-output.md)."""
        return {
            "command": "repair-meta",
            "dry_run": self.dry_run,
            "path": self.path,
            "app_python": self.app.python,
            "qdrant_client": self.app.qdrant_client,
            "loads": self.loads,
            "refused": self.refused,
            "repaired": self.repaired,
            "kept": self.kept,
            "safety_snapshot": self.snapshot_id,
        }


def repair_meta(
    deployment: Deployment, now: datetime, *, dry_run: bool = False, take_snapshot: bool = True
) -> MetaRepaired:
    """Rewrite ``meta.json`` for the app's qdrant-client when it refuses it; see the module.

    Raises:
        ConfigError: (exit 10) the store is not embedded Qdrant, or the app's interpreter is
            unknown (nothing is touched).
        LockedError: (exit 12) a process holds the store (the app: stop it first).
        UnavailableError: (exit 11) a refused key has a value (named), or the file is unreadable.
    """
    config = deployment.config
    store = deployment.vector_store
    if store.location is None:
        raise ConfigError(
            config.source, ["mem0.vector_store: repair-meta is for embedded Qdrant (a path)"]
        )
    app = interpreter.require(deployment.vector_store, config)
    found = app_process.app_meta(deployment.vector_store, config, app)
    refused = {name: list(c["refused"]) for name, c in found["collections"].items()}
    done = MetaRepaired(path=found["path"], app=app, loads=found["loads"], refused=refused)
    if dry_run or found["loads"]:
        done.dry_run = dry_run
        return done
    stuck = {name: c["problems"] for name, c in found["collections"].items() if not c["repairable"]}
    if stuck:
        raise UnavailableError(
            f"{found['path']} does not load with the app's qdrant-client {app.qdrant_client}, "
            "and not only for unset keys: "
            + "; ".join(f"collection {n}: {', '.join(p)}" for n, p in stuck.items()),
            "restore a snapshot taken before the store was opened by another qdrant-client "
            "(memsync snapshot list), or run the app with the qdrant-client that wrote it",
        )
    mem0.require_store_free(deployment.vector_store, "repairing meta.json")
    if take_snapshot and config.snapshot.directory is not None:
        done.snapshot_id = snapshot.create_snapshot(deployment, now, by="repair-meta").id
    after = app_process.app_meta(deployment.vector_store, config, app, repair=True)
    done.loads, done.repaired, done.kept = after["loads"], after["repaired"], after["kept"]
    logger.info("meta_repaired", path=done.path, kept=done.kept, refused=refused)
    return done
