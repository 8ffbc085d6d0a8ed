"""The slice planner of scheduled verification (restic's ``check --read-data-subset``). Pure.

Each scheduled run (``snapshot verify --scheduled``, the daemon's ``verify`` job) verifies the
newest complete snapshot of a side (a directory, a bucket) completely, and of the side's other
complete snapshots a *slice*: the files read back least recently. The record of when each file
was last read back and matched (``LastRead``) is kept by the caller in the state directory.

Slice size. With ``B`` the stored bytes of the side's other complete snapshots, ``C`` the
``[snapshot] verify_cycle`` and ``I`` the interval between two runs (``[daemon] verify_every``;
one day for ``verify_at``, a timer or runs by hand)::

    runs   = max(1, floor(C / I))      # runs in one cycle
    budget = ceil(B / runs)            # bytes per run

A run takes units in order of their last read (never read first, then the oldest; ties by
snapshot id, then path) as long as they fit in the budget (a file is never split, and the
first unit is taken even when it alone is larger), and also every unit whose last read (for a
unit never read: its snapshot's creation) would be a full cycle old before the next run
(``last_read + C <= now + I``), whatever the budget. So every stored byte is read back at
least once per cycle even when runs were missed or snapshots were added; in the steady state
a run reads about ``B / runs`` bytes. Snapshots that were never read when scheduled
verification starts (an upgrade) and are already older than a cycle are all read by the first
run.

A unit is one file, except for a snapshot whose last verification did not pass (never
verified, or it failed): that snapshot is one unit, verified completely (contents too).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from memsync import utc

LastRead = Mapping[str, Mapping[str, datetime]]  # snapshot id -> file path -> last good read (UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stored:
    """One complete snapshot of a side, as the planner sees it.

    Attributes:
        snapshot_id: its id.
        files: ``(path, stored bytes)`` of every file its manifest lists, in manifest order.
        verified: its ``verified.json`` says its last verification passed.
        created_at: when it was made (UTC; from its id): a file never read is due one cycle
            after it.
    """

    snapshot_id: str
    files: tuple[tuple[str, int], ...]
    verified: bool
    created_at: datetime

    @property
    def size_bytes(self) -> int:
        """The stored bytes of its files."""
        return sum(size for _path, size in self.files)


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """What one run reads of one snapshot.

    Attributes:
        snapshot_id: the snapshot.
        paths: the files read back (every listed file when ``full``).
        size_bytes: their stored bytes.
        full: verify the whole snapshot (checksums, integrity, decoding, check of the pair);
            otherwise only the bytes of ``paths`` against the manifest.
        reason: ``newest``, ``not verified``, ``never read``, ``read <ISO time>`` (the last
            good read), with ``, due`` when it was taken beyond the budget because it would
            otherwise pass its cycle before the next run.
    """

    snapshot_id: str
    paths: tuple[str, ...]
    size_bytes: int
    full: bool
    reason: str

    def to_json(self) -> dict[str, object]:
        """``{"id", "paths", "size_bytes", "full", "reason"}``."""
        return {
            "id": self.snapshot_id,
            "paths": list(self.paths),
            "size_bytes": self.size_bytes,
            "full": self.full,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SidePlan:
    """One run's reading plan for one side.

    Attributes:
        items: the newest snapshot first (``full``), then the slice in reading order.
        budget_bytes: the slice's budget (``ceil(B / runs)``, see the module docstring).
        other_bytes: ``B``, the stored bytes of the complete snapshots other than the newest.
        total_bytes: the stored bytes of every complete snapshot of the side.
    """

    items: tuple[Item, ...]
    budget_bytes: int
    other_bytes: int
    total_bytes: int

    @property
    def planned_bytes(self) -> int:
        """The bytes the run reads back."""
        return sum(item.size_bytes for item in self.items)


def runs_per_cycle(cycle: timedelta, interval: timedelta) -> int:
    """``max(1, floor(cycle / interval))``: the runs one cycle holds. Pure."""
    if interval <= timedelta(0):
        return 1
    return max(1, math.floor(cycle / interval))


def slice_budget(other_bytes: int, cycle: timedelta, interval: timedelta) -> int:
    """``ceil(other_bytes / runs_per_cycle(cycle, interval))``: bytes per run. Pure."""
    return -(-other_bytes // runs_per_cycle(cycle, interval))


def _units(stored: Stored, last_read: LastRead) -> list[tuple[datetime | None, Item]]:
    """A snapshot's units with the time of their last good read (None: never, for one file)."""
    seen = last_read.get(stored.snapshot_id, {})
    if not stored.verified:
        times = [seen.get(path) for path, _size in stored.files]
        oldest = None if any(t is None for t in times) else min(t for t in times if t is not None)
        item = Item(
            snapshot_id=stored.snapshot_id,
            paths=tuple(path for path, _size in stored.files),
            size_bytes=stored.size_bytes,
            full=True,
            reason="not verified",
        )
        return [(oldest, item)]
    units = []
    for path, size in stored.files:
        when = seen.get(path)
        reason = "never read" if when is None else f"read {utc.iso(when)}"
        item = Item(
            snapshot_id=stored.snapshot_id,
            paths=(path,),
            size_bytes=size,
            full=False,
            reason=reason,
        )
        units.append((when, item))
    return units


def _merge(items: Iterable[Item]) -> list[Item]:
    """Items of the same snapshot made one (paths in taken order), in order of first appearance."""
    merged: dict[str, Item] = {}
    for item in items:
        before = merged.get(item.snapshot_id)
        if before is None or item.full:
            merged[item.snapshot_id] = item
        elif not before.full:
            reasons = before.reason if item.reason == before.reason else "several"
            merged[item.snapshot_id] = Item(
                snapshot_id=item.snapshot_id,
                paths=before.paths + item.paths,
                size_bytes=before.size_bytes + item.size_bytes,
                full=False,
                reason=reasons,
            )
    return list(merged.values())


def plan_side(
    stored: Sequence[Stored],
    last_read: LastRead,
    now: datetime,
    cycle: timedelta,
    interval: timedelta,
) -> SidePlan:
    """Plan one run on one side: the newest snapshot completely, then the slice. Pure.

    Args:
        stored: the side's complete snapshots (any order; the newest is the greatest id).
        last_read: when each file was last read back and matched (UTC).
        now: the run's time (UTC).
        cycle: ``[snapshot] verify_cycle``.
        interval: the time until the next run.

    Returns:
        The plan; ``items`` is empty when there is no complete snapshot.
    """
    ordered = sorted(stored, key=lambda s: s.snapshot_id)
    if not ordered:
        return SidePlan(items=(), budget_bytes=0, other_bytes=0, total_bytes=0)
    newest, others = ordered[-1], ordered[:-1]
    first = Item(
        snapshot_id=newest.snapshot_id,
        paths=tuple(path for path, _size in newest.files),
        size_bytes=newest.size_bytes,
        full=True,
        reason="newest",
    )
    other_bytes = sum(s.size_bytes for s in others)
    budget = slice_budget(other_bytes, cycle, interval)
    created = {s.snapshot_id: s.created_at for s in others}
    units = [unit for s in others for unit in _units(s, last_read)]
    units.sort(key=lambda u: (u[0] is not None, u[0] or now, u[1].snapshot_id, u[1].paths))
    taken: list[Item] = []
    used = 0
    for when, item in units:
        due = (when or created[item.snapshot_id]) + cycle <= now + interval
        if not taken or used + item.size_bytes <= budget:
            taken.append(item)
            used += item.size_bytes
        elif due:
            taken.append(
                Item(
                    snapshot_id=item.snapshot_id,
                    paths=item.paths,
                    size_bytes=item.size_bytes,
                    full=item.full,
                    reason=f"{item.reason}, due",
                )
            )
            used += item.size_bytes
    return SidePlan(
        items=(first, *_merge(taken)),
        budget_bytes=budget,
        other_bytes=other_bytes,
        total_bytes=other_bytes + newest.size_bytes,
    )


def coverage(
    stored: Sequence[Stored], last_read: LastRead, now: datetime, cycle: timedelta
) -> float:
    """The share of a side's stored bytes read back and matched within the last cycle. Pure.

    1.0 for a side with no stored bytes; between 0.0 and 1.0 otherwise.
    """
    total = sum(s.size_bytes for s in stored)
    if total == 0:
        return 1.0
    fresh = 0
    for snapshot in stored:
        seen = last_read.get(snapshot.snapshot_id, {})
        for path, size in snapshot.files:
            when = seen.get(path)
            if when is not None and now - when < cycle:
                fresh += size
    return fresh / total


def record_reads(
    last_read: LastRead,
    reads: Mapping[str, Iterable[str]],
    now: datetime,
    present: Iterable[str],
) -> dict[str, dict[str, datetime]]:
    """The record after a run: ``reads`` (snapshot id -> paths read back and matched) at ``now``.

    Snapshots not in ``present`` (pruned since) are dropped. Pure: returns a new mapping.
    """
    keep = set(present)
    updated = {sid: dict(paths) for sid, paths in last_read.items() if sid in keep}
    for snapshot_id, paths in reads.items():
        if snapshot_id in keep:
            updated.setdefault(snapshot_id, {}).update(dict.fromkeys(paths, now))
    return updated
