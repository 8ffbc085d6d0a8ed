"""Apply a forget, erase or prune on a route, or queue it; then erase and prove."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import structlog

from memsync import check, routes, snapshot
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.erase import apply as erasure
from memsync.erase import replicas
from memsync.errors import TryLaterError
from memsync.forget.select import Ask, Forgotten, Targets, prove_gone, refuse_bad_mem0
from memsync.model import CheckReport, HistoryEvent, Inventory
from memsync.routes import queue as pending
from memsync.state import write_json_atomic
from memsync.stores import mem0
from memsync.stores.agent_client import AgentWriter, not_held_reason, writes_held
from memsync.stores.intent import ERASE_JOURNAL, FORGET_JOURNAL, load_erasing, load_forgetting
from memsync.stores.vector_store import refuse_legacy_store
from memsync.stores.writer import Writer

logger = structlog.get_logger(__name__)


def delete_through(
    deployment: Deployment,
    writer: Writer,
    targets: Targets,
    now: datetime,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[str], list[str]]:
    """Delete every target through the route's writer, entity store first; close history-only ones.

    History-only targets are closed with a DELETE row by ``memsync``. Returns (deleted through
    mem0, recorded directly).

    Raises:
        sqlite3.OperationalError: mem0's own history write found history.db locked.
        TryLaterError, UnavailableError: a DELETE row cannot be recorded.
    """
    deleted: list[str] = []
    recorded: list[str] = []
    writer.touch_entity_store()
    for index, memory_id in enumerate(targets.with_point):
        writer.delete(memory_id)
        deleted.append(memory_id)
        if progress is not None and (index + 1) % 50 == 0:
            progress(index + 1, len(targets.all))
    unlink_entities(deployment, writer, set(targets.all))
    if targets.history_only:
        stamp = now.isoformat()
        writer.record_events(
            [
                HistoryEvent(
                    0,
                    f"memsync-{uuid.uuid4()}",
                    memory_id,
                    None,
                    None,
                    "DELETE",
                    stamp,
                    stamp,
                    1,
                    "memsync",
                    None,
                )  # fmt: skip
                for memory_id in targets.history_only
            ]
        )
        recorded = list(targets.history_only)
    if progress is not None:
        progress(len(targets.all), len(targets.all))
    return deleted, recorded


def unlink_entities(deployment: Deployment, writer: Writer, gone: set[str]) -> int:
    """Drop links to ``gone`` memories that mem0's own cleanup left; delete entities left bare.

    mem0ai 2.2.1's cleanup filters by the memory's scope and scans 10,000 entity rows.
    Reads the live entity links through the vector-store port (the store is held), writes
    through the writer's ``relink_entity`` (a documented direct write). Returns the entities changed.
    """
    if not gone:
        return 0
    changed = 0
    for entity in deployment.vector_store.read_live_entities():
        if not gone & set(entity.linked_memory_ids):
            continue
        writer.relink_entity(
            entity.entity_id, [m for m in entity.linked_memory_ids if m not in gone]
        )
        changed += 1
    return changed


def reread(
    deployment: Deployment, now: datetime, memory_ids: Iterable[str] | None = None
) -> Inventory:
    """Capture and read the stores again (no settle: our own writes are done).

    With ``memory_ids``, only their points and history are held (``check.settled_named``).
    """
    if memory_ids is None:
        return check.settled_inventory(deployment, now, settle=False)[0]
    return check.settled_named(deployment, now, _never, also=memory_ids, settle=False)[0]


def selecting(deployment: Deployment, now: datetime, ask: Ask | None) -> Inventory:
    """Capture and read what ``ask`` selects from: its ids' and its scope's memories only.

    A forget needs no other memory (``Ask.select``, ``prove_gone``), so the rest of the store
    is not held (``check.settled_named``); an erasure (every other memory's scope and text
    counts), a prune, a queued batch (``ask`` None) and a run that finds an erasure unfinished
    read the whole inventory.
    """
    if ask is None or ask.kind != "forget" or load_erasing(deployment.state) is not None:
        return check.settled_inventory(deployment, now)[0]
    scope = ask.scope
    keep = (
        (lambda point: all(point.payload.get(k) == v for k, v in scope.items())) if scope else None
    )
    return check.settled_named(deployment, now, _never, also=ask.memory_ids, keep_point=keep)[0]


def _never(report: CheckReport) -> bool:
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Deleted:
    """The deletes done on a route: the inventory they were selected from, and what went."""

    before: Inventory
    targets: Targets
    deleted: tuple[str, ...] = ()
    recorded: tuple[str, ...] = ()
    snapshot_id: str | None = None
    erased: dict[str, Any] | None = None  # set when the erasure ran inside a window
    held: replicas.Renewal | None = None  # [protect]: Litestream held since that erasure
    past: Past | None = None  # what records said of a scope erasure's memories


def run_forget(
    deployment: Deployment,
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
    """Delete memories through a route and prove it; with ``erase``, remove their text everywhere.

    See ``run_ask``. Raises as ``run_ask``.
    """
    ask = Ask(
        kind="erase" if erase else "forget", memory_ids=tuple(memory_ids), user_id=user_id,
        agent_id=agent_id, run_id=run_id,
    )  # fmt: skip
    return run_ask(
        deployment, now, ask, dry_run=dry_run, take_snapshot=take_snapshot, progress=progress
    )


def run_expiry_prune(
    deployment: Deployment,
    now: datetime,
    *,
    dry_run: bool,
    progress: Callable[[int, int], None] | None = None,
) -> Forgotten:
    """Delete every memory whose expiration_date has passed, through a route; prove it. Idempotent.

    See ``run_ask``. Raises as ``run_ask``.
    """
    return run_ask(deployment, now, Ask(kind="prune"), dry_run=dry_run, progress=progress)


def run_ask(
    deployment: Deployment,
    now: datetime,
    ask: Ask,
    *,
    dry_run: bool,
    take_snapshot: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Forgotten:
    """Apply a forget, erase or prune now, or queue it when no route can write.

    Looks first without a route: an unknown id (exit 3), nothing to do, or a dry run (which
    names the route it would take) returns there and touches nothing. Otherwise it opens a
    route (``memsync.routes.open_writer``; the safety snapshot of a forget with
    ``take_snapshot`` is taken just before, as a live capture), selects again from a fresh
    capture (what the app wrote meanwhile counts), deletes, and closes the route; then erases (no route needed) and proves every
    target gone from a new capture. With no route it records the request in the queue
    (``memsync.routes.queue``) and returns it with route ``"queued"`` (exit 5).

    Raises:
        ConfigError: the installed mem0ai has a known delete bug, or mem0 cannot be built.
        UnavailableError: the vector store keeps a legacy point store (exit 11).
        LockedError, WindowOverrunError, TryLaterError: as ``routes.open_writer``.
    """
    config = deployment.config
    before = look(deployment, now, ask.kind, writing=not dry_run, ask=ask)
    past = Past.of(deployment, ask)
    targets = ask.select(before, now.date(), past.found)
    if targets.not_found or dry_run or not ask.has_work(targets):
        return without_deletes(deployment, ask, targets, now, dry_run=dry_run)
    snapshot_id = None
    deployment.require_interpreter()  # refused before the safety snapshot, not after it
    if take_snapshot and ask.kind == "forget" and targets.all and deployment.would_take():
        deployment.require_writable()  # what the writer's start would refuse: no snapshot
        snapshot_id = snapshot.create_snapshot(deployment, now, by=ask.kind).id  # live: no route
    taken = routes.Taken()
    try:
        with deployment.open_writer(ask.kind, taken) as writer:
            # direct: nobody wrote since the look; prune: expired memories the app adds meanwhile
            # wait for the next prune, so no second capture stalls a rollback-mode writer
            known = before if writer.route == "direct" or ask.kind == "prune" else None
            done = delete_with(
                deployment, writer, now, ask, known=known, progress=progress, past=past
            )
    except routes.NoRouteError as no_route:
        request = queue(config, ask, now, no_route.message)
        return Forgotten(targets=targets, dry_run=False, route="queued", pending_id=request.id)
    return finish(deployment, now, ask, replace(done, snapshot_id=snapshot_id), taken)


@dataclass(frozen=True, slots=True, kw_only=True)
class Past:
    """What records say of a scope erasure's memories (``erase.scope_past``).

    ``found``: the scope's ids with where each was found (a snapshot, the erasure ledger);
    ``known``: every id a record ties to any scope, None when this is no scope erasure.
    """

    found: dict[str, str] = field(default_factory=dict)
    known: frozenset[str] | None = None

    @classmethod
    def of(cls, deployment: Deployment, ask: Ask) -> Past:
        """Read the records for ``ask`` when it erases a scope, else nothing.

        Raises:
            UnavailableError: the erasure ledger is unreadable.
        """
        if not (ask.erase and ask.scope):
            return cls()
        found, known = erasure.scope_past(deployment, ask.scope)
        return cls(found=found, known=frozenset(known))

    def earlier(self, targets: Targets) -> list[dict[str, str]]:
        """``[{memory_id, found_in}]`` of the targets only the records tied to the scope."""
        ids = sorted({*targets.history_only, *targets.already_deleted} & set(self.found))
        return [{"memory_id": m, "found_in": self.found[m]} for m in ids]


def without_deletes(
    deployment: Deployment, ask: Ask, targets: Targets, now: datetime, *, dry_run: bool
) -> Forgotten:
    """A forget that deletes nothing now: an unknown id, a dry run, or nothing live to delete.

    A dry run names the route it would take. A scope erasure with no live memory still purges
    the scope's memories from the copies a restore moved aside (``erase_copies_only``: a
    restore rolled every one of them back) and, with ``[protect]``, renews the replicas, whose
    older generations hold the text too; ``forget`` and ``pending apply`` both come here.
    """
    work = dry_run and ask.has_work(targets)
    route = (deployment.would_take() or "queued") if work else None
    plan = replicas.plan(deployment) if work and ask.erase else None
    empty = ask.scope if ask.scope and not targets.all and not targets.already_deleted else None
    copies = None
    if empty and ask.erase:  # a restore rolled back every memory of it: only in its copies
        copies = erasure.erase_copies_only(deployment, empty, now, dry_run=dry_run)
    if copies and dry_run:
        plan = replicas.plan(deployment)
    elif copies:  # [protect]: generations from before the restore hold the text too
        with replicas.renewal(deployment) as renewal:
            plan = renewal.renew([]) if renewal is not None else None
    return Forgotten(
        targets=targets, dry_run=dry_run, route=route, replicas=plan,
        empty_scope=None if copies else empty, erased=copies or {},
    )  # fmt: skip


def look(
    deployment: Deployment, now: datetime, what: str, *, writing: bool, ask: Ask | None = None
) -> Inventory:
    """Capture and read the stores (no route); a writer first rolls back hot journals if free.

    A writer also closes a window a killed memsync left open (``routes.recover_window``), so
    even a command with nothing to do starts the app again.

    Raises:
        UnavailableError: (when ``writing``) the vector store keeps a legacy point store, or
            the left window's start_command failed.
    """
    config = deployment.config
    if writing:
        routes.recover_window(config)  # a window a killed memsync left open: start the app
    if writing and routes.store_free(deployment.vector_store):
        # hot journals rolled back before the capture
        mem0.prepare_for_writing(deployment.vector_store, config)
    before = selecting(deployment, now, ask)
    if writing:  # the legacy store's points would be neither deleted nor erased
        refuse_legacy_store(before.legacy_stores, what)
        finish_erasure(deployment, now, before)
    return before


def finish_erasure(
    deployment: Deployment, now: datetime, before: Inventory
) -> dict[str, object] | None:
    """Erase the texts an erasure killed after its deletes left (``erase-journal.json``).

    With ``[protect]`` the replicas are renewed too (``erase.replicas``: ``replicas`` in the
    result). Returns what ``erase.erase_texts`` did, or None when no erasure was unfinished.
    Idempotent: the journal goes only once the texts are erased and verified gone from the store files
    (``erase.unverified``: a transaction pinning a ``-wal`` file keeps it for the next write).

    Raises:
        TryLaterError, UnavailableError: as ``erase.erase_texts``.
    """
    config = deployment.config
    unfinished = load_erasing(config.state_dir)
    if unfinished is None:
        return None
    memory_ids, scope = unfinished
    with replicas.renewal(deployment) as renewal:  # [protect]: as finish does
        erased = erasure.erase_texts(deployment, before, memory_ids, now, scope or None)
        unverified = erasure.unverified(erased)
        if renewal is not None:
            erased["replicas"] = renewal.renew(unverified)
    if not unverified:
        (config.state_dir / ERASE_JOURNAL).unlink(missing_ok=True)
    logger.warning(
        "erasure_finished_late", memories=len(memory_ids),
        history_rows_blanked=erased.get("history_rows_blanked"), unverified=unverified,
        replicas_problem=(erased.get("replicas") or {}).get("problem"),
    )  # fmt: skip
    return erased


def delete_with(
    deployment: Deployment,
    writer: Writer,
    now: datetime,
    ask: Ask,
    *,
    known: Inventory | None = None,
    progress: Callable[[int, int], None] | None = None,
    past: Past | None = None,
) -> Deleted:
    """On an open route: select from a fresh capture (or ``known``), journal, delete.

    Nothing is deleted when an id is unknown now. The app's mem0ai release (its ``Memory`` does
    the deletes, in the app or the one-shot writer: ``hello``) is checked against the
    known-bad table first.

    Raises:
        ConfigError: the app's mem0ai has a known delete bug.
        TryLaterError: as ``_delete_journaled``.
    """
    config = deployment.config
    app_mem0 = writer.client.hello.get("mem0") if isinstance(writer, AgentWriter) else None
    if ask.kind != "prune" and isinstance(app_mem0, str):  # the app's mem0ai does the deletes
        refuse_bad_mem0(app_mem0, bulk=not ask.memory_ids)
    before = known if known is not None else selecting(deployment, now, ask)
    refuse_legacy_store(before.legacy_stores, ask.kind)
    past = past if past is not None else Past.of(deployment, ask)
    targets = ask.select(before, now.date(), past.found)
    if targets.not_found or not ask.has_work(targets):
        return Deleted(before=before, targets=targets, past=past)
    if ask.erase:  # a kill after the deletes must not leave the texts: the next write erases
        ids = sorted({*targets.all, *targets.already_deleted})
        write_json_atomic(
            config.state_dir / ERASE_JOURNAL, {"memory_ids": ids, "scope": dict(ask.scope or {})}
        )
    deleted, recorded = _delete_journaled(deployment, writer, targets, now, progress)
    erased = None
    held = None
    if ask.erase and writer.route == "window":  # the app is stopped: rewrite the files now
        everything = [*targets.all, *targets.already_deleted]
        held = replicas.hold(deployment)  # [protect]: renewed by finish, after the window
        try:
            erased = erasure.erase_texts(
                deployment, before, everything, now, ask.scope, known=past.known
            )
        except BaseException:
            if held is not None:
                held.close()
            raise
    return Deleted(
        before=before, targets=targets, deleted=tuple(deleted), recorded=tuple(recorded),
        erased=erased, past=past, held=held,
    )  # fmt: skip


def finish(
    deployment: Deployment, now: datetime, ask: Ask, done: Deleted, taken: routes.Taken
) -> Forgotten:
    """After the route closed: erase (unless the window did), list copies, prove.

    The copies still holding the text come from ``erase.copies_left``; the proof from a new
    capture.

    History and file rewrites need no route; on a window they run inside it (the app is
    stopped: a long ``VACUUM`` blocks nobody), through the agent with the app's writes held.

    Raises:
        TryLaterError, UnavailableError: a store is busy or unreadable.
    """
    config = deployment.config
    targets = done.targets
    if targets.not_found:
        return Forgotten(
            targets=targets, dry_run=False, route=taken.route, downtime_s=taken.downtime_s
        )
    to_erase = (*targets.all, *targets.already_deleted) if ask.erase else ()
    erased: dict[str, Any] = done.erased or {}
    renewed = None
    # [protect]: Litestream stopped (its read transaction would keep the -wal files), then a
    # new generation of each replica and the older ones (holding the text) removed
    with replicas.renewal(deployment, done.held) if to_erase else nullcontext(None) as renewal:
        if to_erase and (done.erased is None or (renewal and erasure.unverified(erased))):
            erased = _erase(deployment, now, ask, done, taken, to_erase)
        if renewal is not None:
            renewed = renewal.renew(erasure.unverified(erased))
    if not erasure.unverified(erased):  # else the next write erases again (finish_erasure)
        (config.state_dir / ERASE_JOURNAL).unlink(missing_ok=True)
    if to_erase:  # after the route closed: snapshots and the bucket are read
        erased = {**erased, **erasure.copies_left(deployment, to_erase, ask.scope)}
        if done.past is not None and done.past.known is not None:
            erased["deleted_earlier"] = done.past.earlier(targets)
    unproven = prove_gone(reread(deployment, now, targets.all), targets.all)
    if not unproven:
        clear_intent(config)
    logger.info(
        "prune_finished" if ask.kind == "prune" else "forget_finished",
        deleted=len(done.deleted), recorded=len(done.recorded), unproven=len(unproven),
        route=taken.route, downtime_s=taken.downtime_s,
    )  # fmt: skip
    return Forgotten(
        targets=targets, dry_run=False, deleted=done.deleted, recorded=done.recorded,
        unproven=tuple(unproven), snapshot_id=done.snapshot_id, erased=erased,
        route=taken.route, downtime_s=taken.downtime_s, replicas=renewed,
    )  # fmt: skip


def _erase(
    deployment: Deployment,
    now: datetime,
    ask: Ask,
    done: Deleted,
    taken: routes.Taken,
    to_erase: Sequence[str],
) -> dict[str, Any]:
    """``erase.erase_texts`` after the route closed; through the agent, the app's writes held."""
    # VACUUM takes SQLite's exclusive lock for the whole rewrite, longer than mem0 waits
    # (5 s) on a large store: through the agent, app writes wait in its gate instead
    holding = (
        writes_held(deployment.vector_store, deployment.config)
        if taken.route == "agent"
        else nullcontext(None)
    )
    with holding as pause:  # the agent checkpoints the WAL files with no app call in flight
        erased = erasure.erase_texts(
            deployment, done.before, to_erase, now, ask.scope,
            checkpoint=None if pause is None else pause.get("checkpoint"),
            known=done.past.known if done.past else None,
        )  # fmt: skip
    if pause is not None:
        logger.info(
            "erasure_quiesced", held_s=pause.get("held_s"),
            lease_ran_out=pause.get("lease_ran_out"), covered=pause.get("covered"),
        )  # fmt: skip
        if pause.get("uncovered"):  # their writes may have met `database is locked`
            logger.warning("erasure_not_held", reason=not_held_reason(pause))
    return erased


def queue(config: Config, ask: Ask, now: datetime, reason: str) -> pending.PendingRequest:
    """Record ``ask`` in the queue, unless the same selection waits there already; return it.

    Raises:
        UnavailableError: the queue file is unreadable; TryLaterError: it cannot be written.
    """
    request = ask.request(now)
    waiting = [r for r in pending.load(config.state_dir) if Ask.of(r) == ask]
    if waiting:
        request = waiting[0]
    else:
        pending.add(config.state_dir, request)
    logger.info(
        "request_queued", pending_id=request.id, kind=ask.kind, requested_at=request.requested_at,
        reason=reason, queued_before=bool(waiting),
    )  # fmt: skip
    return request


def _delete_journaled(
    deployment: Deployment,
    writer: Writer,
    targets: Targets,
    now: datetime,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[str], list[str]]:
    """Journal the targets, then delete them through the writer: ``(deleted, recorded)`` memory ids.

    Raises:
        TryLaterError: history.db was busy; the journal lets the next forget or reconcile close
            what was deleted without its DELETE event.
    """
    config = deployment.config
    if not targets.all:
        return [], []
    save_intent(config, targets.all)
    try:
        return delete_through(deployment, writer, targets, now, progress)
    except sqlite3.OperationalError as error:
        raise TryLaterError(
            f"history.db {config.history_db_path} is busy ({error}): some deletes may lack their "
            "DELETE event",
            "run the same command again (or memsync reconcile): the targets are journaled and "
            "will be closed",
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
