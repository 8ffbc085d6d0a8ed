"""``migrate --cleanup``: remove the old store a switched migration kept, once it is due.

After ``migrate --switch`` the app runs on the target and the source store is kept (a way
back) for ``[migrate] keep_source_days`` days from ``switched_at``. The cleanup reads the
journal (``<state_dir>/migrate.json``, phase ``switched``) and the old deployment's config
(``<state_dir>/migrate-source.json``, ``source_record``), refuses what must not be removed,
and removes the old store through the port (``VectorStore.remove_store``: the embedded
directory, or the two pgvector tables). Then the journal's phase is ``cleaned`` and the
source record, which may hold a connection string, is deleted. history.db is never touched:
the target's deployment shares it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from memsync import utc
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ConfigError
from memsync.migrate import journal, source_record
from memsync.state import operation_lock
from memsync.stores.backends import vector_store_for
from memsync.stores.vector_store import VectorStore

logger = structlog.get_logger(__name__)
WHAT = "migrate --cleanup"


@dataclass(frozen=True, slots=True, kw_only=True)
class Cleaned:
    """What the cleanup removed (or, dry, would remove).

    Attributes:
        dry_run: ``--dry-run``: nothing was removed.
        already: the journal was ``cleaned`` already: nothing to do, nothing removed.
        kind: the old store's backend (``embedded-qdrant``, ``pgvector``); "" when ``already``.
        where: the old store (a directory, or a server and table; no secret).
        size_bytes: the bytes the old store takes (took): files, or the tables' total size.
        switched_at: when the app was switched (ISO 8601 UTC, from the journal).
        cleaned_at: when the cleanup removed it (ISO 8601 UTC); None on a dry run.
        backup_kept: where the switch's ``.bak`` of the app's mem0 config now is (renamed
            ``<file>.bak-<switched_at>``, so a later switch can write its own ``.bak``); None
            when there was none.
    """

    dry_run: bool
    already: bool = False
    kind: str = ""
    where: str = ""
    size_bytes: int = 0
    switched_at: str | None = None
    cleaned_at: str | None = None
    backup_kept: str | None = None

    def document(self) -> dict[str, Any]:
        """``migrate --cleanup --json``: ``{"command": "migrate", "cleanup": ...}``."""
        return {"command": "migrate", "cleanup": self.to_json()}

    def to_json(self) -> dict[str, Any]:
        """The ``cleanup`` object of the JSON document (docs/reference/commands/migrate.md)."""
        return {
            "dry_run": self.dry_run,
            "already_cleaned": self.already,
            "kind": self.kind or None,
            "where": self.where or None,
            "size_bytes": self.size_bytes,
            "switched_at": self.switched_at,
            "cleaned_at": self.cleaned_at,
            "app_config_backup": self.backup_kept,
        }


def find_due(switched_at: str, keep_source_days: int) -> datetime:
    """When the old store may be removed: ``switched_at`` + ``keep_source_days`` days. Pure.

    Raises:
        ValueError: ``switched_at`` is not ISO 8601 with an offset.
    """
    return utc.parse(switched_at) + timedelta(days=keep_source_days)


def require_switched(
    document: dict[str, Any] | None, config: Config, now: datetime
) -> tuple[dict[str, Any], str]:
    """Return the journal and its ``switched_at`` when the cleanup is due; else refuse. Pure.

    Raises:
        ConfigError: (exit 10) no journal; a phase other than ``switched`` (or ``cleaned``,
            which callers handle first); no valid ``switched_at``; not due yet (the message
            names the date, UTC, and ``[migrate] keep_source_days``).
    """
    path = journal.path_of(config.state_dir)
    if document is None:
        raise ConfigError(
            str(path),
            ["no migration is recorded: there is no old store to clean up"],
            "memsync migrate --to NEW.toml copies the deployment, --switch moves the app",
        )
    phase = document.get("phase", "copy")
    if phase != "switched":
        raise ConfigError(
            str(path),
            [f"the migration to {document['to']} is in phase {phase}, not switched"],
            f"run memsync migrate --to {document['to']} --switch first; the old store is "
            "removed only after the app runs on the new one",
        )
    switched_at = str(document.get("switched_at", ""))
    try:
        due = find_due(switched_at, config.migrate.keep_source_days)
    except ValueError:
        raise ConfigError(
            str(path), [f"switched_at is {switched_at!r}, not an ISO 8601 UTC time"]
        ) from None
    if now < due:
        raise ConfigError(
            str(path),
            [
                f"the old store is kept until {utc.iso(due)} ([migrate] keep_source_days = "
                f"{config.migrate.keep_source_days} after the switch at {switched_at})"
            ],
            f"run memsync migrate --cleanup again after {utc.iso(due)}, or lower "
            "[migrate] keep_source_days in the config",
        )
    return document, switched_at


def find_old_store(deployment: Deployment, environ: Mapping[str, str]) -> VectorStore:
    """The old deployment's vector store, from ``migrate-source.json``. Reads only.

    Raises:
        ConfigError: (exit 10) the record is missing or damaged, or it names the current
            config's live store (nothing of the app's may be removed).
    """
    config = deployment.config
    old = source_record.load_source(config.state_dir, environ)
    record = source_record.path_of(config.state_dir)
    if old is None:
        raise ConfigError(
            str(record),
            ["the old deployment's config is not recorded (written by migrate --switch)"],
            "remove the old store by hand (the journal's source names it), then move "
            f"{journal.path_of(config.state_dir)} aside",
        )
    store, live = vector_store_for(old), deployment.vector_store
    same_directory = (
        store.location is not None
        and live.location is not None
        and store.location.resolve() == live.location.resolve()
    )
    if same_directory or (store.kind == live.kind and store.where == live.where):
        raise ConfigError(
            str(record),
            [f"the old store {store.where} is the live store of {config.source}"],
            "the app runs on it: nothing is removed; check which config the app and "
            "memsync use (memsync config show)",
        )
    return store


def run_cleanup(
    deployment: Deployment,
    environ: Mapping[str, str],
    now: datetime,
    *,
    dry_run: bool,
    confirm: Callable[[VectorStore, int], None],
) -> Cleaned:
    """Remove the old store of a switched migration (see the module). Idempotent.

    Args:
        deployment: the current deployment (the app's new store).
        environ: the environment, for the source record's secrets.
        now: the current time (aware UTC).
        dry_run: measure and report only; nothing is written.
        confirm: called with the old store and its size in bytes before anything is removed
            (the CLI's confirmation; it raises to refuse).

    Raises:
        ConfigError: (exit 10) see ``require_switched`` and ``find_old_store``; the directory
            holds files qdrant-client never writes (``VectorStore.remove_store``).
        LockedError: (exit 12) a process holds the old store (the app is still on it), or
            another memsync operation runs.
        UnavailableError: (exit 11) the journal is damaged, or the store cannot be removed.
    """
    config = deployment.config
    document = journal.load(config.state_dir)
    if document is not None and document.get("phase") == "cleaned":
        return Cleaned(dry_run=dry_run, already=True, cleaned_at=document.get("cleaned_at"))
    document, switched_at = require_switched(document, config, now)
    store = find_old_store(deployment, environ)
    store.require_free(WHAT)
    size = store.remove_store(dry_run=True)
    found = Cleaned(dry_run=dry_run, kind=store.kind, where=store.where, size_bytes=size,
                    switched_at=switched_at)  # fmt: skip
    if dry_run:
        return found
    confirm(store, size)
    with operation_lock(config.state_dir, "migrate"):
        store.require_free(WHAT)  # again: the app may have been started on it meanwhile
        removed = store.remove_store()
        cleaned_at = utc.iso(now)
        kept = _keep_backup(document.get("app_config_backup"), switched_at)
        document.update(phase="cleaned", cleaned_at=cleaned_at)
        if kept is not None:
            document["app_config_backup"] = kept
        journal.save(config.state_dir, document)
        source_record.path_of(config.state_dir).unlink(missing_ok=True)
    logger.info("migrate_cleaned", where=store.where, size_bytes=removed, backup=kept)
    return Cleaned(dry_run=False, kind=store.kind, where=store.where, size_bytes=removed,
                   switched_at=switched_at, cleaned_at=cleaned_at, backup_kept=kept)  # fmt: skip


def _keep_backup(backup: Any, switched_at: str) -> str | None:
    """Rename the switch's ``<file>.bak`` to ``<file>.bak-<switched_at>``; its new path.

    The old config it holds names the store just removed; kept (it reads old snapshots), but
    out of the way of the next switch's ``.bak``. None when there is none. Atomic (rename).
    """
    if not isinstance(backup, str) or not Path(backup).is_file():
        return None
    stamp = utc.parse(switched_at).strftime("%Y%m%dT%H%M%SZ")
    kept = Path(backup).with_name(f"{Path(backup).name}-{stamp}")
    os.replace(backup, kept)
    return str(kept)
