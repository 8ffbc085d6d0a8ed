"""``recover``: bring back the memories of one scope that a snapshot holds and were deleted since.

The operator's explicit override of "tombstones win" (docs/reference/commands/recover.md), for
a bulk-deletion bug or a mistaken ``forget``. ``plan_recover`` is pure: from the snapshot's
points and history and the live points and history it decides, per memory of the scope,
``recover`` or why it is left (``present``, ``changed``, ``erased``, ...). ``run_recover``
is the I/O half: verify the snapshot (fetched through the repository port when remote),
capture the live stores, plan, then on a route (``routes.open_writer``: the app's agent,
directly, or a maintenance window) write, per memory, first a history ADD event saying why
(``actor_id = "memsync"``, ``role = "memsync recover from <snapshot id>"``), then the point
with its id, vector and payload as the snapshot holds them (``Writer.put_back``: no
re-embedding). That order makes a run killed in between resumable: the memory then reads as
recovered-but-absent and the next ``recover`` puts the point back without a second event.
A check runs after.
"""

from __future__ import annotations

import enum
import tempfile
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import check, erasures, pending, repository, routes, utc
from memsync.config import Config
from memsync.errors import ExitCode
from memsync.model import CheckReport, HistoryEvent, MemoryHistory, Point
from memsync.reconcile_actions import event_row, payload_time, text_of
from memsync.snapshot import choose
from memsync.state import operation_lock
from memsync.stores import history
from memsync.stores.vector_store import vector_store_for
from memsync.stores.writer import Writer

logger = structlog.get_logger(__name__)

ROLE_PREFIX = "memsync recover from "
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
    CHANGED = "changed"  # its text changed since the snapshot: left
    ERASED = "erased"  # erased (forget --erase): never brought back
    NOT_DELETED = "not-deleted"  # history says live, no point: reconcile's missing-point
    DELETED_IN_SNAPSHOT = "deleted-in-snapshot"  # the snapshot's own history ends with DELETE
    QUEUED_DELETE = "queued-delete"  # a queued forget/erase/prune would delete it again
    NOT_IN_SNAPSHOT = "not-in-snapshot"  # an id given that the snapshot does not hold
    FAILED = "failed"


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

    ``resume``: the live history already ends with this recover's ADD event (a run killed
    between the event and the point): only the point is written.
    """

    memory_id: str
    status: Status
    why: str
    scope: dict[str, Any]
    resume: bool = False
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"memory_id", "status", "why", "user_id", "agent_id", "run_id", "error"}``."""
        return {
            "memory_id": self.memory_id,
            "status": self.status.value,
            "why": self.why,
            **{key: self.scope.get(key) for key in SCOPE_KEYS},
            "error": self.error,
        }


def plan_recover(
    scope: Scope,
    snapshot_id: str,
    snapshot_points: Mapping[str, Point],
    snapshot_history: Mapping[str, MemoryHistory],
    live_points: Mapping[str, Point],
    live_last: Mapping[str, HistoryEvent],
    queued: Sequence[tuple[str, Scope]] = (),
    erased: Collection[str] = (),
) -> list[Decision]:
    """Decide, per memory of ``scope`` the snapshot holds, whether to bring it back. Pure.

    Brought back: absent from the live store, and the live history ends with a DELETE whose
    old text is the snapshot's (mem0's delete), or has no row for it (a wipe). Left, with the
    reason: live still (``present``, or ``changed``), erased (a DELETE with no text:
    ``forget --erase`` never comes undone), changed between the snapshot and the delete,
    live in history but absent (``not-deleted``: reconcile's ``missing-point``), deleted
    in the snapshot itself, or covered by a queued forget/erase/prune (``queued``: request
    id and its scope). Ids asked for that the snapshot lacks are ``not-in-snapshot``. An id in
    ``erased`` (the erasure ledger's) is never brought back, even when the live history lost
    its rows (mem0's ``reset()`` empties the table).
    """
    decisions = [
        _decide(memory_id, point, snapshot_id, snapshot_history, live_points, live_last, queued)
        for memory_id, point in sorted(snapshot_points.items())
        if scope.holds(memory_id, point.payload)
    ]
    decisions = [
        replace(d, status=Status.ERASED, why=LEDGER_ERASED, resume=False)
        if d.status is Status.RECOVER and d.memory_id in erased
        else d
        for d in decisions
    ]
    decisions += [
        Decision(
            memory_id=memory_id,
            status=Status.NOT_IN_SNAPSHOT,
            why=f"snapshot {snapshot_id} holds no point with this id",
            scope={},
        )
        for memory_id in scope.memory_ids
        if memory_id not in snapshot_points
    ]
    return decisions


def _decide(
    memory_id: str,
    point: Point,
    snapshot_id: str,
    snapshot_history: Mapping[str, MemoryHistory],
    live_points: Mapping[str, Point],
    live_last: Mapping[str, HistoryEvent],
    queued: Sequence[tuple[str, Scope]],
) -> Decision:
    text = text_of(point)
    keys = {key: point.payload.get(key) for key in SCOPE_KEYS if point.payload.get(key)}

    def decision(status: Status, why: str, resume: bool = False) -> Decision:
        return Decision(memory_id=memory_id, status=status, why=why, scope=keys, resume=resume)

    in_snapshot = snapshot_history.get(memory_id)
    live, last = live_points.get(memory_id), live_last.get(memory_id)
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
    if last is None:
        return decision(
            Status.RECOVER,
            f"no point and no history row (wiped): put back from snapshot {snapshot_id}",
        )
    if last.event == "DELETE":
        if last.old_memory is None and last.new_memory is None:
            return decision(Status.ERASED, "erased (a DELETE without text): never brought back")
        if last.old_memory != text:
            return decision(
                Status.CHANGED,
                "its text changed between the snapshot and the delete: left (a newer snapshot "
                "holds the text it had)",
            )
        return decision(
            Status.RECOVER,
            f"deleted at {last.updated_at or last.created_at or 'an unknown time'}: put back "
            f"from snapshot {snapshot_id}",
        )
    if last.actor_id == "memsync" and (last.role or "").startswith(ROLE_PREFIX):
        return decision(
            Status.RECOVER, "a recover stopped before putting the point back: finish it", True
        )
    return decision(
        Status.NOT_DELETED,
        f"history says it is live ({last.event}) but it has no point: a missing-point, which "
        "memsync reconcile restores",
    )


def recover_event(
    point_id: str, payload: Mapping[str, Any], snapshot_id: str, now: datetime
) -> HistoryEvent:
    """The ADD event recorded before a point is put back (contract: ``memsync-<uuid4>``). Pure but for the id."""
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
    return HistoryEvent(rowid=0, **{**row, "role": f"{ROLE_PREFIX}{snapshot_id}"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """What a recover did (or, dry, would do), and the check after it."""

    snapshot_id: str
    chosen: choose.Chosen | None
    scope: Scope
    dry_run: bool
    decisions: tuple[Decision, ...]
    route: str | None
    after: CheckReport | None

    def count(self, status: Status) -> int:
        """How many decisions have ``status``."""
        return sum(1 for d in self.decisions if d.status is status)

    @property
    def exit_code(self) -> ExitCode:
        """4 (PARTIAL) when a memory failed to come back, else 0."""
        return ExitCode.PARTIAL if self.count(Status.FAILED) else ExitCode.OK


def run_recover(
    config: Config,
    source: str | None,
    now: datetime,
    scope: Scope,
    *,
    dry_run: bool,
    before: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Recovered:
    """Recover the deleted memories of ``scope`` from a snapshot (see the module docstring).

    ``source``: an id, a path, ``s3://…`` or ``latest`` (``before``: the newest verified one
    made before it). A dry run verifies and plans, and writes nothing to the deployment.
    ``progress(memories_done, memories_planned)`` is called as the writes go.

    Raises:
        UnavailableError: (exit 11) the snapshot is missing, fails verification, S3 fails,
            the erasure ledger is unreadable.
        ConfigError: (exit 10) it does not fit the config.
        NoRouteError: (exit 12) the app holds the store and no agent or window can write
            (a recover is never queued).
        LockedError: (exit 12) another memsync operation runs.
    """
    target, chosen = choose.resolve(config, source, before)
    config.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=config.work_dir, prefix="recover-") as temporary:
        scratch = Path(temporary)
        directory = choose.materialize(config, target, scratch)
        manifest = choose.verify_fit(config, directory, now)
        plain = repository.plaintext(config, directory, manifest, scratch / "plain")
        decisions = _plan(config, plain, manifest.id, now, scope)
        result = Recovered(
            snapshot_id=manifest.id, chosen=chosen, scope=scope, dry_run=dry_run,
            decisions=tuple(decisions), route=None, after=None,
        )  # fmt: skip
        if not any(d.status is Status.RECOVER for d in decisions):
            return result
        if dry_run:
            return replace(result, route=routes.would_take(config))
        taken = routes.Taken()
        decisions = _apply(config, plain, manifest.id, now, decisions, taken, progress)
    after = check.run_check(config, now)
    return replace(result, decisions=tuple(decisions), route=taken.route, after=after)


def _plan(
    config: Config, plain: Path, snapshot_id: str, now: datetime, scope: Scope
) -> list[Decision]:
    """Read the snapshot's points and history and a live capture, then ``plan_recover``."""
    store = vector_store_for(config)
    copy = store.open_capture(plain / store.capture_dir, now, now)
    snapshot_points = {
        memory_id: point
        for memory_id, point in store.read_points(copy).items()
        if scope.holds(memory_id, point.payload)
    }
    snapshot_history = (
        history.read_contents(plain / "history.db").memories
        if (plain / "history.db").is_file()
        else {}
    )
    wanted = set(snapshot_points)
    inventory, _, live_last = check.settled_capture(
        config, now, inspect=lambda captured: _last_events(captured.history_path, wanted)
    )
    queued = [
        (
            r.id,
            Scope(user_id=r.user_id, agent_id=r.agent_id, run_id=r.run_id, memory_ids=r.memory_ids),
        )
        for r in pending.load(config.state_dir)
    ]
    return plan_recover(
        scope, snapshot_id, snapshot_points, snapshot_history, inventory.points,
        live_last or {}, queued, erasures.erased_ids(config.state_dir),
    )  # fmt: skip


def _last_events(copy: Path, wanted: Iterable[str]) -> dict[str, HistoryEvent]:
    """The last history event (old text included) of each wanted memory in a history copy."""
    wanted = set(wanted)
    last: dict[str, HistoryEvent] = {}
    if not copy.is_file() or not wanted:
        return last
    for event in history.iter_events(copy):
        if event.memory_id in wanted:
            last[event.memory_id] = event
    return last


def _apply(
    config: Config,
    plain: Path,
    snapshot_id: str,
    now: datetime,
    decisions: list[Decision],
    taken: routes.Taken,
    progress: Callable[[int, int], None] | None,
) -> list[Decision]:
    """Write every planned memory back on a route, under the operation lock."""
    planned = sum(1 for d in decisions if d.status is Status.RECOVER)
    done: list[Decision] = []
    written = 0
    with operation_lock(config.state_dir, "recover"):
        try:
            with routes.open_writer(config, "recover", taken) as writer:
                for decision in decisions:
                    if decision.status is Status.RECOVER:
                        decision = _put_back(config, plain, snapshot_id, now, decision, writer)
                        written += 1
                        if progress is not None:
                            progress(written, planned)
                    done.append(decision)
        except routes.NoRouteError as error:
            raise routes.NoRouteError(error.message, NO_ROUTE_HINT) from error
    return done


def _put_back(
    config: Config, plain: Path, snapshot_id: str, now: datetime, decision: Decision, writer: Writer
) -> Decision:
    """The recover event first, then the point (idempotent; a failure is recorded, not raised)."""
    store = vector_store_for(config)
    memory_id = decision.memory_id
    try:
        stored = store.find_point(plain / store.capture_dir, config.collection, memory_id)
        if stored is None or stored.vector is None:
            return replace(decision, status=Status.FAILED, error="the snapshot holds no vector")
        if writer.exists(memory_id):
            return replace(decision, status=Status.PRESENT, why="came back meanwhile: left")
        if not decision.resume:
            writer.record_events([recover_event(memory_id, stored.payload, snapshot_id, now)])
        writer.put_back(memory_id, stored.vector, stored.payload)
    except Exception as error:  # noqa: BLE001 - one memory failing never stops the others
        return replace(decision, status=Status.FAILED, error=f"{type(error).__name__}: {error}")
    logger.info("memory_recovered", memory_id=memory_id, snapshot_id=snapshot_id)
    return replace(decision, status=Status.RECOVERED)
