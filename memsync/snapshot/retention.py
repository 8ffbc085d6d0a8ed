"""``snapshot prune``: which snapshots retention keeps (pure), and removing the others.

``plan_prune`` decides as restic does; ``candidates`` reads them from a repository and
``apply_prune`` deletes through it (a bucket loses the manifest object first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from memsync.config import Config, SnapshotConfig
from memsync.errors import ConfigError
from memsync.repository import SnapshotRepository, local

logger = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneDecision:
    """Keep or remove one snapshot, and why."""

    id: str
    keep: bool
    reasons: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """What retention needs to know of one snapshot."""

    id: str
    time: datetime
    complete: bool
    verified: bool
    clean: bool = True


def plan_prune(candidates: Iterable[Candidate], policy: SnapshotConfig) -> list[PruneDecision]:
    """Decide which snapshots retention keeps, as restic does. Pure.

    ``keep_last`` keeps the newest N; ``keep_daily``/``weekly``/``monthly`` keep the newest
    snapshot of each of the last N days (UTC) / ISO weeks / months that have snapshots. The
    rules add up. The newest verified snapshot whose pair was clean (``clean``: no error
    finding, no unsettled write) is always kept; incomplete ones are never
    touched (they are not in the result).

    Raises:
        ConfigError: every keep_* is 0 (an empty policy would remove everything).
    """
    if not (policy.keep_last or policy.keep_daily or policy.keep_weekly or policy.keep_monthly):
        raise ConfigError("snapshot", ["snapshot.keep_*: retention needs at least one keep_* > 0"])
    complete = sorted((c for c in candidates if c.complete), key=lambda c: c.id, reverse=True)
    reasons: dict[str, list[str]] = {c.id: [] for c in complete}
    for index, candidate in enumerate(complete[: policy.keep_last]):
        reasons[candidate.id].append(f"last {index + 1}")
    buckets: tuple[tuple[str, int, Callable[[datetime], str]], ...] = (
        ("daily", policy.keep_daily, lambda t: t.strftime("%Y-%m-%d")),
        (
            "weekly",
            policy.keep_weekly,
            lambda t: f"{t.isocalendar()[0]:04d}-W{t.isocalendar()[1]:02d}",
        ),
        ("monthly", policy.keep_monthly, lambda t: t.strftime("%Y-%m")),
    )
    for name, count, bucket_of in buckets:
        seen: list[str] = []
        for candidate in complete:
            bucket = bucket_of(candidate.time.astimezone(UTC))
            if bucket in seen:
                continue
            if len(seen) >= count:
                break
            seen.append(bucket)
            reasons[candidate.id].append(f"{name} {bucket}")
    newest_verified = next((c for c in complete if c.verified and c.clean), None)
    if newest_verified is not None:
        reasons[newest_verified.id].append("newest verified")
    return [
        PruneDecision(id=c.id, keep=bool(reasons[c.id]), reasons=tuple(reasons[c.id]))
        for c in complete
    ]


def candidates(repository: SnapshotRepository) -> list[Candidate]:
    """Retention candidates of a repository (complete or not). Reads only."""
    return [
        Candidate(
            id=e.id,
            time=e.created_at,
            complete=e.complete,
            verified=e.is_verified,
            clean=e.manifest is not None and e.manifest.restores_clean,
        )
        for e in repository.list()
    ]


def local_candidates(config: Config) -> list[Candidate]:
    """Retention candidates of the local snapshot directory. Raises ConfigError without one."""
    return candidates(local(config))


def apply_prune(repository: SnapshotRepository, decisions: Sequence[PruneDecision]) -> list[str]:
    """Delete the snapshots ``decisions`` do not keep; return their ids.

    Each goes through ``SnapshotRepository.delete``: the manifest first, so a snapshot is
    incomplete by construction from then on, then everything else.
    """
    removed = []
    for decision in decisions:
        if decision.keep:
            continue
        repository.delete(decision.id)
        logger.info("snapshot_removed", snapshot_id=decision.id, where=repository.where)
        removed.append(decision.id)
    return removed
