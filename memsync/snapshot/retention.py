"""Retention: which snapshots to keep, decided once over the local and the remote ones. Pure.

``merge`` joins what each side lists into one ``Candidate`` per snapshot id; ``plan_retention``
decides as restic does (``keep_last``, ``keep_hourly`` ... ``keep_yearly``, ``keep_within``),
always keeps the newest verified clean snapshot and every pinned one, and removes incomplete
remote snapshots older than a day. A snapshot stored on both sides is kept or removed on both.
Every decision says why. Removing is ``memsync.snapshot.retention_apply``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from memsync.config import SnapshotConfig
from memsync.config.effective import format_duration
from memsync.errors import ConfigError
from memsync.repository import Entry
from memsync.snapshot.pins import pin_of

SIDES = ("local", "remote")
INCOMPLETE_GRACE = timedelta(days=1)  # an incomplete remote snapshot younger may be uploading
NO_RULE = "no rule keeps it"
SAFETY_OLD = "safety snapshot older than keep_safety_days"
INCOMPLETE_OLD = "incomplete, older than 1 day"
UPLOAD_PENDING = "upload pending"  # its upload failed, was interrupted or is running now


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """What retention needs to know of one snapshot id, over every side storing it.

    Attributes:
        id: the snapshot id.
        time: its time (UTC, from the id).
        complete: its manifest is committed and valid on at least one side.
        verified: its last verification passed on at least one side.
        clean: its pair restores clean (no error finding, nothing unsettled).
        pin: the active pin document (``memsync.snapshot.pins``), or None.
        sides: where something of it is stored, in ``SIDES`` order.
        incomplete_on: the sides of ``sides`` holding it without a valid manifest.
        upload_pending: its local copy is marked upload-pending (``upload-pending.json``: its
            upload failed, was interrupted or is running now); kept on every side until the
            upload completes (the bucket never got it whole).
        safety: a safety snapshot (its manifest's ``label``): aged out by
            ``keep_safety_days`` alone, never counted by the other rules.
    """

    id: str
    time: datetime
    complete: bool
    verified: bool
    clean: bool = True
    pin: Mapping[str, Any] | None = None
    sides: tuple[str, ...] = ("local",)
    incomplete_on: tuple[str, ...] = ()
    upload_pending: bool = False
    safety: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneDecision:
    """Keep or remove one snapshot, why, where it is stored and where removing deletes it.

    ``remove_from`` is empty for a kept snapshot; a removed one leaves an incomplete local
    directory alone (memsync never deletes what it cannot read).
    """

    id: str
    keep: bool
    reasons: tuple[str, ...] = field(default_factory=tuple)
    sides: tuple[str, ...] = ("local",)
    remove_from: tuple[str, ...] = ()


def merge(
    listed: Mapping[str, Sequence[Entry]], upload_pending: Collection[str] = ()
) -> list[Candidate]:
    """One candidate per snapshot id over ``{side: entries}`` (sides of ``SIDES``). Pure.

    A side listing an id twice (a complete directory and a ``.partial``) counts as complete.
    ``upload_pending``: ids whose local copy is marked upload-pending (read from the snapshot
    directory even when only the bucket is covered).
    """
    by_id: dict[str, dict[str, Entry]] = {}
    for side in SIDES:
        for entry in listed.get(side, ()):
            found = by_id.setdefault(entry.id, {})
            if side not in found or entry.complete:
                found[side] = entry
    return [
        _candidate(snapshot_id, found, snapshot_id in upload_pending)
        for snapshot_id, found in sorted(by_id.items())
    ]


def _candidate(snapshot_id: str, found: Mapping[str, Entry], upload_pending: bool) -> Candidate:
    entries = list(found.values())
    complete = [e for e in entries if e.complete]
    pins = [p for e in entries if (p := pin_of(e)) is not None]
    return Candidate(
        id=snapshot_id,
        time=entries[0].created_at,
        complete=bool(complete),
        verified=any(e.is_verified for e in complete),
        clean=all(e.manifest is not None and e.manifest.restores_clean for e in complete),
        pin=pins[0] if pins else None,
        sides=tuple(found),
        incomplete_on=tuple(side for side, e in found.items() if not e.complete),
        upload_pending=upload_pending,
        safety=any(e.is_safety for e in complete),
    )


def pin_reason(pin: Mapping[str, Any]) -> str:
    """``pinned (tripwire: <reason>)``; ``pinned (operator)`` without a reason. Pure."""
    by, reason = str(pin.get("by") or "operator"), str(pin.get("reason") or "")
    return f"pinned ({by}: {reason})" if reason else f"pinned ({by})"


def plan_retention(
    candidates: Iterable[Candidate], policy: SnapshotConfig, *, now: datetime | None = None
) -> list[PruneDecision]:
    """Decide, newest first, which snapshots retention keeps, as restic does. Pure.

    ``keep_last`` keeps the newest N; ``keep_hourly``/``daily``/``weekly``/``monthly``/``yearly``
    keep the newest snapshot of each of the last N hours / days / ISO weeks / months / years
    (UTC) that have one; ``keep_within`` keeps every snapshot younger than that, counted from
    the newest snapshot. The rules add up, over complete snapshots only. The newest verified
    snapshot whose pair was clean is always kept, and so is every pinned one and every local
    one whose upload is pending (removing it would lose what the bucket was to hold). An incomplete
    snapshot is kept, unless it is stored remotely and its id's time is more than a day before
    ``now`` (None: never) and its local copy is not marked upload-pending: then its remote
    objects go, its local directory stays. A safety snapshot (``Candidate.safety``) is kept
    ``keep_safety_days`` from its own time (counted to ``now``; to the newest snapshot when
    None) and then removed unless pinned; the other rules neither keep nor count it.

    Raises:
        ConfigError: no keep_* rule is set (an empty policy would remove everything).
    """
    if not (
        policy.keep_last
        or policy.keep_hourly
        or policy.keep_daily
        or policy.keep_weekly
        or policy.keep_monthly
        or policy.keep_yearly
        or policy.keep_within
    ):
        raise ConfigError("snapshot", ["snapshot.keep_*: retention needs at least one keep_* > 0"])
    ordered = sorted(candidates, key=lambda c: c.id, reverse=True)
    complete = [c for c in ordered if c.complete and not c.safety]
    reasons = _rule_reasons(complete, policy)
    newest_verified = next((c for c in complete if c.verified and c.clean), None)
    if newest_verified is not None:
        reasons[newest_verified.id].append("newest verified")
    reasons |= _safety_reasons(ordered, policy, now)
    return [_decide(c, reasons.get(c.id, []), now) for c in ordered]


def _decide(candidate: Candidate, reasons: list[str], now: datetime | None) -> PruneDecision:
    reasons = [*reasons, pin_reason(candidate.pin)] if candidate.pin else list(reasons)
    if candidate.upload_pending:
        reasons.append(UPLOAD_PENDING)
    remote = "remote" in candidate.sides
    if not candidate.complete and not candidate.upload_pending:
        old = remote and now is not None and now - candidate.time > INCOMPLETE_GRACE
        if old and not reasons:
            return _removed(candidate, INCOMPLETE_OLD, ("remote",))
        if old:
            reasons.append(INCOMPLETE_OLD)
        else:
            young = remote and now is not None
            reasons.append(
                "incomplete, younger than 1 day" if young else "incomplete, never pruned"
            )
    if reasons:
        return PruneDecision(
            id=candidate.id, keep=True, reasons=tuple(reasons), sides=candidate.sides
        )
    unread = "local" in candidate.incomplete_on  # a local directory memsync cannot read stays
    return _removed(
        candidate,
        SAFETY_OLD if candidate.safety else NO_RULE,
        tuple(s for s in candidate.sides if s != "local" or not unread),
    )


def _removed(candidate: Candidate, reason: str, remove_from: tuple[str, ...]) -> PruneDecision:
    return PruneDecision(
        id=candidate.id,
        keep=False,
        reasons=(reason,),
        sides=candidate.sides,
        remove_from=remove_from,
    )


def _safety_reasons(
    ordered: list[Candidate], policy: SnapshotConfig, now: datetime | None
) -> dict[str, list[str]]:
    """``{id: ["keep-safety 7d"]}`` of the safety snapshots younger than ``keep_safety_days``."""
    if not ordered:
        return {}
    until = now if now is not None else ordered[0].time
    kept = timedelta(days=policy.keep_safety_days)
    return {
        c.id: [f"keep-safety {policy.keep_safety_days}d"] if until - c.time < kept else []
        for c in ordered
        if c.complete and c.safety
    }


_BUCKETS: tuple[tuple[str, Callable[[datetime], str]], ...] = (
    ("hourly", lambda t: t.strftime("%Y-%m-%dT%H")),
    ("daily", lambda t: t.strftime("%Y-%m-%d")),
    ("weekly", lambda t: f"{t.isocalendar()[0]:04d}-W{t.isocalendar()[1]:02d}"),
    ("monthly", lambda t: t.strftime("%Y-%m")),
    ("yearly", lambda t: t.strftime("%Y")),
)


def _rule_reasons(complete: list[Candidate], policy: SnapshotConfig) -> dict[str, list[str]]:
    """``{id: ["keep-last 1", "keep-daily 2026-11-30", ...]}`` of complete snapshots, newest first."""
    reasons: dict[str, list[str]] = {c.id: [] for c in complete}
    for index, candidate in enumerate(complete[: policy.keep_last]):
        reasons[candidate.id].append(f"keep-last {index + 1}")
    for name, bucket_of in _BUCKETS:
        count: int = getattr(policy, f"keep_{name}")
        seen: set[str] = set()
        for candidate in complete:
            bucket = bucket_of(candidate.time.astimezone(UTC))
            if bucket in seen:
                continue
            if len(seen) >= count:
                break
            seen.add(bucket)
            reasons[candidate.id].append(f"keep-{name} {bucket}")
    if policy.keep_within and complete:
        since = complete[0].time - policy.keep_within
        label = f"keep-within {format_duration(policy.keep_within)}"
        for candidate in complete:
            if candidate.time > since:
                reasons[candidate.id].append(label)
    return reasons
