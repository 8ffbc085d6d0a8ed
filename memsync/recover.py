"""``recover``: bring back the memories of one scope a snapshot holds that were deleted or vanished.

The operator's explicit override of "tombstones win" (docs/reference/commands/recover.md), for
a bulk-deletion bug or a mistaken ``forget``. ``plan_recover`` is pure: from the snapshot's
points and history and the live points and history it decides, per memory of the scope,
``recover`` or why it is left (``present``, ``changed``, ``erased``, ...). ``run_recover``
is the I/O half: verify the snapshot (fetched through the repository port when remote),
capture the live stores, plan, then on a route (``routes.open_writer``: the app's agent,
directly, or a maintenance window) write, per memory, first a history ADD event saying why
(``actor_id = "memsync"``, ``role = "memsync recover from <snapshot id>"``), then the point
with its id, vector and payload as the snapshot holds them (``Writer.put_back``), or, when its
text changed after the snapshot, with its last text from history embedded by the app's
embedder (``Writer.put_back_text``). That order makes a run killed in between resumable: the
memory then reads as recovered-but-absent and the next ``recover`` puts the point back without
a second event. A point that vanished without a DELETE event comes back as reconcile puts back
a ``missing-point``: no event. A check runs after.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import structlog

from memsync import check, repository, routes, utc
from memsync.agent.ops import MAX_SEARCH_TEXT as MAX_TEXT  # what put_back_text embeds
from memsync.deployment import Deployment
from memsync.erase import ledger as erasures
from memsync.errors import ExitCode
from memsync.model import CheckReport, HistoryEvent, MemoryHistory, Point
from memsync.reconcile.actions import event_row, payload_time, text_of
from memsync.repository import reading
from memsync.routes import queue as pending
from memsync.snapshot import choose
from memsync.state import operation_lock
from memsync.stores import capture, history, mem0
from memsync.stores.intent import load_forgetting
from memsync.stores.writer import Writer

logger = structlog.get_logger(__name__)

ROLE_PREFIX = "memsync recover from "
RE_EMBEDDED_ROLE = " (text from history, embedded again)"
LEDGER_ERASED = "erased (the erasure ledger names it): never brought back"
SCOPE_KEYS = ("user_id", "agent_id", "run_id")
NO_ROUTE_HINT = (
    "recover is not queued: attach memsync.agent in the app, or set [app] stop_command and "
    "start_command, or stop the app and run it again (--dry-run works meanwhile)"
)


class Status(enum.StrEnum):
    """What recover does (or did) with one memory of the scope."""

    RECOVER = "recover"  # planned (a dry run stops here)
    RECOVERED = "recovered"
    PRESENT = "present"  # still live with the snapshot's text: left as it is
    CHANGED = "changed"  # live with another text: left
    ERASED = "erased"  # erased (forget --erase): never brought back
    FORGETTING = "forgetting"  # an unfinished forget/prune was deleting it: reconcile closes it
    DELETED_IN_SNAPSHOT = "deleted-in-snapshot"  # the snapshot's own history ends with DELETE
    QUEUED_DELETE = "queued-delete"  # a queued forget/erase/prune would delete it again
    NOT_IN_SNAPSHOT = "not-in-snapshot"  # an id given that the snapshot does not hold
    FAILED = "failed"


class Past(NamedTuple):
    """What the live history says of one memory.

    ``last``: its last event. ``text``: the last text a row of it holds (a DELETE's
    ``old_memory``, else the last ADD/UPDATE's ``new_memory``; None when every row is blank).
    ``text_at``: when that text was written (its ADD/UPDATE row's ``updated_at``, else
    ``created_at``), as stored.
    """

    last: HistoryEvent
    text: str | None
    text_at: str | None


def past_of(events: Iterable[HistoryEvent]) -> Past | None:
    """The ``Past`` of one memory's events in rowid order (None when there are none). Pure."""
    last: HistoryEvent | None = None
    text: str | None = None
    text_at: str | None = None
    for event in events:
        last = event
        if event.event == "DELETE":
            text = event.old_memory if event.old_memory is not None else text
        elif _recover_event(event) and event.new_memory == text:
            pass  # a killed recover's own event: the text is still of when it was written
        elif event.new_memory is not None:
            text, text_at = event.new_memory, event.updated_at or event.created_at
    return None if last is None else Past(last, text, text_at)


def _recover_event(event: HistoryEvent) -> bool:
    """Whether ``event`` is the ADD a recover records before it puts the point back. Pure."""
    return event.actor_id == "memsync" and (event.role or "").startswith(ROLE_PREFIX)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """Which memories: one user_id, agent_id or run_id, or memory ids (exactly one kind)."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    memory_ids: tuple[str, ...] = ()

    def holds(self, memory_id: str, payload: Mapping[str, Any]) -> bool:
        """Whether the memory (its id, its payload's scope keys) is in the scope. Pure."""
        if self.memory_ids:
            return memory_id in self.memory_ids
        wanted = {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.run_id}
        return any(value is not None and payload.get(key) == value for key, value in wanted.items())

    def to_json(self) -> dict[str, Any]:
        """``{"user_id", "agent_id", "run_id", "memory_ids"}``."""
        return {
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "run_id": self.run_id,
            "memory_ids": list(self.memory_ids),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One memory of the scope: its status, why, and its scope keys as the snapshot holds them.

    How a ``recover`` is written: ``event`` (first a recover ADD event; False when the live
    history already says it is live: a run killed between the event and the point, or a point
    that vanished without a DELETE event, which reconcile too puts back without one); ``text``
    (None: the snapshot's vector and payload as they are; else the memory's last text from
    history, embedded again by the app's embedder, ``text_at`` its time for ``updated_at``).
    """

    memory_id: str
    status: Status
    why: str
    scope: dict[str, Any]
    event: bool = True
    text: str | None = None
    text_at: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"memory_id", "status", "why", "user_id", "agent_id", "run_id", "re_embedded", "error"}``."""
        return {
            "memory_id": self.memory_id,
            "status": self.status.value,
            "why": self.why,
            **{key: self.scope.get(key) for key in SCOPE_KEYS},
            "re_embedded": self.text is not None,
            "error": self.error,
        }


def plan_recover(
    scope: Scope,
    snapshot_id: str,
    snapshot_points: Mapping[str, Point],
    snapshot_history: Mapping[str, MemoryHistory],
    live_points: Mapping[str, Point],
    live_past: Mapping[str, Past],
    queued: Sequence[tuple[str, Scope]] = (),
    erased: Collection[str] = (),
    forgetting: Collection[str] = (),
) -> list[Decision]:
    """Decide, per memory of ``scope`` the snapshot holds, whether to bring it back. Pure.

    Brought back when it has no live point and: the live history ends with a DELETE (mem0's
    delete, ``forget``, ``delete_all``), or has no row for it (a wipe), or says it is live
    (ADD/UPDATE: it vanished without a DELETE event, as a collection reset or a lost point
    leaves it; no event is written, as ``reconcile`` writes none). When its last text in
    history differs from the snapshot's (changed after the snapshot), it comes back with that
    text, embedded again by the app's embedder. Left, with the reason: live still
    (``present``, ``changed``), erased (no row holds its text: ``forget --erase`` never comes
    undone; or the erasure ledger ``erased`` names it, even when the live history lost its
    rows), deleted in the snapshot itself, covered by a queued forget/erase/prune (``queued``:
    request id and scope), or vanished while an unfinished forget/prune (``forgetting``) was
    deleting it. Ids asked for that the snapshot lacks are ``not-in-snapshot`` (``present``
    when live).
    """
    decisions = [
        _decide(
            memory_id,
            point,
            snapshot_id,
            snapshot_history,
            live_points,
            live_past,
            queued,
            forgetting,
        )  # fmt: skip
        for memory_id, point in sorted(snapshot_points.items())
        if scope.holds(memory_id, point.payload)
    ]
    decisions = [
        replace(d, status=Status.ERASED, why=LEDGER_ERASED, event=True, text=None)
        if d.status is Status.RECOVER and d.memory_id in erased
        else d
        for d in decisions
    ]
    decisions += [
        _not_in_snapshot(memory_id, snapshot_id, live_points, live_past.get(memory_id))
        for memory_id in scope.memory_ids
        if memory_id not in snapshot_points
    ]
    return decisions


def _not_in_snapshot(
    memory_id: str, snapshot_id: str, live_points: Mapping[str, Point], past: Past | None
) -> Decision:
    """An id asked for that the snapshot holds no point of: live (``present``), or why not."""
    if memory_id in live_points:
        why = f"live (snapshot {snapshot_id} holds no point with this id): left as it is"
        return Decision(memory_id=memory_id, status=Status.PRESENT, why=why, scope={})
    if past is None:
        history = "the live history has no row for it either"
    else:
        when = past.last.updated_at or past.last.created_at or "an unknown time"
        history = f"the live history's last event for it is {past.last.event} at {when}"
    return Decision(
        memory_id=memory_id,
        status=Status.NOT_IN_SNAPSHOT,
        why=f"snapshot {snapshot_id} holds no point with this id, so no scope or metadata for "
        f"it; {history}",
        scope={},
    )


def _decide(
    memory_id: str,
    point: Point,
    snapshot_id: str,
    snapshot_history: Mapping[str, MemoryHistory],
    live_points: Mapping[str, Point],
    live_past: Mapping[str, Past],
    queued: Sequence[tuple[str, Scope]],
    forgetting: Collection[str],
) -> Decision:
    text = text_of(point)
    keys = {key: point.payload.get(key) for key in SCOPE_KEYS if point.payload.get(key)}

    def decision(status: Status, why: str, **how: Any) -> Decision:
        return Decision(memory_id=memory_id, status=status, why=why, scope=keys, **how)

    def recover(why: str, last_text: str, at: str | None, event: bool = True) -> Decision:
        if last_text == text:
            return decision(
                Status.RECOVER, f"{why}: put back from snapshot {snapshot_id}", event=event
            )
        return decision(
            Status.RECOVER,
            f"{why}; its text changed after snapshot {snapshot_id}: put back with its last text "
            "from history, embedded again by the app's embedder, with the snapshot's id, scope "
            "and metadata",
            event=event, text=last_text, text_at=at,
        )  # fmt: skip

    in_snapshot = snapshot_history.get(memory_id)
    live, past = live_points.get(memory_id), live_past.get(memory_id)
    if in_snapshot is not None and in_snapshot.last.event == "DELETE":
        return decision(Status.DELETED_IN_SNAPSHOT, "the snapshot's own history ends with DELETE")
    if live is not None:
        if text_of(live) == text:
            return decision(Status.PRESENT, "still live with the snapshot's text: left as it is")
        return decision(Status.CHANGED, "still live with another text: left as it is")
    for request_id, covered in queued:
        if covered.holds(memory_id, point.payload):
            return decision(
                Status.QUEUED_DELETE,
                f"queued request {request_id} would delete it again: left "
                "(memsync pending list shows it)",
            )
    if past is None:
        return decision(
            Status.RECOVER,
            f"no point and no history row (wiped): put back from snapshot {snapshot_id}",
        )
    last = past.last
    if past.text is None:
        return decision(Status.ERASED, "erased (no history row holds its text): never brought back")
    if last.event == "DELETE":
        when = last.updated_at or last.created_at or "an unknown time"
        return recover(f"deleted at {when}", past.text, past.text_at)
    if _recover_event(last):
        return recover(
            "a recover stopped before putting the point back: finish it", past.text,
            past.text_at, event=False,
        )  # fmt: skip
    if memory_id in forgetting:
        return decision(
            Status.FORGETTING,
            "vanished while a forget or prune that did not finish was deleting it "
            "(forget-journal.json): left; memsync reconcile closes it with its DELETE event",
        )
    why = f"vanished without a DELETE event (history's last event: {last.event})"
    if past.text == text:
        return recover(f"{why}, as reconcile would", past.text, past.text_at, event=False)
    return recover(why, past.text, past.text_at)


def recover_event(
    point_id: str,
    payload: Mapping[str, Any],
    snapshot_id: str,
    now: datetime,
    *,
    re_embedded: bool = False,
) -> HistoryEvent:
    """The ADD event recorded before a point is put back (contract: ``memsync-<uuid4>``). Pure but for the id.

    ``re_embedded``: the text is history's, not the snapshot's (the role says so).
    """
    point = Point(id=point_id, payload=payload, vector_size=None)
    row = event_row(
        point_id,
        "ADD",
        None,
        text_of(point),
        payload_time(point, "created_at"),
        utc.iso(now),
        f"memsync-{uuid.uuid4()}",
    )
    role = f"{ROLE_PREFIX}{snapshot_id}" + (RE_EMBEDDED_ROLE if re_embedded else "")
    return HistoryEvent(rowid=0, **{**row, "role": role})


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """What a recover did (or, dry, would do), and the check after it.

    ``unattributed``: memories deleted since the snapshot that it holds nothing of
    (``_plan`` says which), of whatever scope: listed, never brought back.
    """

    snapshot_id: str
    chosen: choose.Chosen | None
    scope: Scope
    dry_run: bool
    decisions: tuple[Decision, ...]
    route: str | None
    after: CheckReport | None
    unattributed: tuple[str, ...] = ()

    def count(self, status: Status) -> int:
        """How many decisions have ``status``."""
        return sum(1 for d in self.decisions if d.status is status)

    @property
    def exit_code(self) -> ExitCode:
        """4 (PARTIAL) when a memory failed to come back, else 0."""
        return ExitCode.PARTIAL if self.count(Status.FAILED) else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        """``recover --json`` (docs/reference/json-output.md)."""
        return {
            "command": "recover",
            "snapshot_id": self.snapshot_id,
            "chosen": self.chosen.to_json() if self.chosen else None,
            "scope": self.scope.to_json(),
            "dry_run": self.dry_run,
            "route": self.route,
            "counts": {status.value: self.count(status) for status in Status},
            "memories": [d.to_json() for d in self.decisions],
            "deleted_not_in_snapshot": list(self.unattributed),
            "check_after": self.after.counts() if self.after else None,
        }


def run_recover(
    deployment: Deployment,
    source: str | None,
    now: datetime,
    scope: Scope,
    *,
    dry_run: bool,
    before: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Recovered:
    """Recover the deleted or vanished memories of ``scope`` from a snapshot (module docstring).

    ``source``: an id, a path, ``s3://…`` or ``latest`` (``before``: the newest verified one
    made before it). A dry run verifies and plans, and writes nothing to the deployment.
    ``progress(memories_done, memories_planned)`` is called as the writes go.

    Raises:
        UnavailableError: (exit 11) the snapshot is missing, fails verification, S3 fails,
            the erasure ledger is unreadable.
        ConfigError: (exit 10) it does not fit the config; or, before anything is written,
            the one-shot writer's embedder fails its probe when a memory is to be embedded again.
        NoRouteError: (exit 12) the app holds the store and no agent or window can write
            (a recover is never queued).
        LockedError: (exit 12) another memsync operation runs.
    """
    config = deployment.config
    target, chosen = choose.resolve(deployment, source, before)
    # <work_dir>/recover-<pid>-*: the next run removes one a SIGKILL left (the decrypted copy)
    with reading.scratch(config, "recover") as scratch:
        directory = choose.materialize(config, target, scratch)
        manifest = choose.verify_fit(deployment, directory, now)
        plain = repository.plaintext(config, directory, manifest, scratch / "plain")
        return recover_from(
            deployment, plain, manifest.id, now, scope,
            dry_run=dry_run, chosen=chosen, progress=progress,
        )  # fmt: skip


def recover_from(
    deployment: Deployment,
    plain: Path,
    source_id: str,
    now: datetime,
    scope: Scope,
    *,
    dry_run: bool,
    chosen: choose.Chosen | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Recovered:
    """``run_recover`` from a snapshot's plaintext layout under ``plain`` (or one like it).

    ``source_id`` names it in the report and in the recover events (a snapshot's id, or
    ``restore --at``'s ``at-<TIME>`` for a pair restored from the replicas). Raises as
    ``run_recover`` does once the snapshot is read.
    """
    if not dry_run and routes.store_free(deployment.vector_store):
        # hot journals a killed app left rolled back before the capture, as its start would
        mem0.prepare_for_writing(deployment.vector_store, deployment.config)
    decisions, unattributed = _plan(deployment, plain, source_id, now, scope)
    result = Recovered(
        snapshot_id=source_id, chosen=chosen, scope=scope, dry_run=dry_run,
        decisions=tuple(decisions), route=None, after=None, unattributed=unattributed,
    )  # fmt: skip
    if dry_run:  # the route is named even with nothing to write (what a run would take)
        return replace(result, route=deployment.would_take())
    if not any(d.status is Status.RECOVER for d in decisions):
        return result
    taken = routes.Taken()
    decisions = _apply(deployment, plain, source_id, now, decisions, taken, progress)
    after = check.run_check(deployment, now)
    return replace(result, decisions=tuple(decisions), route=taken.route, after=after)


def _plan(
    deployment: Deployment, plain: Path, snapshot_id: str, now: datetime, scope: Scope
) -> tuple[list[Decision], tuple[str, ...]]:
    """Read the snapshot's points and history and a live capture, then ``plan_recover``.

    Also the unattributed: memories deleted since the snapshot that it knows nothing of (their
    last live event is DELETE, they have no point, and the snapshot holds neither a point nor a
    history row of them, nor does the erasure ledger name them: their text is in history, but
    no scope, so no scope's recover can claim them); none for a scope of ids. Both
    stores are streamed: what is held is the scope's memories, every id the snapshot knows
    (as a number), and the live memories deleted since that the snapshot does not know, so
    memory grows with the scope and the deletions, not with the store.
    """
    config = deployment.config
    store = deployment.vector_store
    copy = store.open_capture(plain / store.capture_dir, now, now)
    snapshot_points: dict[str, Point] = {}
    known: set[int | str] = set()  # every id the snapshot holds a point or history rows of
    for point in store.iter_points(copy, config.collection):
        known.add(_compact(point.id))
        if scope.holds(point.id, point.payload):
            snapshot_points[point.id] = point
    wanted = set(snapshot_points) | set(scope.memory_ids)
    snapshot_history: dict[str, MemoryHistory] = {}
    if (plain / "history.db").is_file():
        for memory in history.iter_memories(plain / "history.db"):
            known.add(_compact(memory.memory_id))
            if memory.memory_id in wanted:
                snapshot_history[memory.memory_id] = memory
    erased = erasures.erased_ids(config.state_dir)
    known.update(_compact(memory_id) for memory_id in erased)

    def live(captured: capture.Captured) -> tuple[dict[str, Point], dict[str, Past], list[str]]:
        """The wanted live points and pasts, and the unattributed, from one capture."""
        deleted: set[str] = set()  # live memories ending with a DELETE the snapshot does not know
        if captured.history_copy is not None and not scope.memory_ids:
            for memory in history.iter_memories(captured.history_copy.dest):
                if memory.last.event == "DELETE" and _compact(memory.memory_id) not in known:
                    deleted.add(memory.memory_id)
        points: dict[str, Point] = {}
        for point in store.iter_points(captured.vectors, config.collection):
            if point.id in wanted:
                points[point.id] = point
            deleted.discard(point.id)
        return points, _pasts(captured.history_path, wanted), sorted(deleted)

    _, found = check.settled_report(deployment, now, inspect=live)
    assert found is not None  # settled_report returns what ``inspect`` returned
    live_points, live_past, unattributed = found
    queued = [
        (
            r.id,
            Scope(user_id=r.user_id, agent_id=r.agent_id, run_id=r.run_id, memory_ids=r.memory_ids),
        )
        for r in pending.load(config.state_dir)
    ]
    decisions = plan_recover(
        scope, snapshot_id, snapshot_points, snapshot_history, live_points,
        live_past, queued, erased, load_forgetting(config.state_dir),
    )  # fmt: skip
    return decisions, tuple(unattributed)


def _compact(memory_id: str) -> int | str:
    """A memory id as held in a large set: a UUID's 128-bit number (44 bytes, not 85)."""
    try:
        return uuid.UUID(memory_id).int
    except ValueError:
        return memory_id


def _pasts(copy: Path, wanted: Iterable[str]) -> dict[str, Past]:
    """What the history copy says of each wanted memory (``past_of``): its last event and text."""
    wanted = set(wanted)
    events: dict[str, list[HistoryEvent]] = {}
    if not copy.is_file() or not wanted:
        return {}
    for event in history.iter_events(copy):
        if event.memory_id in wanted:
            events.setdefault(event.memory_id, []).append(event)
    return {m: past for m, rows in events.items() if (past := past_of(rows)) is not None}


def _apply(
    deployment: Deployment,
    plain: Path,
    snapshot_id: str,
    now: datetime,
    decisions: list[Decision],
    taken: routes.Taken,
    progress: Callable[[int, int], None] | None,
) -> list[Decision]:
    """Write every planned memory back on a route, under the operation lock."""
    config = deployment.config
    planned = sum(1 for d in decisions if d.status is Status.RECOVER)
    done: list[Decision] = []
    written = 0
    with operation_lock(config.state_dir, "recover"):
        try:
            with deployment.open_writer("recover", taken) as writer:
                if any(d.status is Status.RECOVER and d.text is not None for d in decisions):
                    writer.probe_embedder()  # exit 10 before any write when it cannot embed
                for decision in decisions:
                    if decision.status is Status.RECOVER:
                        decision = _put_back(deployment, plain, snapshot_id, now, decision, writer)
                        written += 1
                        if progress is not None:
                            progress(written, planned)
                    done.append(decision)
        except routes.NoRouteError as error:
            raise routes.NoRouteError(error.message, NO_ROUTE_HINT) from error
    return done


def _put_back(
    deployment: Deployment,
    plain: Path,
    snapshot_id: str,
    now: datetime,
    decision: Decision,
    writer: Writer,
) -> Decision:
    """The recover event first, then the point (idempotent; a failure is recorded, not raised).

    The point: the snapshot's vector and payload, or, with ``decision.text``, that text
    embedded by the app's embedder (``Writer.put_back_text``) in the snapshot's payload.
    """
    config = deployment.config
    store = deployment.vector_store
    memory_id = decision.memory_id
    try:
        stored = store.find_point(plain / store.capture_dir, config.collection, memory_id)
        if stored is None or (stored.vector is None and decision.text is None):
            return replace(decision, status=Status.FAILED, error="the snapshot holds no vector")
        if writer.exists(memory_id):
            return replace(decision, status=Status.PRESENT, why="came back meanwhile: left")
        if decision.text is not None and not 0 < len(decision.text) <= MAX_TEXT:
            return replace(
                decision, status=Status.FAILED,
                error=f"its last text from history ({len(decision.text):,} characters) is not "
                f"one the app's agent embeds (1 to {MAX_TEXT:,}): left, nothing written",
            )  # fmt: skip
        payload = dict(stored.payload)
        if decision.text is not None and decision.text_at is not None:
            payload["updated_at"] = decision.text_at
        if decision.event:
            told = payload if decision.text is None else {**payload, "data": decision.text}
            event = recover_event(
                memory_id, told, snapshot_id, now, re_embedded=decision.text is not None
            )
            writer.record_events([event])
        if decision.text is None:
            assert stored.vector is not None
            writer.put_back(memory_id, stored.vector, payload)
        else:
            writer.put_back_text(memory_id, decision.text, payload)
    except Exception as error:  # noqa: BLE001 - one memory failing never stops the others
        return replace(decision, status=Status.FAILED, error=f"{type(error).__name__}: {error}")
    logger.info(
        "memory_recovered", memory_id=memory_id, snapshot_id=snapshot_id,
        re_embedded=decision.text is not None,
    )  # fmt: skip
    return replace(decision, status=Status.RECOVERED)
