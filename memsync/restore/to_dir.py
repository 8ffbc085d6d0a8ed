"""``restore --to DIR``: a snapshot's two stores copied into a new directory, for inspection.

The copy gets a memsync config (``DIR/memsync.toml``) and a mem0 dict (``DIR/mem0-config.json``)
pointing at it (``memsync.config.scratch``), so ``memsync --config DIR/memsync.toml check``
or an app's ``Memory.from_config`` can look at it. The live deployment is never touched: no
lock is taken, no file of it is read or written, the app may keep running.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import check, config, repository
from memsync.config.effective import effective_document
from memsync.config.scratch import ScratchLayout, scratch_documents
from memsync.deployment import Deployment
from memsync.errors import UsageError
from memsync.model import CheckReport
from memsync.repository import reading
from memsync.restore import Move, refuse_other_backend, stage
from memsync.snapshot import choose
from memsync.state import fsync_dir, record_restored_to, write_json_atomic

logger = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CopiedTo:
    """What ``restore --to`` made (or, in a dry run, would make).

    Attributes:
        snapshot_id: the snapshot copied. chosen: how ``latest``/``--before`` picked it, or None.
        layout: where the copy's files are (``layout.root`` is DIR, absolute).
        mem0: the copy's mem0 dict as ``memsync config show`` shows it (secrets redacted);
            None in a dry run.
        check: ``check`` of the copy (None in a dry run).
    """

    snapshot_id: str
    dry_run: bool
    layout: ScratchLayout
    chosen: choose.Chosen | None
    mem0: dict[str, Any] | None = None
    check: CheckReport | None = None

    def to_json(self) -> dict[str, Any]:
        """``restore --to DIR --json`` (docs/reference/json-output.md)."""
        layout = self.layout
        return {
            "command": "restore",
            "to": str(layout.root),
            "snapshot_id": self.snapshot_id,
            "chosen": self.chosen.to_json() if self.chosen else None,
            "dry_run": self.dry_run,
            "vector_store": str(layout.vectors),
            "history_db": str(layout.history_db),
            "config": str(layout.config),
            "mem0_config": str(layout.mem0_config),
            "mem0": self.mem0,
            "check_after": self.check.counts() if self.check else None,
        }


def require_new_directory(deployment: Deployment, dest: Path) -> None:
    """Refuse a ``--to`` directory that is not new or empty, or lies in the live deployment.

    Raises:
        UsageError: (exit 2) DIR is a file, a link, a non-empty directory, or inside the live
            vector store, mem0's directory or the snapshot directory (links resolved).
    """
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise UsageError(
            f"--to {dest}: not a directory", "name a new or empty directory for the copy"
        )
    if dest.is_dir() and any(dest.iterdir()):
        raise UsageError(
            f"--to {dest} is not empty: restore --to makes a new copy and never writes over files",
            "name a new or empty directory",
        )
    cfg = deployment.config
    store_dir = deployment.vector_store.location  # None: pgvector (a server, no files)
    live = [*([store_dir] if store_dir else []), cfg.history_db_path.parent, cfg.mem0_dir]
    if cfg.snapshot.directory is not None:
        live.append(cfg.snapshot.directory)
    target = dest.resolve()  # a link on the way (LINK/copy, LINK -> the live mem0 dir) counts
    for place in live:
        if target.is_relative_to(place.resolve()):
            raise UsageError(
                f"--to {dest} is inside {place}, which belongs to the live deployment or its "
                "snapshots",
                "name a directory of its own for the copy",
            )


def run_restore_to(
    deployment: Deployment,
    target: str | None,
    now: datetime,
    dest: Path,
    *,
    dry_run: bool,
    before: datetime | None = None,
) -> CopiedTo:
    """Copy a snapshot's vector store and history.db into ``dest``, with configs pointing there.

    ``target`` and ``before`` name the snapshot as for ``run_restore``. The snapshot is verified
    first; then ``dest/qdrant``, ``dest/mem0/history.db``, ``dest/mem0-config.json`` and
    ``dest/memsync.toml`` (mode 0600) are written, and the copy is checked with its own config.
    A dry run verifies and changes nothing. Never reads or writes the live stores.

    Raises:
        UsageError: (exit 2) a server store (pgvector: its tables are no files to copy), or
            ``dest`` is not new or empty, or lies inside the live deployment.
        UnavailableError: (exit 11) the snapshot is missing, fails verification, or none
            qualifies for ``latest``/``before``.
        ConfigError: (exit 10) it does not fit the configuration.
    """
    cfg = deployment.config
    require_new_directory(deployment, dest)
    target, chosen = choose.resolve(deployment, target, before, no_safety=True)
    layout = ScratchLayout(root=dest.absolute())
    with reading.scratch(cfg, "restore-to") as scratch:  # a killed run's: removed by the next
        directory = choose.materialize(cfg, target, scratch)
        manifest = choose.verify_fit(deployment, directory, now)
        refuse_other_backend(deployment, manifest, old_config=True)
        if deployment.vector_store.staging() is not None:  # a copy would still use the live server
            raise UsageError(
                "restore --to copies a snapshot's files into a directory of their own; on pgvector "
                "the snapshot's tables need a database, and a copy would read the live one",
                "load pgvector/<table>.pgcopy into a scratch database (COPY ... FROM ... WITH "
                "(FORMAT binary), docs/how-to/pgvector.md), or restore ID --dry-run",
            )
        planned = CopiedTo(snapshot_id=manifest.id, dry_run=dry_run, layout=layout, chosen=chosen)
        if dry_run:
            return planned
        plain = repository.plaintext(cfg, directory, manifest, scratch / "plain")
        wal = {entry.path for entry in manifest.files if entry.journal_mode == "wal"}
        listed = [entry.path for entry in manifest.files]
        record_restored_to(cfg.state_dir, layout.root)  # forget --erase lists it
        mem0, report = copy_into(deployment, plain, listed, wal, layout, manifest.id, now)
    logger.info("restore_to_finished", snapshot_id=manifest.id, to=str(layout.root))
    return replace(planned, mem0=mem0, check=report)


def copy_into(
    deployment: Deployment,
    plain: Path,
    listed: list[str],
    wal: set[str],
    layout: ScratchLayout,
    copy_id: str,
    now: datetime,
) -> tuple[dict[str, Any], CheckReport]:
    """Copy ``listed`` (a snapshot's plaintext layout under ``plain``) into ``layout``, check it.

    Writes the copy's configs (``scratch_documents``) and runs ``check`` on the copy as a
    deployment of its own. Returns its mem0 dict as ``config show`` shows it, and the report.
    """
    cfg = deployment.config
    layout.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    layout.mem0_dir.mkdir(exist_ok=True, mode=0o700)
    moves = [
        Move(live=str(path), staged=str(path), aside="")
        for path in (layout.vectors, layout.history_db)
    ]
    stage(plain, moves, listed, deployment.vector_store.capture_dir, wal)
    text, mem0 = scratch_documents(cfg, layout, copy_id)
    write_json_atomic(layout.mem0_config, mem0)
    _write_text(layout.config, text)
    copied = config.load(layout.config, os.environ)
    report = check.run_check(Deployment.open(copied), now)  # the copy: a deployment of its own
    return effective_document(copied)["mem0"], report


def _write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, mode 0600 (the config may name secret files)."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_dir(path.parent)
