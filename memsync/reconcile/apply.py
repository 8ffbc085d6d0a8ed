"""``reconcile``: make the two stores agree again, action by action, with a journal.

``plan_reconcile`` (in ``memsync.reconcile.plan``, one pure rule per finding code) takes findings,
inventory and the recovery sources found in snapshots, and returns a list of actions.
``run_reconcile`` is the I/O half: check, plan, safety snapshot, then on a route
(``memsync.routes``: the app's agent, directly, or a maintenance window) journal and every action
through the route's writer (``mem0.Memory``, or one of the documented direct writes), marking each
done so a crash resumes instead of repeating. Policy: docs/reference/commands/reconcile.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from memsync import check, routes, snapshot
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.erase import apply as erase
from memsync.erase import ledger as erasures
from memsync.erase import replicas
from memsync.errors import ExitCode, UnavailableError
from memsync.model import CheckReport, HistoryEvent, Inventory, Recovery, Severity, parse_time
from memsync.reconcile import sources as recovery
from memsync.reconcile.actions import KNOWN_KINDS, NEEDS_EMBEDDER, Action
from memsync.reconcile.plan import plan_reconcile
from memsync.repository import reading
from memsync.state import write_json_atomic
from memsync.stores import mem0, snapshots
from memsync.stores.intent import load_forgetting
from memsync.stores.vector_store import StoredPoint
from memsync.stores.writer import Writer

logger = structlog.get_logger(__name__)

JOURNAL = "reconcile-journal.json"
SCRATCH = "reconcile-read"  # <work_dir>/reconcile-read-<pid>-*: what a run reads, removed after
# A live collection this much newer than history means an old history.db was put back.
VECTORS_NEWER_MARGIN = timedelta(seconds=60)


def vectors_newer_than_history(inventory: Inventory) -> bool:
    """Tell whether the newest point is clearly newer than the newest history event. Pure.

    That is what an old history.db put back over newer vectors looks like: a missing point
    may then have been deleted since, so it must not be brought back.
    """
    point_times = [
        parse_time(p.payload.get("updated_at")) or parse_time(p.payload.get("created_at"))
        for p in inventory.points.values()
    ]
    event_times = [m.last.at for m in inventory.history.values()]
    newest_point = max((t for t in point_times if t is not None), default=None)
    newest_event = max((t for t in event_times if t is not None), default=None)
    if newest_point is None or newest_event is None:
        return False
    return newest_point > newest_event + VECTORS_NEWER_MARGIN


# --- I/O half ----------------------------------------------------------------------------------


def find_recoveries(
    deployment: Deployment,
    inventory: Inventory,
    missing: Iterable[str],
    work: Path,
    *,
    fetch: bool = True,
    reads: list[recovery.SnapshotRead] | None = None,
) -> tuple[dict[str, Recovery | None], dict[str, str]]:
    """Find, for each missing memory, the newest snapshot holding it with the expected text.

    The search is ``memsync.reconcile.sources.find_recoveries`` (local snapshots read in place, remote
    ones' files downloaded into ``work``, the run's scratch area); vectors evidently newer than
    history block every recovery. Without ``fetch`` (a dry run) no snapshot is downloaded; the
    second mapping names, per memory left unresolved for that reason, the remote-only snapshot
    searched when the plan is applied. ``reads`` gets what was read of each snapshot.
    """
    return recovery.find_recoveries(
        deployment,
        inventory,
        missing,
        work,
        blocked_by_newer_vectors=vectors_newer_than_history(inventory),
        fetch=fetch,
        reads=reads,
    )


def note_deferred(actions: list[Action], deferred: dict[str, str]) -> list[Action]:
    """Say in ``why`` which memories a dry run left to a remote-only snapshot. Pure."""
    return [
        replace(
            action,
            why=f"{action.why} (dry run: remote snapshot {deferred[action.memory_id]} and older "
            "ones are not downloaded now; they are checked when the plan is applied, which may "
            "restore it instead)",
        )
        if action.memory_id in deferred and action.code == "missing-point"
        else action
        for action in actions
    ]


def _plaintext_root(config: Config, info: snapshots.SnapshotInfo, work: Path) -> Path:
    """A local snapshot's plaintext directory (``memsync.reconcile.sources.plaintext_root``)."""
    return recovery.plaintext_root(config, info, work) or work / info.id


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a reconcile run did: the plan (with statuses) and the check after it.

    ``route``: the route the writes took (``memsync.routes``), the one a dry run would take
    (None: none would), or None when nothing was written; ``downtime_s``: a window's downtime.
    """

    plan_id: str
    actions: tuple[Action, ...]
    dry_run: bool
    resumed: bool
    snapshot_id: str | None
    after: CheckReport | None
    route: str | None = None
    downtime_s: float | None = None
    erased_again: tuple[str, ...] = ()  # erased memories an older store brought back, erased again
    erased_unverified: tuple[
        str, ...
    ] = ()  # why their texts are not proven gone (erase.unverified)
    read: tuple[recovery.SnapshotRead, ...] = ()  # what the search for lost points read

    @property
    def fetched_bytes(self) -> int:
        """Bytes downloaded from the bucket (into the scratch area, removed since)."""
        return sum(item.fetched_bytes for item in self.read)

    def counts(self) -> dict[str, int]:
        """Actions by status: ``pending``, ``done``, ``failed``, ``unrecoverable``."""
        return {
            status: sum(1 for a in self.actions if a.status == status)
            for status in ("pending", "done", "failed", "unrecoverable")
        }

    def to_json(self) -> dict[str, Any]:
        """``reconcile --json`` (docs/reference/json-output.md)."""
        return {
            "command": "reconcile",
            "dry_run": self.dry_run,
            "resumed": self.resumed,
            "plan_id": self.plan_id,
            "safety_snapshot": self.snapshot_id,
            "counts": self.counts(),
            "actions": [
                {
                    "kind": str(a.kind),
                    "code": a.code,
                    "memory_id": a.memory_id,
                    "why": a.why,
                    "status": a.status,
                    "error": a.error,
                }
                for a in self.actions
            ],
            "check_after": self.after.counts() if self.after else None,
            "route": self.route,
            "downtime_s": self.downtime_s,
            "erased_again": list(self.erased_again),
            "erased_unverified": list(self.erased_unverified),
            "read": [item.to_json() for item in self.read],
            "fetched_bytes": self.fetched_bytes,
        }

    @property
    def exit_code(self) -> ExitCode:
        """3 for a dry run with work; 4 when an action failed or was unrecoverable; else 0."""
        if self.dry_run:
            work = [a for a in self.actions if a.kind != "report"]
            return ExitCode.PROBLEMS_FOUND if work or self.actions else ExitCode.OK
        if any(a.status in ("failed", "unrecoverable") for a in self.actions):
            return ExitCode.PARTIAL
        if self.erased_unverified:
            return ExitCode.PARTIAL  # the erased texts it deleted again are not proven gone
        if self.after is not None and not self.after.ok:
            return ExitCode.PARTIAL  # errors remain that no action answered
        return ExitCode.OK


def journal_path(config: Config) -> Path:
    """Where the running plan is journaled."""
    return config.state_dir / JOURNAL


def save_journal(config: Config, plan_id: str, actions: Iterable[Action], status: str) -> None:
    """Write the journal atomically."""
    write_json_atomic(
        journal_path(config),
        {"plan_id": plan_id, "status": status, "actions": [asdict(a) for a in actions]},
    )


def load_journal(config: Config) -> tuple[str, list[Action]] | None:
    """The unfinished plan of a reconcile that died, or None."""
    import json

    path = journal_path(config)
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("status") == "done":
            return None
        return str(document["plan_id"]), [Action(**item) for item in document["actions"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UnavailableError(
            f"reconcile journal {path} is unreadable ({type(error).__name__})",
            "move it aside; the next reconcile plans afresh from a new check",
        ) from error


def apply_action(
    action: Action, writer: Writer, deployment: Deployment, work: Path | None = None
) -> Action:
    """Apply one action through the writer, idempotently (its effect already present: done).

    ``work`` is the run's scratch area (where a remote snapshot's files were read); None: a
    point read again goes to a scratch area of its own, removed after.
    Returns the action with its status (``done``, ``failed`` with an error, ``unrecoverable``).
    mem0 errors propagate (``_apply_all`` records them as ``failed``).
    """
    config = deployment.config
    kind, memory_id = action.kind, str(action.memory_id)
    if kind not in KNOWN_KINDS:
        return replace(action, status="failed", error=f"unknown action kind {kind!r}")
    if kind == "report":
        return action if action.status != "pending" else replace(action, status="unrecoverable")
    if kind == "delete-point":
        writer.delete(memory_id)
    elif kind == "restore-point":
        if not writer.exists(memory_id):
            if work is None:
                with reading.scratch(config, SCRATCH) as scratch:
                    stored = _stored_point(action, deployment, scratch)
            else:
                stored = _stored_point(action, deployment, work)
            if stored is None or stored.vector is None:
                return replace(
                    action, status="failed", error="the snapshot no longer holds the point"
                )
            writer.put_back(memory_id, stored.vector, stored.payload)
    elif kind == "record-event":
        writer.record_events([HistoryEvent(rowid=0, **action.params["row"])])
    elif kind == "update-point":
        if writer.payload(memory_id) is None:
            return replace(action, status="failed", error="the point is gone")
        writer.update_text(memory_id, action.params["text"])
    elif kind == "relink-entity":
        writer.relink_entity(action.params["entity_id"], action.params["remaining"])
    elif kind == "delete-messages":
        writer.delete_messages(action.params["scope"])
    return replace(action, status="done")


def _stored_point(action: Action, deployment: Deployment, work: Path) -> StoredPoint | None:
    """The point a ``restore-point`` puts back, read from its snapshot (again if need be).

    From ``Recovery.storage`` while it exists; else (a resumed journal: the scratch area it
    named is gone, or a journal written before 0.2 names a storage.sqlite) from the local
    snapshot, decrypted into ``work``, or from the bucket: the memory collection's file only,
    downloaded into ``work`` once per snapshot.
    """
    config = deployment.config
    store = deployment.vector_store
    memory_id, snapshot_id = str(action.memory_id), action.params["snapshot_id"]
    vectors = Path(action.params["storage"])
    if vectors.is_dir():
        stored = store.find_point(vectors, config.collection, memory_id)
        if stored is not None:
            return stored
    info = snapshots.describe(snapshot_path(config, snapshot_id))
    if info is not None:
        root = _plaintext_root(config, info, work)
    elif config.s3 is not None:
        paths = [f"{store.capture_dir}/{name}" for name in store.capture_names(config.collection)]
        remote, again = deployment.remote, work / "again"
        encrypted = remote.read_manifest(snapshot_id).encrypted
        root = again / (f"{snapshot_id}.plain" if encrypted else snapshot_id)
        if not any((root / path).is_file() for path in paths):  # fetched once per snapshot
            root = reading.open_files(config, remote, snapshot_id, paths, again).root
    else:
        return None
    return store.find_point(root / store.capture_dir, config.collection, memory_id)


def snapshot_path(config: Config, snapshot_id: str) -> Path:
    """The local directory of a snapshot id."""
    assert config.snapshot.directory is not None
    return config.snapshot.directory / snapshot_id


def run_reconcile(
    deployment: Deployment,
    now: datetime,
    *,
    dry_run: bool,
    only: frozenset[str] | None,
    take_snapshot: bool,
    record_lost: bool,
    create_history: bool = False,
) -> Outcome:
    """Check, plan, then (unless ``dry_run``) snapshot, journal and apply; finally check again.

    An unfinished journal from a reconcile that died is resumed first (its pending actions
    only). A history.db that does not exist is created only with ``create_history`` (a
    missing file more likely means a wrong path). Needs a route (``routes.open_writer``) only
    when there is something to write: a plan with no action, or only reports, returns without
    touching the store or its lock; a dry run names the route it would take.

    Raises:
        NoRouteError: (exit 12) the app holds the store and no agent or window can write.
        WindowError, WindowOverrunError: as ``routes.open_writer`` (the journal resumes).
        ConfigError: mem0 cannot be built or its embedder fails the probe.
        UnavailableError, TryLaterError: as ``check``.
    """
    config = deployment.config
    if not dry_run:
        routes.recover_window(config)  # a window a killed memsync left open: start the app
    with reading.scratch(config, SCRATCH) as work:  # removed on any exit: nothing left behind
        return _run(
            deployment, now, work, dry_run=dry_run, only=only, take_snapshot=take_snapshot,
            record_lost=record_lost, create_history=create_history,
        )  # fmt: skip


def _run(
    deployment: Deployment,
    now: datetime,
    work: Path,
    *,
    dry_run: bool,
    only: frozenset[str] | None,
    take_snapshot: bool,
    record_lost: bool,
    create_history: bool,
) -> Outcome:
    """``run_reconcile`` inside its scratch area ``work``."""
    config = deployment.config
    resumed = load_journal(config) if not dry_run else None
    read: list[recovery.SnapshotRead] = []
    taken = routes.Taken()
    snapshot_id = None
    erased_again: list[str] = []
    unverified: list[str] = []
    if resumed is not None:
        plan_id, actions = resumed
        with deployment.open_writer("reconcile", taken) as writer:
            actions = revalidate(actions, check.settled_report(deployment, now)[0])
            actions = _apply_all(deployment, plan_id, actions, writer, work)
    else:
        plan_id = uuid.uuid4().hex[:12]
        actions, report, before = _fresh_plan(
            deployment, now, work, read, only=only, record_lost=record_lost,
            create_history=create_history, dry_run=dry_run,
        )  # fmt: skip
        if dry_run or not actions:
            return replace(
                _unapplied(deployment, plan_id, actions, report, dry_run), read=tuple(read)
            )
        writes = any(a.kind != "report" for a in actions)
        if writes:
            deployment.require_interpreter()  # refused before the safety snapshot
        if take_snapshot and writes and deployment.would_take() is not None:
            deployment.require_writable()  # what the writer's start would refuse: no snapshot
            snapshot_id = snapshot.create_snapshot(
                deployment, now, by="reconcile"
            ).id  # live: no route
        if writes:
            actions = _apply_on_route(deployment, now, plan_id, actions, taken, work)
            erased_again, unverified = _erase_again(deployment, before, actions, now)
        else:  # only reports: nothing to write, no route (mem0 is not even built)
            actions = _apply_all(deployment, plan_id, actions, None, work)
    after = check.run_check(deployment, now)
    return Outcome(
        plan_id=plan_id,
        actions=tuple(actions),
        dry_run=False,
        resumed=resumed is not None,
        snapshot_id=snapshot_id,
        after=after,
        route=taken.route,
        downtime_s=taken.downtime_s,
        erased_again=tuple(erased_again),
        erased_unverified=tuple(unverified),
        read=tuple(read),
    )


def _erase_again(
    deployment: Deployment, before: Inventory, actions: list[Action], now: datetime
) -> tuple[list[str], list[str]]:
    """Erase again the erased memories this run deleted: an older store had brought them back.

    mem0's delete writes the point's text into its DELETE history row (mem0ai 2.2.1), so a
    ``resurrected-point`` of an id in the erasure ledger (``memsync.erase.ledger``) would put the
    erased text back into history.db: its rows are blanked and the stores rewritten, as
    ``forget --erase`` does (``erase.erase_texts``). Returns the ids, sorted, and why their
    texts are not proven gone (``erase.unverified``; empty when the byte search found none).
    With ``[protect]`` the replicas start a new generation and lose the older ones, which the
    older store's files shipped the text in (``erase.replicas``).
    """
    config = deployment.config
    deleted = {a.memory_id for a in actions if a.kind == "delete-point" and a.status == "done"}
    again = sorted(m for m in deleted & erasures.erased_ids(config.state_dir) if m)
    if not again:
        return [], []
    with replicas.renewal(deployment) as renewal:  # [protect]: as forget --erase does
        erased = erase.erase_texts(deployment, before, again, now)
        renewed = renewal.renew(erase.unverified(erased)) if renewal else {}
    logger.warning("erased_memories_deleted_again", memories=len(again))
    problem = renewed.get("problem")
    return again, erase.unverified(erased) + ([f"replicas: {problem}"] if problem else [])


def _unapplied(
    deployment: Deployment, plan_id: str, actions: list[Action], report: CheckReport, dry_run: bool
) -> Outcome:
    """The outcome of a dry run (with the route a write would take) or of an empty plan."""
    writes = any(a.kind != "report" for a in actions)
    return Outcome(
        plan_id=plan_id, actions=tuple(actions), dry_run=dry_run, resumed=False,
        snapshot_id=None, after=report if not actions else None,
        route=deployment.would_take() if dry_run and writes else None,
    )  # fmt: skip


def _apply_on_route(
    deployment: Deployment,
    now: datetime,
    plan_id: str,
    actions: list[Action],
    taken: routes.Taken,
    work: Path,
) -> list[Action]:
    """Open a route, journal the plan and apply it through the route's writer.

    The plan is checked again first (the app may have written since it was made, and a delete
    in flight may have landed: ``revalidate``), but on the direct route of a store that writes
    alone (embedded Qdrant, whose app is stopped: nothing wrote since).

    Raises:
        NoRouteError: (exit 12) nothing can write now; no journal is left behind.
    """
    config = deployment.config
    with deployment.open_writer("reconcile", taken) as writer:
        if writer.route != "direct" or not deployment.vector_store.writes_alone:
            actions = revalidate(actions, check.settled_report(deployment, now)[0])
        save_journal(config, plan_id, actions, "running")
        return _apply_all(deployment, plan_id, actions, writer, work)


def _fresh_plan(
    deployment: Deployment,
    now: datetime,
    work: Path,
    read: list[recovery.SnapshotRead],
    *,
    only: frozenset[str] | None,
    record_lost: bool,
    create_history: bool,
    dry_run: bool,
) -> tuple[list[Action], CheckReport, Inventory]:
    """Check (hot journals rolled back first when the store is free), find recoveries, plan.

    Snapshots are read into ``work``; ``read`` gets what was read of each.
    """
    config = deployment.config
    if not dry_run and routes.store_free(deployment.vector_store):
        # hot journals rolled back before the capture
        mem0.prepare_for_writing(deployment.vector_store, config)
    whole = partial(_needs_every_point, deployment)
    inventory, report = check.settled_named(deployment, now, whole)
    missing = [f.memory_id for f in report.findings if f.code == "missing-point" and f.memory_id]
    recoveries, deferred = find_recoveries(
        deployment, inventory, missing, work, fetch=not dry_run, reads=read
    )
    actions = plan_reconcile(
        report.findings,
        inventory,
        recoveries,
        only=only,
        record_lost=record_lost,
        now=now,
        new_id=lambda: f"memsync-{uuid.uuid4()}",
        forgetting=frozenset(load_forgetting(config.state_dir)),
        history_writable=create_history or config.history_db_path.exists(),
    )
    return note_deferred(actions, deferred), report, inventory


def _needs_every_point(deployment: Deployment, report: CheckReport) -> bool:
    """Whether planning ``report`` reads points its findings do not name.

    ``history-missing`` records an ADD for every point; a ``resurrected-point`` of an erased
    memory is erased again (``_erase_again``), which looks at every other memory's scope and
    text. Reads the erasure ledger.
    """
    codes = {f.code for f in report.findings}
    if "history-missing" in codes:
        return True
    resurrected = {f.memory_id for f in report.findings if f.code == "resurrected-point"}
    return bool(resurrected & set(erasures.erased_ids(deployment.state)))


def revalidate(actions: list[Action], report: CheckReport) -> list[Action]:
    """On resume, keep a pending action only while its finding still stands. Pure.

    The stores may have changed since the plan was made (the app ran, someone deleted or
    edited a memory): an action whose finding is gone is ``superseded``, never applied blindly.
    """
    standing = {(f.code, f.memory_id) for f in report.findings if f.severity is not Severity.INFO}
    standing |= {
        ("dangling-entity-link", f.memory_id)
        for f in report.findings
        if f.code == "dangling-entity-link"
    }
    kept = []
    for action in actions:
        if (
            action.status == "pending"
            and action.kind != "report"
            and (action.code, action.memory_id) not in standing
        ):
            action = replace(
                action, status="superseded", why=action.why + " (superseded: the finding is gone)"
            )
        kept.append(action)
    return kept


def _apply_all(
    deployment: Deployment, plan_id: str, actions: list[Action], writer: Writer | None, work: Path
) -> list[Action]:
    """Apply every pending action through ``writer``, journaling each; None: reports only."""
    config = deployment.config
    if writer is None or not any(a.status == "pending" and a.kind != "report" for a in actions):
        actions = [
            replace(a, status="unrecoverable") if a.status == "pending" else a for a in actions
        ]
        save_journal(config, plan_id, actions, "done")
        return actions
    if any(a.kind in NEEDS_EMBEDDER and a.status == "pending" for a in actions):
        writer.probe_embedder()
    writer.touch_entity_store()
    for position, action in enumerate(actions):
        if action.status != "pending":
            continue
        try:
            actions[position] = apply_action(action, writer, deployment, work)
        except Exception as error:  # noqa: BLE001 - a failed action is recorded, never fatal
            actions[position] = replace(
                action, status="failed", error=f"{type(error).__name__}: {error}"
            )
        logger.info(
            "reconcile_action",
            kind=action.kind,
            code=action.code,
            memory_id=action.memory_id,
            status=actions[position].status,
        )
        save_journal(config, plan_id, actions, "running")
    save_journal(config, plan_id, actions, "done")
    return actions
