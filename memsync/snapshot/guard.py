"""The tripwire's I/O half: compare a new snapshot with the one before it, pin that one on a drop.

``run_tripwire`` is called by ``snapshot create`` once the new snapshot is committed. It picks the
previous complete snapshot (``tripwire.choose_baseline``: local first, the bucket when no local
one), compares the scope counts of both manifests (``tripwire.find_drops``) and, when the
tripwire trips, reads the previous snapshot's memory collection (in place, or its one file
downloaded into a scratch directory under ``work_dir`` that is removed after) to tell, per
scope, the memories deleted through mem0 (a DELETE history event in the new capture) from those
that vanished without one (``tripwire.split_drops``), then pins the previous snapshot
(``pins.pin``, ``by="tripwire"``) on every side where it is stored, so retention keeps it until
an operator runs ``memsync snapshot unpin``. Nothing here fails the snapshot: an unreadable
repository means no baseline, an unreadable previous snapshot leaves the split unknown, a
refused pin is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import findings, repository
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.erase import ledger as erasures
from memsync.errors import MemsyncError
from memsync.model import SCOPE_KINDS, TOTAL, Finding, Inventory
from memsync.repository import Entry, SnapshotRepository, reading
from memsync.snapshot import pins
from memsync.snapshot.tripwire import (
    Drop,
    Thresholds,
    choose_baseline,
    erased_before,
    find_drops,
    split_drops,
)
from memsync.stores import history
from memsync.stores.manifest import Manifest

logger = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class TripwireResult:
    """What the tripwire found for one new snapshot.

    Attributes:
        snapshot_id: the new snapshot.
        thresholds: the configured thresholds (``enabled`` False: nothing was compared).
        previous: the snapshot compared with, or None.
        previous_side: ``"local"`` or ``"remote"`` (where ``previous`` was read), or None.
        no_baseline: why nothing was compared (no earlier snapshot, one without scope counts,
            an unreadable repository), or None.
        drops: the scopes beyond the thresholds (empty: not tripped).
        pinned_on: the sides (``local``, ``remote``) where ``previous`` was pinned.
        pin_errors: one line per side where pinning failed.
        erased_memories: memories of ``previous`` that ``forget --erase`` erased since (the
            erasure ledger, capped by what ``previous`` held): taken out before comparing.
        deleted_memories, vanished_memories: of ``previous``'s memories gone since, those with
            a DELETE history event in the new capture (erased ones left out) and those without
            one; None when the split was not made (not tripped, or ``split_unknown``).
        split_unknown: why the previous snapshot's memories could not be read, or None.
    """

    snapshot_id: str
    thresholds: Thresholds
    previous: str | None = None
    previous_side: str | None = None
    no_baseline: str | None = None
    drops: tuple[Drop, ...] = ()
    pinned_on: tuple[str, ...] = ()
    pin_errors: tuple[str, ...] = ()
    erased_memories: int = 0
    deleted_memories: int | None = None
    vanished_memories: int | None = None
    split_unknown: str | None = None

    @property
    def errors(self) -> bool:
        """True when memories vanished with no DELETE event (``vanished-memories``: exit 3)."""
        return bool(self.vanished_memories)

    @property
    def tripped(self) -> bool:
        """True when a scope (or the whole store) dropped beyond the thresholds."""
        return bool(self.drops)

    @property
    def pinned(self) -> str | None:
        """The snapshot pinned by this run (on at least one side), or None."""
        return self.previous if self.pinned_on else None

    def findings(self) -> list[Finding]:
        """Per drop, a ``mass-deletion`` warning and/or a ``vanished-memories`` error.

        The warning for memories deleted through mem0 (or when the split is unknown), the error
        for memories that vanished with no DELETE event; ``scope``, ``expected`` (memories
        before) and ``observed`` (after) on both.
        """
        found = []
        for drop in self.drops:
            counts = f"{drop.label}: {drop.before} -> {drop.after} memories (-{drop.percent}%)"
            since = f"since snapshot {self.previous}"
            messages = []
            if drop.vanished:
                messages.append(
                    (
                        "vanished-memories",
                        f"{counts}: {drop.vanished} vanished with no DELETE history event "
                        f"{since} (check calls each a missing-point)",
                    )
                )
            if not drop.vanished or drop.deleted:  # unknown (None), none vanished, or both
                split = "" if drop.deleted is None else f", {drop.deleted} deleted through mem0"
                messages.append(("mass-deletion", f"{counts}{split} {since}"))
            found += [
                findings.make(
                    code, message, scope=drop.scope, expected=drop.before, observed=drop.after
                )
                for code, message in messages
            ]
        return found

    def to_json(self) -> dict[str, Any]:
        """The ``snapshot create --json`` ``tripwire`` object (docs/reference/json-output.md)."""
        return {
            "enabled": self.thresholds.enabled,
            "tripped": self.tripped,
            "percent": self.thresholds.percent,
            "memories": self.thresholds.memories,
            "previous": self.previous,
            "previous_side": self.previous_side,
            "no_baseline": self.no_baseline,
            "drops": [drop.to_json() for drop in self.drops],
            "pinned": self.pinned,
            "pinned_on": list(self.pinned_on),
            "pin_errors": list(self.pin_errors),
            "erased_memories": self.erased_memories,
            "deleted_memories": self.deleted_memories,
            "vanished_memories": self.vanished_memories,
            "split_unknown": self.split_unknown,
        }

    def report(self) -> dict[str, Any]:
        """The keys ``snapshot create --json`` adds: ``findings`` and ``tripwire``."""
        return {
            "findings": [finding.to_json() for finding in self.findings()],
            "tripwire": self.to_json(),
        }

    def text(self) -> str:
        """The text report's tripwire line(s), each starting with a newline."""
        if not self.thresholds.enabled:
            return "\ntripwire: disabled ([snapshot] tripwire_percent or tripwire_memories is 0)"
        if self.no_baseline is not None:
            return f"\ntripwire: no baseline ({self.no_baseline})"
        erased = (
            f" ({self.erased_memories} memories erased on purpose since, left out)"
            if self.erased_memories
            else ""
        )
        if not self.tripped:
            return f"\ntripwire: no mass deletion since snapshot {self.previous}{erased}"
        dropped = ", ".join(
            f"{d.label} {d.before} -> {d.after} (-{d.percent}%)" for d in self.drops
        )
        lines = f"\nWARNING mass-deletion since snapshot {self.previous}: {dropped}"
        if self.split_unknown is not None:
            lines += f"\n  deleted or vanished: unknown ({self.split_unknown})"
        elif self.deleted_memories is not None:
            lines += "".join(
                f"\n  {d.label}: {d.deleted} deleted through mem0 (DELETE history events), "
                f"{d.vanished} vanished without one"
                + (" (ERROR vanished-memories)" if d.vanished else "")
                for d in self.drops
            )
        if self.vanished_memories and any(
            d.kind == "total" and d.after == 0 and not d.deleted for d in self.drops
        ):  # every memory gone and none deleted: a wrong path or a lost store, not a drift
            lines += (
                f"\n  ERROR {self.vanished_memories} memories vanished with no DELETE history event, "
                "and nothing is left: check the path first (memsync config show), a wrong path "
                "looks exactly like a lost store; if it is right: memsync restore "
                f"{self.pinned or self.previous}"
            )
        elif self.vanished_memories:
            lines += (
                f"\n  ERROR {self.vanished_memories} memories vanished with no DELETE history event "
                "(check calls them missing-point): memsync reconcile puts them back from the "
                "newest snapshot holding them"
            )
        if self.pinned:
            lines += (
                f"\n  pinned {self.pinned} ({', '.join(self.pinned_on)}) until "
                f"memsync snapshot unpin {self.pinned}"
            )
        return lines + "".join(f"\n  NOT pinned: {error}" for error in self.pin_errors)


def run_tripwire(
    deployment: Deployment,
    local: SnapshotRepository,
    manifest: Manifest,
    now: datetime,
    inventory: Callable[[], Inventory] | None = None,
) -> TripwireResult:
    """Compare ``manifest`` (just committed) with the previous snapshot; pin that one on a drop.

    Reads the local repository, and the bucket when ``[s3]`` is set and no earlier local snapshot
    exists; on a drop reads the previous snapshot's memory collection and splits each drop by
    ``inventory()`` (the new capture's points and history, read only then) into memories deleted through mem0
    and memories vanished without a DELETE event, then writes ``pinned.json`` beside the
    previous snapshot on every side holding it (atomically; pinning again replaces the reason).
    Logs ``mass_deletion_suspected`` (warning, counts only: no scope ids above debug). Never
    raises a MemsyncError: an unreadable repository becomes ``no_baseline``, an unreadable
    previous snapshot ``split_unknown``, a refused pin a ``pin_errors`` line.
    """
    config = deployment.config
    snapshot = config.snapshot
    thresholds = Thresholds(percent=snapshot.tripwire_percent, memories=snapshot.tripwire_memories)
    result = TripwireResult(snapshot_id=manifest.id, thresholds=thresholds)
    if not thresholds.enabled:
        return result
    baseline, side, why = _baseline(config, local, manifest.id)
    if baseline is None or baseline.manifest is None:
        return _no_baseline(result, why or "no earlier complete snapshot")
    result = TripwireResult(
        snapshot_id=manifest.id, thresholds=thresholds, previous=baseline.id, previous_side=side
    )
    if baseline.manifest.scopes is None or manifest.scopes is None:
        why = f"snapshot {baseline.id} has no scope counts (made by an older memsync)"
        return _no_baseline(result, why)
    erased = _erased_since(config, baseline.created_at)
    left_out = erased_before(baseline.manifest.scopes, erased)
    result = replace(result, erased_memories=left_out)
    drops = tuple(find_drops(baseline.manifest.scopes, manifest.scopes, thresholds, erased))
    if not drops:
        return result
    if inventory is not None:
        result, drops = _split(
            deployment, local, baseline, side, manifest, inventory, result, drops
        )
    pinned_on, errors = _pin_everywhere(
        config, local, baseline.id, _reason(drops, manifest.id, result.vanished_memories), now
    )
    tripped = replace(result, drops=drops, pinned_on=pinned_on, pin_errors=errors)
    _log_tripped(tripped)
    return tripped


def _baseline(
    config: Config, local: SnapshotRepository, new_id: str
) -> tuple[Entry | None, str | None, str | None]:
    """The previous complete snapshot, the side it was read from, and why there is none."""
    try:
        found = choose_baseline(new_id, local.list(), ())
    except (MemsyncError, OSError) as error:
        return None, None, f"local snapshots unreadable: {error}"
    if found is not None:
        return found, "local", None
    if config.s3 is None:
        return None, None, None
    try:
        found = choose_baseline(new_id, (), repository.remote(config).list())
    except MemsyncError as error:
        # info: the report says it, and an upload to the same bucket fails with the real error
        logger.info("tripwire_remote_unreadable", snapshot_id=new_id, error=str(error))
        return None, None, f"no earlier local snapshot, and the bucket is unreadable: {error}"
    return found, ("remote" if found is not None else None), None


def _split(
    deployment: Deployment,
    local: SnapshotRepository,
    baseline: Entry,
    side: str | None,
    manifest: Manifest,
    inventory: Callable[[], Inventory],
    result: TripwireResult,
    drops: tuple[Drop, ...],
) -> tuple[TripwireResult, tuple[Drop, ...]]:
    """The drops split into deleted and vanished memories (``result`` says how many in all)."""
    config = deployment.config
    assert baseline.manifest is not None and baseline.manifest.scopes is not None
    assert manifest.scopes is not None
    try:
        repo = local if side == "local" else deployment.remote
        members = _members(deployment, repo, baseline.id, baseline.manifest)
        new = inventory()
        try:
            erased = erasures.erased_ids(config.state_dir)
        except MemsyncError:
            erased = set()
    except (MemsyncError, OSError) as error:
        why = error.message if isinstance(error, MemsyncError) else str(error)
        logger.info("tripwire_split_unknown", snapshot_id=manifest.id, reason=why)
        return replace(result, split_unknown=f"snapshot {baseline.id} unreadable: {why}"), drops
    gone = members.get((TOTAL, None), set()) - set(new.points) - erased
    deleted = {m for m in gone if m in new.history and new.history[m].last.event == "DELETE"}
    # a delete in flight at the capture (in-flight, the capture's unsettled) whose DELETE event
    # has landed in the live history since; any other stays vanished
    deleted |= _deleted_since(
        config.history_db_path, gone & set(manifest.check.get("unsettled") or ())
    )
    vanished = gone - deleted
    split = tuple(
        split_drops(drops, baseline.manifest.scopes, manifest.scopes, members, deleted, vanished)
    )
    return replace(result, deleted_memories=len(deleted), vanished_memories=len(vanished)), split


def _deleted_since(history_db: Path, memory_ids: Set[str]) -> set[str]:
    """Those of ``memory_ids`` whose last event in the live history is a DELETE. Reads only.

    None of them when history.db cannot be read: each stays vanished, the alarm.
    """
    deleted = set()
    try:
        for memory_id in sorted(memory_ids):
            events = list(history.iter_events(history_db, memory_id))
            if events and events[-1].event == "DELETE":
                deleted.add(memory_id)
    except MemsyncError:
        return set()
    return deleted


def _members(
    deployment: Deployment, repo: SnapshotRepository, snapshot_id: str, manifest: Manifest
) -> dict[tuple[str, str | None], set[str]]:
    """The memory ids of a snapshot per scope (``(TOTAL, None)``: all), from its collection.

    Reads its vector index and memory collection only: in place, or downloaded into a scratch
    directory under ``work_dir`` that is removed after.
    """
    config = deployment.config
    store = deployment.vector_store
    paths = [f"{store.capture_dir}/{store.index_file}"] + [
        f"{store.capture_dir}/{name}" for name in store.capture_names(manifest.collection)
    ]  # the manifest lists one of the names: open_files leaves the others out
    members: dict[tuple[str, str | None], set[str]] = {(TOTAL, None): set()}
    with reading.scratch(config, "tripwire") as area:
        opened = reading.open_files(config, repo, snapshot_id, paths, area)
        capture = store.open_capture(
            opened.root / store.capture_dir,
            manifest.capture.vectors_at,
            manifest.capture.vectors_finished_at,
        )
        for point in store.iter_points(capture, manifest.collection):
            members[(TOTAL, None)].add(point.id)
            for kind in SCOPE_KINDS:
                value = point.payload.get(kind)
                if value is not None and value != "":
                    members.setdefault((kind, str(value)), set()).add(point.id)
    return members


def _erased_since(config: Config, since: datetime) -> dict[str, int]:
    """Memories erased at or after ``since`` (UTC), per the erasure ledger. Reads only.

    An unreadable ledger explains nothing: none, so the drop then trips.
    """
    try:
        return erasures.erased_counts(config.state_dir, since)
    except MemsyncError:
        return {}


def _no_baseline(result: TripwireResult, why: str) -> TripwireResult:
    logger.info("tripwire_no_baseline", snapshot_id=result.snapshot_id, reason=why)
    return TripwireResult(
        snapshot_id=result.snapshot_id,
        thresholds=result.thresholds,
        previous=result.previous,
        previous_side=result.previous_side,
        no_baseline=why,
    )


def _reason(drops: tuple[Drop, ...], new_id: str, vanished: int | None = None) -> str:
    """The pin's reason: how many memories and scopes dropped, before the snapshot that saw it.

    Counts only, never a scope's id: a pin outlives erasures (``purge-memory`` rewrites the
    manifest's ``scopes`` but keeps the pin), so it must not name a user. The ids are in the
    create report's findings and in the two manifests' ``scopes``.
    """
    total = next((d for d in drops if d.kind == "total"), None)
    counted: dict[str, int] = {}
    for drop in drops:
        if drop.kind != "total":
            counted[drop.kind] = counted.get(drop.kind, 0) + 1
    parts = [f"all memories {total.before} -> {total.after}"] if total else []
    parts += [f"{n} {kind} scope(s) dropped" for kind, n in counted.items()]
    if vanished:
        parts.append(f"{vanished} memories vanished with no DELETE event")
    return f"mass-deletion before snapshot {new_id}: {', '.join(parts)}"


def _pin_everywhere(
    config: Config, local: SnapshotRepository, snapshot_id: str, reason: str, now: datetime
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Pin ``snapshot_id`` on each side storing it; returns the sides pinned and one line per failure."""
    sides: list[tuple[str, SnapshotRepository]] = [("local", local)]
    if config.s3 is not None:
        sides.append(("remote", repository.remote(config)))
    pinned, errors = [], []
    for name, side in sides:
        try:
            if not side.exists(snapshot_id):
                continue
            pins.pin(side, snapshot_id, reason=reason, by="tripwire", now=now)
        except (MemsyncError, OSError) as error:
            logger.warning(
                "tripwire_pin_failed", snapshot_id=snapshot_id, side=name, error=str(error)
            )
            errors.append(f"{name} {side.location(snapshot_id)}: {error}")
            continue
        pinned.append(name)
    return tuple(pinned), tuple(errors)


def _log_tripped(result: TripwireResult) -> None:
    """One warning with counts only; the scope ids at debug (they are user data)."""
    total = next((d for d in result.drops if d.scope_id is None), None)
    logger.warning(
        "mass_deletion_suspected",
        snapshot_id=result.snapshot_id,
        previous_snapshot_id=result.previous,
        scope_count=sum(1 for d in result.drops if d.scope_id is not None),
        total_before=total.before if total else None,
        total_after=total.after if total else None,
        dropped_memories=max(d.dropped for d in result.drops),
        deleted_memories=result.deleted_memories,
        vanished_memories=result.vanished_memories,
        pinned_on=list(result.pinned_on),
    )
    for drop in result.drops:
        logger.debug("mass_deletion_scope", scope=drop.label, before=drop.before, after=drop.after)
