"""The mass-deletion tripwire: memory counts per scope, and the drops between two snapshots. Pure.

Each snapshot's manifest records how many memories (points of the memory collection) it holds
in all and per scope: per ``user_id``, ``agent_id`` and ``run_id`` payload value, as mem0ai
2.2.1 stores them (``count_scopes``). ``snapshot create`` compares the new snapshot's counts
with the previous complete snapshot's (``find_drops``); a drop of more than
``[snapshot] tripwire_percent`` percent AND more than ``tripwire_memories`` memories in one
scope, or in the whole store, trips it (mem0 has shipped ``delete_all`` bugs that wiped every
user: mem0ai/mem0 #3746, #3928). Once tripped, every scope that emptied is named too, whatever
its size: the victim of a collection reset beside the user deleted through mem0.
``split_drops`` then says, per named scope, how many of the previous snapshot's memories went
with a DELETE history event and how many vanished without one (those are check's
``missing-point``), and names any other scope that lost memories without one.
``choose_baseline`` picks the snapshot to compare with. The I/O half (reading the repositories
and the previous snapshot's points, pinning, logging) is ``memsync.snapshot.guard``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

from memsync.erase.ledger import digest
from memsync.model import SCOPE_KINDS, TOTAL
from memsync.repository import Entry
from memsync.stores.manifest_schema import ID_PATTERN


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    """When a drop trips the wire: more than ``percent`` % AND more than ``memories`` memories.

    Either at 0 disables the tripwire.
    """

    percent: int
    memories: int

    @property
    def enabled(self) -> bool:
        """False when either threshold is 0."""
        return self.percent > 0 and self.memories > 0

    def trips(self, before: int, after: int) -> bool:
        """Whether going from ``before`` to ``after`` memories reaches both thresholds."""
        dropped = before - after
        return self.enabled and dropped >= self.memories and dropped * 100 >= self.percent * before


@dataclass(frozen=True, slots=True, kw_only=True)
class Drop:
    """One scope whose memories dropped beyond the thresholds.

    Attributes:
        kind: ``"total"`` (the whole store), ``"user_id"``, ``"agent_id"`` or ``"run_id"``.
        scope_id: the scope's id (a user id, ...); None for ``total``.
        before, after: memories in the previous and the new snapshot (``after`` is 0 for a
            scope that vanished).
        deleted: memories of the scope in the previous snapshot gone since with a DELETE
            history event (erasures left out); None when the previous snapshot was not read.
        vanished: those gone with no DELETE event (check's ``missing-point``, or no history
            left at all); None when not read.
    """

    kind: str
    scope_id: str | None
    before: int
    after: int
    deleted: int | None = None
    vanished: int | None = None

    @property
    def dropped(self) -> int:
        """Memories fewer in the new snapshot."""
        return self.before - self.after

    @property
    def percent(self) -> float:
        """The drop as a percentage of ``before`` (one decimal)."""
        return round(100 * self.dropped / self.before, 1) if self.before else 0.0

    @property
    def scope(self) -> str | None:
        """mem0's scope notation (``"user_id=alice"``), or None for the whole store."""
        return None if self.scope_id is None else f"{self.kind}={self.scope_id}"

    @property
    def label(self) -> str:
        """The scope for people: ``user_id=alice`` or ``all memories``."""
        return self.scope or "all memories"

    @property
    def emptied(self) -> bool:
        """True when the scope held memories and the new snapshot has none of it."""
        return self.before > 0 and self.after == 0

    def to_json(self) -> dict[str, Any]:
        """The report's ``drops[]`` object (docs/reference/json-output.md)."""
        return {
            "kind": self.kind,
            "id": self.scope_id,
            "scope": self.scope,
            "before": self.before,
            "after": self.after,
            "dropped": self.dropped,
            "percent": self.percent,
            "emptied": self.emptied,
            "deleted": self.deleted,
            "vanished": self.vanished,
        }


def find_drops(
    previous: Mapping[str, Any],
    current: Mapping[str, Any],
    thresholds: Thresholds,
    erased: Mapping[str, int] | None = None,
) -> list[Drop]:
    """The scopes whose memories dropped beyond ``thresholds`` from ``previous`` to ``current``. Pure.

    Both are manifest ``scopes`` documents (``count_scopes``). A scope new in ``current`` never
    trips; one absent from it has 0 memories. ``erased`` (``memsync.erase.ledger.erased_counts``:
    memories erased on purpose since ``previous``, in all and per hashed scope) is taken out of
    ``previous`` first, never more than ``previous`` held of each scope, so an erasure is never
    taken for a mass deletion, while a bug deleting more in the same scopes still trips. When
    anything trips, every scope that emptied is named too, whatever its size. Returns the whole
    store first (when it trips), then by kind (``user_id``, ``agent_id``, ``run_id``), each by
    largest drop, then id. Empty when the tripwire is disabled or nothing trips.
    """
    if not thresholds.enabled:
        return []
    erased = erased or {}
    drops = []
    before_total = max(0, _count(previous.get(TOTAL)) - erased_before(previous, erased))
    after_total = _count(current.get(TOTAL))
    if thresholds.trips(before_total, after_total):
        drops.append(Drop(kind=TOTAL, scope_id=None, before=before_total, after=after_total))
    emptied: list[Drop] = []
    for kind in SCOPE_KINDS:
        before, after = _scope_map(previous.get(kind)), _scope_map(current.get(kind))
        found = []
        for scope_id, count in before.items():
            kept = max(0, count - erased.get(f"{kind}:{digest(scope_id)}", 0))
            drop = Drop(kind=kind, scope_id=scope_id, before=kept, after=after.get(scope_id, 0))
            if thresholds.trips(kept, drop.after):
                found.append(drop)
            elif drop.emptied:
                emptied.append(drop)
        drops += found
    if drops:
        drops += emptied
    return _ordered(drops)


def split_drops(
    drops: Sequence[Drop],
    previous: Mapping[str, Any],
    current: Mapping[str, Any],
    members: Mapping[tuple[str, str | None], Set[str]],
    deleted: Set[str],
    vanished: Set[str],
) -> list[Drop]:
    """Each drop with how many went with a DELETE event and how many vanished without. Pure.

    ``members`` are the previous snapshot's memory ids per scope (``(kind, id)``; ``(TOTAL,
    None)``: all), ``deleted`` and ``vanished`` its ids gone since, with a DELETE history event
    (erased ones left out) and without one. A scope not among ``drops`` that lost memories
    without a DELETE event is named too, and so is the whole store when it is not and some
    did (``previous``/``current``: the manifests' ``scopes``): a collection reset takes every
    scope, however small. Ordered as ``find_drops``.
    """
    named = {(drop.kind, drop.scope_id) for drop in drops}
    split = [
        replace(
            drop,
            deleted=len(members.get((drop.kind, drop.scope_id), set()) & deleted),
            vanished=len(members.get((drop.kind, drop.scope_id), set()) & vanished),
        )
        for drop in drops
    ]
    for (kind, scope_id), ids in members.items():
        lost = len(ids & vanished)
        if not lost or (kind, scope_id) in named:
            continue
        if scope_id is None:  # the whole store: memories of no scope vanished too
            before, after = _count(previous.get(TOTAL)), _count(current.get(TOTAL))
        else:
            before = _scope_map(previous.get(kind)).get(scope_id, len(ids))
            after = _scope_map(current.get(kind)).get(scope_id, 0)
        split.append(
            Drop(
                kind=kind,
                scope_id=scope_id,
                before=before,
                after=after,
                deleted=len(ids & deleted),
                vanished=lost,
            )
        )
    return _ordered(split)


def _ordered(drops: Sequence[Drop]) -> list[Drop]:
    """The whole store first, then by kind (``SCOPE_KINDS`` order), largest drop, id. Pure."""
    rank = {TOTAL: -1, **{kind: n for n, kind in enumerate(SCOPE_KINDS)}}
    return sorted(drops, key=lambda d: (rank.get(d.kind, 9), -d.dropped, d.scope_id or ""))


def erased_before(previous: Mapping[str, Any], erased: Mapping[str, int]) -> int:
    """How many of the erased memories ``previous`` can have held (its own count per scope). Pure.

    An erasure also deletes memories added after ``previous``; those were never in its total,
    and taking them out of it hid a real drop. Each erased memory had a user, agent or run
    scope, so the sum over every scope of ``min(erased, held)`` bounds those ``previous`` held
    (never below it: an erasure alone never trips).
    """
    held = sum(
        min(erased.get(f"{kind}:{digest(scope_id)}", 0), count)
        for kind in SCOPE_KINDS
        for scope_id, count in _scope_map(previous.get(kind)).items()
    )
    return min(erased.get(TOTAL, 0), held)


def choose_baseline(new_id: str, local: Sequence[Entry], remote: Sequence[Entry]) -> Entry | None:
    """The snapshot the new one is compared with. Pure.

    The newest complete local snapshot whose id sorts before ``new_id``; when there is none,
    the newest such remote one; None when neither side has one.
    """
    for side in (local, remote):
        earlier = [
            e
            for e in side
            if e.complete and e.manifest is not None and id_order(e.id) < id_order(new_id)
        ]
        if earlier:
            return max(earlier, key=lambda entry: id_order(entry.id))
    return None


def id_order(snapshot_id: str) -> tuple[str, int]:
    """A sort key of snapshot ids by time, then ``-N`` suffix (``-10`` after ``-9``). Pure."""
    match = ID_PATTERN.match(snapshot_id)
    if match is None:
        return snapshot_id, -1
    return match.group(1), int(match.group(2) or 0)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _scope_map(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(key): _count(count) for key, count in value.items()}
