"""``reconcile``: make the two stores agree again, action by action, with a journal.

``plan_reconcile`` is pure (findings, inventory and the recovery sources found in snapshots in;
a list of actions out). ``run_reconcile`` is the I/O half: check, plan, safety snapshot, journal,
then every action through ``mem0.Memory`` (or one of the documented direct writes), marking each
done so a crash resumes instead of repeating. Policy: DESIGN.md ("Reconcile policy").
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from memsync import check, snapshot
from memsync.config import Config
from memsync.errors import ExitCode, UnavailableError
from memsync.model import CheckReport, Finding, HistoryEvent, Inventory, Point, Severity, parse_time
from memsync.state import write_json_atomic
from memsync.stores import history, local_qdrant, mem0, snapshots
from memsync.stores.intent import load_forgetting
from memsync.stores.vector_store import StoredPoint, vector_store_for

logger = structlog.get_logger(__name__)

JOURNAL = "reconcile-journal.json"
DAMAGE_CODES = frozenset({
    "resurrected-point", "missing-point", "orphan-point", "text-mismatch", "hash-mismatch",
    "missing-payload", "dangling-entity-link", "history-missing", "collection-missing",
    "dimension-mismatch",
})  # fmt: skip
POLICY_CODES = frozenset({"duplicate-memory", "expired-memory", "orphan-messages"})
NEEDS_EMBEDDER = frozenset({"update-point"})
KNOWN_KINDS = frozenset({"delete-point", "restore-point", "record-event", "update-point", "relink-entity",
                         "delete-messages", "report"})
# A live collection this much newer than history means an old history.db was put back.
VECTORS_NEWER_MARGIN = timedelta(seconds=60)


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """Where a missing point can be recovered from: a snapshot holding it with the right text."""

    snapshot_id: str
    storage: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """One step of a plan.

    Attributes:
        kind: ``delete-point``, ``restore-point``, ``record-event``, ``update-point``,
            ``relink-entity``, ``delete-messages`` or ``report`` (nothing to do but say why).
        code: the finding it answers; ``memory_id`` the memory (or None).
        why: a sentence for the operator.
        params: what the action needs (texts, ids, a snapshot path, a prepared history row).
        status: ``pending``, ``done``, ``failed`` or ``unrecoverable``.
    """

    index: int
    kind: str
    code: str
    memory_id: str | None
    why: str
    params: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"
    error: str | None = None


def _event_row(memory_id: str, event: str, old: str | None, new: str | None,
               created: str | None, updated: str | None, event_id: str) -> dict[str, Any]:
    return {"id": event_id, "memory_id": memory_id, "old_memory": old, "new_memory": new, "event": event,
            "created_at": created, "updated_at": updated, "is_deleted": 1 if event == "DELETE" else 0,
            "actor_id": "memsync", "role": None}


def plan_reconcile(
    findings: Iterable[Finding],
    inventory: Inventory,
    recoveries: Mapping[str, Recovery | None],
    *,
    only: frozenset[str] | None,
    record_lost: bool,
    now: datetime,
    new_id: Callable[[], str],
    forgetting: frozenset[str] = frozenset(),
) -> list[Action]:
    """Return the actions that answer ``findings``, in a stable order. Pure.

    Args:
        findings: check's findings on ``inventory``.
        inventory: the captured stores the findings came from.
        recoveries: per missing memory id, the snapshot to recover it from, or None.
        only: limit to these codes (required for the policy codes).
        record_lost: record an unrecoverable missing memory as deleted (a DELETE event).
        now: the current time (UTC), for event rows.
        new_id: makes ``memsync-<uuid4>`` ids for event rows (kept in the journal).
        forgetting: memory ids of a forget that did not finish: closed, never recovered.
    """
    wanted = only if only is not None else DAMAGE_CODES
    actions: list[Action] = []
    by_memory: dict[str, set[str]] = defaultdict(set)
    listed = sorted(findings, key=Finding.sort_key)
    for finding in listed:
        if finding.memory_id:
            by_memory[finding.memory_id].add(finding.code)
    stamp = now.isoformat()
    entity_dead: dict[str, set[str]] = defaultdict(set)
    for finding in listed:
        if finding.severity is Severity.INFO or finding.code not in wanted:
            continue
        memory_id = finding.memory_id
        point = inventory.points.get(memory_id) if memory_id else None
        last = inventory.history[memory_id].last if memory_id and memory_id in inventory.history else None

        def add(kind: str, why: str, code: str = finding.code, target: str | None = memory_id, **params: Any) -> None:
            actions.append(Action(index=len(actions), kind=kind, code=code, memory_id=target, why=why, params=params))

        code = finding.code
        if code == "resurrected-point":
            add("delete-point", "its last history event is DELETE: tombstones win, delete it through mem0")
        elif code == "missing-point" and memory_id and last is not None:
            source = recoveries.get(memory_id)
            if memory_id in forgetting:
                add("record-event", "a forget was deleting it when memsync stopped: close it with its DELETE "
                    "event (never brought back)",
                    row=_event_row(memory_id, "DELETE", last.new_memory, None, last.created_at, stamp, new_id()))
            elif source is not None:
                add("restore-point", f"history says it is live; snapshot {source.snapshot_id} holds it with "
                    "the text history expects: put it back with its original id, vector and payload",
                    snapshot_id=source.snapshot_id, storage=str(source.storage), text=last.new_memory)
            elif record_lost:
                add("record-event", "no snapshot holds it with the expected text: recorded as lost "
                    "(--record-lost), with a DELETE event",
                    row=_event_row(memory_id, "DELETE", last.new_memory, None, last.created_at, stamp, new_id()))
            else:
                add("report", "no snapshot holds it with the text history expects (or something newer says "
                    "it was deleted): not invented; pass --record-lost to record it as lost", status="unrecoverable")
        elif code == "orphan-point" and point is not None:
            add("record-event", "real content whose history write failed or was lost: keep it and record "
                "the missing ADD",
                row=_event_row(memory_id or point.id, "ADD", None, _text(point), _payload_time(point, "created_at"),
                               _payload_time(point, "updated_at"), new_id()))
        elif code == "history-missing":
            for orphan in sorted(inventory.points.values(), key=lambda p: p.id):
                add("record-event", "history.db lost its rows: record the ADD of every point", target=orphan.id,
                    row=_event_row(orphan.id, "ADD", None, _text(orphan), _payload_time(orphan, "created_at"),
                                   _payload_time(orphan, "updated_at"), new_id()))
        elif code == "text-mismatch" and point is not None and last is not None:
            point_at = parse_time(point.payload.get("updated_at")) or parse_time(point.payload.get("created_at"))
            history_at = last.at
            if point_at is not None and (history_at is None or point_at > history_at):
                add("record-event", "the point is newer than the last event: record the UPDATE it missed",
                    row=_event_row(memory_id or point.id, "UPDATE", last.new_memory, _text(point),
                                   _payload_time(point, "created_at"), _payload_time(point, "updated_at"), new_id()))
                if "hash-mismatch" in by_memory[point.id]:
                    add("update-point", "and its hash is stale: rewrite it through mem0", code="hash-mismatch",
                        text=_text(point))
            else:
                add("update-point", "history is newer (or the same age): update the point through mem0, "
                    "which re-embeds the text", text=last.new_memory)
        elif code == "hash-mismatch" and point is not None:
            if "text-mismatch" in by_memory[point.id] and "text-mismatch" in wanted:
                continue  # answered with the text-mismatch
            add("update-point", "payload hash is not the md5 of its text: rewrite it through mem0", text=_text(point))
        elif code == "missing-payload":
            if last is not None and last.event in check.LIVE_EVENTS and last.new_memory is not None:
                add("update-point", "the point lost its text: write history's text back through mem0",
                    text=last.new_memory)
            else:
                add("report", "the point lost its text and history does not know it", status="unrecoverable")
        elif code == "dangling-entity-link" and memory_id:
            for entity in inventory.entities:
                if memory_id in entity.linked_memory_ids:
                    entity_dead[entity.entity_id].add(memory_id)
        elif code == "dimension-mismatch" and point is not None:
            add("report", "its vector has the wrong size, and qdrant-client 1.20 cannot even open a collection "
                "with mixed sizes, so mem0 cannot repair it: restore a snapshot (memsync restore)",
                status="unrecoverable")
        elif code in ("collection-missing", "dimension-mismatch"):
            add("report", "not something reconcile can repair: restore the deployment from a snapshot "
                "(memsync restore) or fix the config", target=finding.collection, status="unrecoverable")
        elif code in ("duplicate-memory", "expired-memory"):
            add("delete-point", "policy requested with --only: delete it through mem0")
        elif code == "orphan-messages":
            scope = finding.message.split("session scope ", 1)[-1].split(" remain", 1)[0].strip("'\"")
            add("delete-messages", "policy requested with --only: delete the raw messages of a scope with no "
                "memory left", target=None, scope=scope)
    for entity in inventory.entities:
        dead = entity_dead.get(entity.entity_id)
        if dead:
            remaining = [m for m in entity.linked_memory_ids if m not in dead]
            actions.append(Action(index=len(actions), kind="relink-entity", code="dangling-entity-link",
                                  memory_id=sorted(dead)[0],
                                  why=f"entity {entity.entity_id} links memories with no point: "
                                  + ("delete the entity (no link remains)" if not remaining else "drop those links"),
                                  params={"entity_id": entity.entity_id, "remaining": remaining}))
    return [
        replace(a, status=a.params.pop("status")) if "status" in a.params else a
        for a in actions
    ]


def _text(point: Point) -> str | None:
    value = point.payload.get("data")
    return value if isinstance(value, str) else None


def _payload_time(point: Point, key: str) -> str | None:
    value = point.payload.get(key)
    return value if isinstance(value, str) else None


def vectors_newer_than_history(inventory: Inventory) -> bool:
    """Tell whether the newest point is clearly newer than the newest history event. Pure.

    That is what an old history.db put back over newer vectors looks like: a missing point
    may then have been deleted since, so it must not be brought back.
    """
    point_times = [parse_time(p.payload.get("updated_at")) or parse_time(p.payload.get("created_at"))
                   for p in inventory.points.values()]
    event_times = [m.last.at for m in inventory.history.values()]
    newest_point = max((t for t in point_times if t is not None), default=None)
    newest_event = max((t for t in event_times if t is not None), default=None)
    if newest_point is None or newest_event is None:
        return False
    return newest_point > newest_event + VECTORS_NEWER_MARGIN


# --- I/O half ----------------------------------------------------------------------------------


def find_recoveries(config: Config, inventory: Inventory, missing: Iterable[str], work: Path) -> dict[str, Recovery | None]:
    """Find, for each missing memory, the newest local snapshot holding it with the expected text.

    A snapshot whose history ends the memory with DELETE blocks it (never brought back), and
    so do vectors evidently newer than history. Reads snapshots (decrypting into ``work``).
    """
    wanted = {m: inventory.history[m].last for m in missing if m in inventory.history}
    found: dict[str, Recovery | None] = dict.fromkeys(wanted)
    if not wanted or vectors_newer_than_history(inventory) or config.snapshot.directory is None:
        return found
    blocked: set[str] = set()
    complete = [s for s in snapshots.iter_local(config.snapshot.directory) if s.complete]
    for info in sorted([*complete, *_remote_only(config, complete)], key=lambda s: s.id, reverse=True):
        pending = [m for m in wanted if found[m] is None and m not in blocked]
        if not pending:
            break
        if info.path.name.startswith("remote:"):
            info = _download(config, info)
        if not _checksums_hold(info, inventory.collection):
            logger.warning("snapshot_skipped", snapshot_id=info.id, reason="files differ from the manifest")
            continue
        root = _plaintext_root(config, info, work)
        storage = local_qdrant.storage_path(root / "qdrant", inventory.collection)
        contents = history.read_contents(root / "history.db") if (root / "history.db").is_file() else None
        for memory_id in pending:
            snap_last = contents.memories.get(memory_id) if contents else None
            if snap_last is not None and snap_last.last.event == "DELETE":
                blocked.add(memory_id)  # a snapshot says it was deleted: never bring it back
                continue
            if not storage.is_file():
                continue
            stored = local_qdrant.find_point(storage, memory_id)
            if stored is not None and stored[0].get("data") == wanted[memory_id].new_memory:
                found[memory_id] = Recovery(snapshot_id=info.id, storage=storage)
    return found


def _remote_only(config: Config, local: list[snapshots.SnapshotInfo]) -> list[snapshots.SnapshotInfo]:
    """Complete remote snapshots with no local copy (placeholders, downloaded when reached)."""
    if config.s3 is None:
        return []
    have = {info.id for info in local}
    return [
        snapshots.SnapshotInfo(id=item["id"], path=Path(f"remote:{item['id']}"), complete=True,
                               manifest=item["manifest"], verified=None, size_bytes=0)
        for item in snapshot.remote_candidates(snapshot.object_store(config))
        if item["complete"] and item["id"] not in have
    ]


def _download(config: Config, info: snapshots.SnapshotInfo) -> snapshots.SnapshotInfo:
    """Download a remote snapshot into the snapshot directory, verified byte for byte."""
    assert config.snapshot.directory is not None
    store = snapshot.object_store(config)
    path = snapshot.download_snapshot(config, store, info.id, config.snapshot.directory)
    described = snapshots.describe(path)
    assert described is not None
    return described


def _checksums_hold(info: snapshots.SnapshotInfo, collection: str) -> bool:
    """Whether the snapshot's history.db and memory collection match their manifest (stored bytes)."""
    wanted = {"history.db", f"qdrant/collection/{collection}/storage.sqlite"}
    for entry in (info.manifest or {}).get("files", []):
        if entry["path"] in wanted:
            path = info.path / str(entry["path"])
            expected = (int(entry.get("stored_size", entry["size"])), str(entry.get("stored_sha256", entry["sha256"])))
            if not path.is_file() or snapshots.sha256_file(path) != expected:
                return False
    return True


def _plaintext_root(config: Config, info: snapshots.SnapshotInfo, work: Path) -> Path:
    if not (info.manifest or {}).get("encryption"):
        return info.path
    from memsync import seal

    key = seal.load_key(config.snapshot.encrypt_key_file) if config.snapshot.encrypt_key_file else None
    root = work / info.id
    if key is None or root.exists():
        return root
    seal.open_files(info.path, [str(e["path"]) for e in (info.manifest or {}).get("files", [])], key, root)
    return root


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a reconcile run did: the plan (with statuses) and the check after it."""

    plan_id: str
    actions: tuple[Action, ...]
    dry_run: bool
    resumed: bool
    snapshot_id: str | None
    after: CheckReport | None

    @property
    def exit_code(self) -> ExitCode:
        """3 for a dry run with work; 4 when an action failed or was unrecoverable; else 0."""
        if self.dry_run:
            work = [a for a in self.actions if a.kind != "report"]
            return ExitCode.PROBLEMS_FOUND if work or self.actions else ExitCode.OK
        if any(a.status in ("failed", "unrecoverable") for a in self.actions):
            return ExitCode.PARTIAL
        if self.after is not None and not self.after.ok:
            return ExitCode.PARTIAL  # errors remain that no action answered
        return ExitCode.OK


def journal_path(config: Config) -> Path:
    """Where the running plan is journaled."""
    return config.state_dir / JOURNAL


def save_journal(config: Config, plan_id: str, actions: Iterable[Action], status: str) -> None:
    """Write the journal atomically."""
    write_json_atomic(journal_path(config), {"plan_id": plan_id, "status": status,
                                             "actions": [asdict(a) for a in actions]})


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
        raise UnavailableError(f"reconcile journal {path} is unreadable ({type(error).__name__})",
                               "move it aside; the next reconcile plans afresh from a new check") from error


def apply_action(action: Action, writer: mem0.Mem0Writer, config: Config) -> Action:
    """Apply one action through the writer, idempotently (its effect already present: done).

    Returns the action with its status (``done``, ``failed`` with an error, ``unrecoverable``).
    mem0 errors propagate (``_apply_all`` records them as ``failed``).
    """
    kind, memory_id = action.kind, str(action.memory_id)
    if kind not in KNOWN_KINDS:
        return replace(action, status="failed", error=f"unknown action kind {kind!r}")
    if kind == "report":
        return action if action.status != "pending" else replace(action, status="unrecoverable")
    if kind == "delete-point":
        writer.delete(memory_id)
    elif kind == "restore-point":
        if not writer.exists(memory_id):
            stored = _stored_point(action, config)
            if stored is None or stored.vector is None:
                return replace(action, status="failed", error="the snapshot no longer holds the point")
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


def _stored_point(action: Action, config: Config) -> StoredPoint | None:
    """The point a ``restore-point`` puts back, read from its snapshot (decrypted again if need be)."""
    store = vector_store_for(config)
    storage = Path(action.params["storage"])
    root = storage.parents[2] if len(storage.parents) > 2 else storage  # the journal names the file
    if storage.is_file() and store.collection_file(config.collection, root) == storage:
        return store.find_point(root, config.collection, str(action.memory_id))
    # decrypted into a work directory that is gone: again
    info = snapshots.describe(snapshot_path(config, action.params["snapshot_id"]))
    scratch = Path(tempfile.mkdtemp(dir=config.work_dir, prefix="reconcile-"))
    try:
        root = _plaintext_root(config, info, scratch) if info else scratch
        return store.find_point(root / store.capture_dir, config.collection, str(action.memory_id))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def snapshot_path(config: Config, snapshot_id: str) -> Path:
    """The local directory of a snapshot id."""
    assert config.snapshot.directory is not None
    return config.snapshot.directory / snapshot_id


def run_reconcile(
    config: Config,
    now: datetime,
    *,
    dry_run: bool,
    only: frozenset[str] | None,
    take_snapshot: bool,
    record_lost: bool,
) -> Outcome:
    """Check, plan, then (unless ``dry_run``) snapshot, journal and apply; finally check again.

    An unfinished journal from a reconcile that died is resumed first (its pending actions
    only). Needs the embedded store free (exit 12 otherwise).

    Raises:
        LockedError: the app holds the store.
        ConfigError: mem0 cannot be built or its embedder fails the probe.
        UnavailableError, TryLaterError: as ``check``.
    """
    resumed = load_journal(config) if not dry_run else None
    snapshot_id = None
    if resumed is not None:
        plan_id, actions = resumed
        mem0.require_store_free(config, "reconcile")
        mem0.prepare_for_writing(config)
        actions = revalidate(actions, check.settled_inventory(config, now)[1])
    else:
        plan_id = uuid.uuid4().hex[:12]
        if not dry_run:
            mem0.require_store_free(config, "reconcile")
            mem0.prepare_for_writing(config)
        inventory, report = check.settled_inventory(config, now)
        missing = [f.memory_id for f in report.findings if f.code == "missing-point" and f.memory_id]
        config.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryDirectory(dir=config.work_dir, prefix="reconcile-") as work:
            recoveries = find_recoveries(config, inventory, missing, Path(work))
        actions = plan_reconcile(report.findings, inventory, recoveries, only=only, record_lost=record_lost,
                                 now=now, new_id=lambda: f"memsync-{uuid.uuid4()}",
                                 forgetting=frozenset(load_forgetting(config.state_dir)))
        if dry_run or not actions:
            return Outcome(plan_id=plan_id, actions=tuple(actions), dry_run=dry_run, resumed=False,
                           snapshot_id=None, after=report if not actions else None)
        mem0.require_store_free(config, "reconcile")
        if take_snapshot and any(a.kind != "report" for a in actions):
            snapshot_id = snapshot.create_snapshot(config, now).id
        save_journal(config, plan_id, actions, "running")
    actions = _apply_all(config, plan_id, actions)
    after = check.run_check(config, now)
    return Outcome(plan_id=plan_id, actions=tuple(actions), dry_run=False, resumed=resumed is not None,
                   snapshot_id=snapshot_id, after=after)


def revalidate(actions: list[Action], report: CheckReport) -> list[Action]:
    """On resume, keep a pending action only while its finding still stands. Pure.

    The stores may have changed since the plan was made (the app ran, someone deleted or
    edited a memory): an action whose finding is gone is ``superseded``, never applied blindly.
    """
    standing = {(f.code, f.memory_id) for f in report.findings if f.severity is not Severity.INFO}
    standing |= {("dangling-entity-link", f.memory_id) for f in report.findings if f.code == "dangling-entity-link"}
    kept = []
    for action in actions:
        if action.status == "pending" and action.kind != "report" and (action.code, action.memory_id) not in standing:
            action = replace(action, status="superseded", why=action.why + " (superseded: the finding is gone)")
        kept.append(action)
    return kept


def _apply_all(config: Config, plan_id: str, actions: list[Action]) -> list[Action]:
    if not any(a.status == "pending" and a.kind != "report" for a in actions):
        actions = [replace(a, status="unrecoverable") if a.status == "pending" else a for a in actions]
        save_journal(config, plan_id, actions, "done")
        return actions  # nothing to write: mem0 is not even built
    with mem0.open_memory(config) as writer:
        if any(a.kind in NEEDS_EMBEDDER and a.status == "pending" for a in actions):
            writer.probe_embedder()
        writer.touch_entity_store()
        for position, action in enumerate(actions):
            if action.status != "pending":
                continue
            try:
                actions[position] = apply_action(action, writer, config)
            except Exception as error:  # noqa: BLE001 - a failed action is recorded, never fatal
                actions[position] = replace(action, status="failed", error=f"{type(error).__name__}: {error}")
            logger.info("reconcile_action", kind=action.kind, code=action.code, memory_id=action.memory_id,
                        status=actions[position].status)
            save_journal(config, plan_id, actions, "running")
    save_journal(config, plan_id, actions, "done")
    return actions
