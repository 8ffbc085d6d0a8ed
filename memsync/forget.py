"""``forget`` and ``prune``: deletes that always go through mem0, then are proven.

``select_targets`` and ``select_expired`` are pure. ``run_forget`` and ``run_prune`` delete
through ``Mem0Writer`` (entity store initialised first, so entity links go too), re-read the
stores and require every target gone with its DELETE recorded and no entity link left.
``--erase`` (``erase_texts``) then removes the memory's text from every place memsync controls.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import structlog
from packaging.version import InvalidVersion, Version

from memsync import check, snapshot
from memsync import erase as erasure
from memsync.config import Config
from memsync.errors import ConfigError, ExitCode, TryLaterError
from memsync.model import HistoryEvent, Inventory, is_expired
from memsync.state import write_json_atomic
from memsync.stores import mem0, versions
from memsync.stores.intent import FORGET_JOURNAL, load_forgetting
from memsync.stores.vector_store import refuse_legacy_store, vector_store_for

logger = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Targets:
    """What a forget will delete: memory ids with a point, ids only history knows, unknown ids."""

    with_point: tuple[str, ...]
    history_only: tuple[str, ...]
    not_found: tuple[str, ...]
    already_deleted: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        """Every memory id that will be deleted."""
        return self.with_point + self.history_only


@dataclass(frozen=True, slots=True, kw_only=True)
class Forgotten:
    """What a forget or prune did, and what the re-read proved."""

    targets: Targets
    dry_run: bool
    deleted: tuple[str, ...] = ()
    recorded: tuple[str, ...] = ()
    unproven: tuple[str, ...] = ()
    snapshot_id: str | None = None
    erased: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> ExitCode:
        """3 when an id was not found (0 in a dry run), 4 when a delete could not be proven, else 0."""
        if self.targets.not_found and not self.dry_run:
            return ExitCode.PROBLEMS_FOUND
        return ExitCode.PARTIAL if self.unproven else ExitCode.OK


def select_targets(
    inventory: Inventory,
    memory_ids: Sequence[str] = (),
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
) -> Targets:
    """Resolve ids or a scope to memory ids, sorted. Pure.

    A scope matches points whose payload carries all the given ids. An id with a point is
    deleted through mem0; an id whose history is live but has no point is closed with a
    DELETE event; an id history ends with DELETE is already deleted; any other id is unknown.
    """
    with_point: list[str] = []
    history_only: list[str] = []
    not_found: list[str] = []
    already: list[str] = []
    if memory_ids:
        for memory_id in dict.fromkeys(memory_ids):
            if memory_id in inventory.points:
                with_point.append(memory_id)
            elif memory_id in inventory.history:
                last = inventory.history[memory_id].last
                (already if last.event == "DELETE" else history_only).append(memory_id)
            else:
                not_found.append(memory_id)
    else:
        scope = {
            k: v for k, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)) if v
        }
        with_point = [
            point.id
            for point in inventory.points.values()
            if scope and all(point.payload.get(k) == v for k, v in scope.items())
        ]
    return Targets(
        with_point=tuple(sorted(with_point)),
        history_only=tuple(sorted(history_only)),
        not_found=tuple(sorted(not_found)),
        already_deleted=tuple(sorted(already)),
    )


def select_expired(inventory: Inventory, today: date) -> Targets:
    """The memories whose ``expiration_date`` is before ``today`` (UTC), sorted. Pure."""
    expired = [point.id for point in inventory.points.values() if is_expired(point, today)]
    return Targets(with_point=tuple(sorted(expired)), history_only=(), not_found=())


def refuse_bad_mem0(version: str | None, bulk: bool) -> None:
    """Raise ConfigError (exit 10) when the installed mem0ai has a known delete bug. Pure."""
    if version is None:
        raise ConfigError("environment", ["mem0ai is not installed: deletes go through mem0's API"])
    try:
        parsed = Version(version)
    except InvalidVersion:
        return
    for row in versions.known_bad_mem0(str(parsed)):
        if bulk and row.refuses_bulk_delete:
            raise ConfigError(
                "environment", [f"mem0ai {version}: {row.problem}; upgrade mem0ai first"]
            )


def delete_through_mem0(
    config: Config,
    targets: Targets,
    now: datetime,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[str], list[str]]:
    """Delete every target through mem0, entity store first; close history-only ones.

    History-only targets are closed with a DELETE row by ``memsync``. Returns (deleted through
    mem0, recorded directly). Holds the store meanwhile.

    Raises:
        sqlite3.OperationalError: mem0's own history write found history.db locked.
        TryLaterError, UnavailableError: a DELETE row cannot be recorded.
    """
    deleted: list[str] = []
    recorded: list[str] = []
    with mem0.open_memory(config) as writer:
        writer.touch_entity_store()
        for index, memory_id in enumerate(targets.with_point):
            writer.delete(memory_id)
            deleted.append(memory_id)
            if progress is not None and (index + 1) % 50 == 0:
                progress(index + 1, len(targets.all))
        unlink_entities(config, writer, set(targets.all))
        if targets.history_only:
            writer.record_events(
                [
                    HistoryEvent(
                        0,
                        f"memsync-{uuid.uuid4()}",
                        memory_id,
                        None,
                        None,
                        "DELETE",
                        now.isoformat(),
                        now.isoformat(),
                        1,
                        "memsync",
                        None,
                    )
                    for memory_id in targets.history_only
                ]
            )
            recorded = list(targets.history_only)
    if progress is not None:
        progress(len(targets.all), len(targets.all))
    return deleted, recorded


def unlink_entities(config: Config, writer: mem0.Mem0Writer, gone: set[str]) -> int:
    """Drop links to ``gone`` memories that mem0's own cleanup left; delete entities left bare.

    mem0ai 2.2.1's cleanup filters by the memory's scope and scans 10,000 entity rows.
    Reads the live entity links through the vector-store port (the store is held), writes
    through ``Mem0Writer.relink_entity`` (a documented direct write). Returns the entities changed.
    """
    if not gone:
        return 0
    changed = 0
    for entity in vector_store_for(config).read_live_entities():
        if not gone & set(entity.linked_memory_ids):
            continue
        writer.relink_entity(
            entity.entity_id, [m for m in entity.linked_memory_ids if m not in gone]
        )
        changed += 1
    return changed


def prove_gone(inventory: Inventory, memory_ids: Iterable[str]) -> list[str]:
    """The ids that are not gone: a point left, last event not DELETE, or an entity link. Pure."""
    linked = {m for entity in inventory.entities for m in entity.linked_memory_ids}
    unproven = []
    for memory_id in memory_ids:
        last = inventory.history.get(memory_id)
        if (
            memory_id in inventory.points
            or last is None
            or last.last.event != "DELETE"
            or memory_id in linked
        ):
            unproven.append(memory_id)
    return sorted(unproven)


def reread(config: Config, now: datetime) -> Inventory:
    """Capture and read the stores again (no settle: our own writes are done)."""
    return check.settled_inventory(config, now, settle=False)[0]


def run_forget(
    config: Config,
    now: datetime,
    *,
    memory_ids: Sequence[str],
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    dry_run: bool,
    take_snapshot: bool,
    erase: bool,
    progress: Callable[[int, int], None] | None = None,
) -> Forgotten:
    """Delete memories through mem0 and prove it; with ``erase``, remove their text everywhere.

    Nothing is touched when an id is unknown (exit 3) or in a dry run.

    Raises:
        LockedError: the app holds the embedded store (exit 12).
        ConfigError: the installed mem0ai has a known delete bug, or mem0 cannot be built.
        UnavailableError: the vector store keeps a legacy point store (exit 11).
    """
    if not dry_run:
        mem0.require_store_free(config, "forget")
        mem0.prepare_for_writing(config)
    before = check.settled_inventory(config, now)[0]
    if not dry_run:  # the legacy store's points would be neither deleted nor erased
        refuse_legacy_store(before.legacy_stores, "forget")
    targets = select_targets(before, memory_ids, user_id, agent_id, run_id)
    to_erase = (*targets.all, *targets.already_deleted) if erase else ()
    if targets.not_found or dry_run or not (targets.all or to_erase):
        return Forgotten(targets=targets, dry_run=dry_run)
    refuse_bad_mem0(versions.installed_version("mem0ai"), bulk=not memory_ids)
    mem0.require_store_free(config, "forget")
    snapshot_id = None
    if take_snapshot and not erase and targets.all:
        snapshot_id = snapshot.create_snapshot(config, now).id
    deleted, recorded = _delete_journaled(config, targets, now, progress)
    scope = {
        k: v for k, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)) if v
    }
    erased = erasure.erase_texts(config, before, to_erase, now, scope) if erase else {}
    after = reread(config, now)
    unproven = prove_gone(after, targets.all)
    if not unproven:
        clear_intent(config)
    logger.info(
        "forget_finished", deleted=len(deleted), recorded=len(recorded), unproven=len(unproven)
    )
    return Forgotten(
        targets=targets,
        dry_run=False,
        deleted=tuple(deleted),
        recorded=tuple(recorded),
        unproven=tuple(unproven),
        snapshot_id=snapshot_id,
        erased=erased,
    )


def _erase_texts(
    config: Config,
    before: Inventory,
    memory_ids: Sequence[str],
    now: datetime,
    scope: dict[str, str],
) -> dict[str, Any]:
    """``erase.erase_texts`` (imported here only: erasure is the rarer path)."""
    from memsync import erase as erasure

    return erasure.erase_texts(config, before, memory_ids, now, scope)


def _delete_journaled(
    config: Config, targets: Targets, now: datetime, progress: Callable[[int, int], None] | None
) -> tuple[list[str], list[str]]:
    """Journal the targets, then delete them through mem0: ``(deleted, recorded)`` memory ids.

    Raises:
        TryLaterError: history.db was busy; the journal lets the next forget or reconcile close
            what was deleted without its DELETE event.
    """
    if not targets.all:
        return [], []
    save_intent(config, targets.all)
    try:
        return delete_through_mem0(config, targets, now, progress)
    except sqlite3.OperationalError as error:
        raise TryLaterError(
            f"history.db {config.history_db_path} is busy ({error}): some deletes may lack their "
            "DELETE event",
            "run the same forget again (or memsync reconcile): the targets are journaled and will "
            "be closed",
        ) from error


INTENT = FORGET_JOURNAL


def save_intent(config: Config, memory_ids: Sequence[str]) -> None:
    """Journal the memories being forgotten before touching them.

    If memsync dies between mem0's point delete and its DELETE row, the memory looks like a
    ``missing-point``; reconcile reads this journal and closes it instead of restoring it.
    """
    path = config.state_dir / INTENT
    existing = load_intent(config)
    write_json_atomic(path, {"memory_ids": sorted(set(existing) | set(memory_ids))})


def load_intent(config: Config) -> list[str]:
    """The memory ids of a forget that did not finish (empty when none). Reads only."""
    return load_forgetting(config.state_dir)


def clear_intent(config: Config) -> None:
    """Forget is proven: drop its journal."""
    (config.state_dir / INTENT).unlink(missing_ok=True)


def run_prune(
    config: Config,
    now: datetime,
    *,
    dry_run: bool,
    progress: Callable[[int, int], None] | None = None,
) -> Forgotten:
    """Delete through mem0 every memory whose expiration_date has passed; prove it. Idempotent.

    Raises:
        LockedError: the app holds the embedded store (exit 12).
        UnavailableError: the vector store keeps a legacy point store (exit 11).
    """
    if not dry_run:
        mem0.require_store_free(config, "prune")
        mem0.prepare_for_writing(config)
    before = check.settled_inventory(config, now)[0]
    if not dry_run:
        refuse_legacy_store(before.legacy_stores, "prune")
    targets = select_expired(before, now.date())
    if dry_run or not targets.all:
        return Forgotten(targets=targets, dry_run=dry_run)
    mem0.require_store_free(config, "prune")
    save_intent(config, targets.all)
    try:
        deleted, _ = delete_through_mem0(config, targets, now, progress)
    except sqlite3.OperationalError as error:
        raise TryLaterError(
            f"history.db {config.history_db_path} is busy ({error})",
            "run prune again: the targets are journaled and will be closed",
        ) from error
    unproven = prove_gone(reread(config, now), targets.all)
    if not unproven:
        clear_intent(config)
    logger.info("prune_finished", deleted=len(deleted), unproven=len(unproven))
    return Forgotten(
        targets=targets, dry_run=False, deleted=tuple(deleted), unproven=tuple(unproven)
    )
