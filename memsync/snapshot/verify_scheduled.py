"""``snapshot verify --scheduled`` (the daemon's ``verify`` job): one run of scheduled verification.

On each side (the local snapshot directory, and the bucket when ``[s3]`` is configured), through
the repository port: every snapshot's manifest is read and its signature checked; the newest
complete snapshot is verified completely (``verify_snapshot``); and a slice of the others' files
is read back against their manifests (``SnapshotRepository.verify_files``), planned by the pure
``verify_schedule.plan_side`` from the record of when each file was last read back and matched
(``verify_state``: ``<state_dir>/verify-state.json``, written atomically after each side).

Each snapshot read records its verdict in ``verified.json`` beside it (a full verification
as ``snapshot verify`` does; a slice that finds damage: ``ok: false`` with ``scope: "files"``;
a slice that matched: ``files_read_at`` added to the passing document).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from memsync import __version__, flock, utc
from memsync import findings as registry
from memsync import repository as repositories
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ConfigError, LockedError, UnavailableError
from memsync.model import Finding, Severity
from memsync.repository import Entry, SnapshotRepository, reading
from memsync.s3 import TransportError
from memsync.snapshot import verify_schedule as schedule
from memsync.snapshot.create import signing_key
from memsync.snapshot.verify import verify_snapshot
from memsync.snapshot.verify_state import LOCK_FILE, load_state, save_state
from memsync.stores.manifest import ManifestTooNew, signature_ok
from memsync.stores.snapshots import VERIFIED

DAILY = timedelta(days=1)
Progress = Callable[[int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotResult:
    """What one run found in one snapshot: its scope (``full``, ``files``, ``manifest``).

    ``expected``: for a safety snapshot read in full, the pair's findings its create recorded
    (the damage its command was about to repair): reported, not counted as errors.
    """

    snapshot_id: str
    scope: str
    paths: tuple[str, ...]
    size_bytes: int
    reason: str
    findings: tuple[Finding, ...]
    expected: tuple[Finding, ...] = ()  # a safety snapshot's recorded damage: never an error
    label: dict[str, Any] | None = None  # its manifest's ``label`` (a safety snapshot's)

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity is Severity.ERROR for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        """The ``snapshots[]`` object of the report (docs/reference/json-output.md)."""
        return {
            "id": self.snapshot_id,
            "scope": self.scope,
            "paths": list(self.paths),
            "size_bytes": self.size_bytes,
            "reason": self.reason,
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "label": self.label,
            "expected": [f.to_json() for f in self.expected],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SideResult:
    """One side's run: its plan, the snapshots read, the bytes read, the cycle's coverage."""

    side: str
    where: str
    plan: schedule.SidePlan
    manifests: int
    damaged_manifests: tuple[str, ...]
    incomplete: tuple[str, ...]
    results: tuple[SnapshotResult, ...]
    coverage: float

    @property
    def bytes_read(self) -> int:
        """Stored bytes read back by this run (0 for a dry run)."""
        return sum(r.size_bytes for r in self.results)

    @property
    def errors(self) -> int:
        """Error findings of this side."""
        return sum(1 for r in self.results for f in r.findings if f.severity is Severity.ERROR)

    def to_json(self, dry_run: bool) -> dict[str, Any]:
        """The ``sides[]`` object of the report (docs/reference/json-output.md)."""
        return {
            "side": self.side,
            "where": self.where,
            "manifests": self.manifests,
            "damaged_manifests": list(self.damaged_manifests),
            "incomplete": list(self.incomplete),
            "budget_bytes": self.plan.budget_bytes,
            "stored_bytes": self.plan.total_bytes,
            "other_bytes": self.plan.other_bytes,
            "planned_bytes": self.plan.planned_bytes,
            "plan": [item.to_json() for item in self.plan.items],
            "bytes_read": self.bytes_read,
            "errors": self.errors,
            "coverage": round(self.coverage, 4),
            "snapshots": [] if dry_run else [r.to_json() for r in self.results],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduledReport:
    """One scheduled run on every configured side."""

    sides: tuple[SideResult, ...]
    started_at: datetime
    cycle: timedelta
    interval: timedelta
    dry_run: bool
    last_ok_at: datetime | None

    @property
    def ok(self) -> bool:
        """True when no side found an error."""
        return all(side.errors == 0 for side in self.sides)

    def to_json(self) -> dict[str, Any]:
        """The ``snapshot verify --scheduled --json`` document (docs/reference/json-output.md)."""
        errors = sum(side.errors for side in self.sides)
        return {
            "command": "snapshot verify",
            "scheduled": True,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "verified_at": utc.iso(self.started_at),
            "last_ok_at": utc.iso_or_none(self.last_ok_at),
            "cycle_s": self.cycle.total_seconds(),
            "interval_s": self.interval.total_seconds(),
            "runs_per_cycle": schedule.runs_per_cycle(self.cycle, self.interval),
            "bytes_read": sum(side.bytes_read for side in self.sides),
            "counts": {
                "errors": errors,
                "warnings": self._count(Severity.WARNING),
                "expected": sum(len(r.expected) for side in self.sides for r in side.results),
            },
            "coverage": {side.side: round(side.coverage, 4) for side in self.sides},
            "sides": [side.to_json(self.dry_run) for side in self.sides],
        }

    def _count(self, severity: Severity) -> int:
        return sum(
            1
            for side in self.sides
            for r in side.results
            for f in r.findings
            if f.severity is severity
        )


def job_interval(config: Config) -> timedelta:
    """The time between two runs: ``[daemon] verify_every``, else one day. Pure."""
    when = config.daemon.jobs.get("verify")
    return when.every if when is not None and when.every is not None else DAILY


def sides(config: Config) -> list[tuple[str, SnapshotRepository]]:
    """The configured sides, ``("local", ...)`` then ``("remote", ...)``.

    Raises:
        ConfigError: neither ``snapshot.directory`` nor ``[s3]`` is configured.
    """
    found: list[tuple[str, SnapshotRepository]] = []
    local = repositories.local_or_none(config)
    if local is not None:
        found.append(("local", local))
    if config.s3 is not None:
        found.append(("remote", repositories.remote(config)))
    if not found:
        raise ConfigError(
            config.source, ["snapshot.directory: required for snapshot verify (or an [s3] section)"]
        )
    return found


def run_scheduled(
    deployment: Deployment,
    now: datetime,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ScheduledReport:
    """Run one scheduled verification on every side (see the module docstring).

    ``now`` (UTC) is the run's time: the planner's clock and the verdicts' time. With
    ``dry_run``, lists and reads the manifests only, and writes nothing. ``progress`` is called
    with the stored bytes of each snapshot read.

    Raises:
        ConfigError: no side is configured; a signing key file is unreadable.
        LockedError: another scheduled verification is running.
        UnavailableError: a repository is unreachable or stops answering (the sides done
            before are recorded), or a manifest is of a newer format (``ManifestTooNew``).
    """
    config = deployment.config
    configured = sides(config)
    cycle, interval = config.snapshot.verify_cycle, job_interval(config)
    with _locked(config, dry_run):
        state = load_state(config.state_dir)
        results = []
        for side, repository in configured:
            last_read = state["sides"].get(repository.where, {})
            result, reads = _run_side(
                deployment, side, repository, last_read, now, dry_run, progress
            )
            results.append(result)
            if not dry_run:
                state["sides"][repository.where] = reads
                state["last_run_at"] = utc.iso(now)
                save_state(config.state_dir, state)
        last_ok = utc.parse(state["last_ok_at"]) if state.get("last_ok_at") else None
        report = ScheduledReport(
            sides=tuple(results),
            started_at=now,
            cycle=cycle,
            interval=interval,
            dry_run=dry_run,
            last_ok_at=last_ok,
        )
        if report.ok and not dry_run:
            state["last_ok_at"] = utc.iso(now)
            save_state(config.state_dir, state)
            report = replace(report, last_ok_at=now)
    return report


@contextmanager
def _locked(config: Config, dry_run: bool) -> Iterator[None]:
    """Hold ``<state_dir>/verify.lock`` (not for a dry run).

    Raises:
        LockedError: another scheduled verification holds it.
    """
    if dry_run:
        yield
        return
    config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        handle = flock.acquire(config.state_dir / LOCK_FILE)
    except flock.LockHeld as held:
        raise LockedError(
            f"snapshot verify --scheduled: another run holds {config.state_dir / LOCK_FILE} "
            f"({held.holder or 'an unknown process'})",
            "wait for it to finish; the lock is released when it exits",
        ) from None
    with handle:
        yield


def _run_side(
    deployment: Deployment,
    side: str,
    repository: SnapshotRepository,
    last_read: schedule.LastRead,
    now: datetime,
    dry_run: bool,
    progress: Progress | None,
) -> tuple[SideResult, dict[str, dict[str, datetime]]]:
    """Check the side's manifests, plan, read; return the result and the new read record."""
    config = deployment.config
    entries = repository.list()
    stored, damaged, incomplete = _manifests(config, side, repository, entries)
    plan = schedule.plan_side(
        stored, last_read, now, config.snapshot.verify_cycle, job_interval(config)
    )
    results: list[SnapshotResult] = []
    reads: dict[str, list[str]] = {}
    if not dry_run:
        for snapshot_id in damaged:
            results += _read(deployment, repository, _manifest_item(snapshot_id), now, reads)
        for item in plan.items:
            results += _read(deployment, repository, item, now, reads)
            if progress is not None:
                progress(item.size_bytes)
    present = [entry.id for entry in entries if entry.complete]
    record = schedule.record_reads(last_read, reads, now, present)
    result = SideResult(
        side=side,
        where=repository.where,
        plan=plan,
        manifests=len(stored) + len(damaged),
        damaged_manifests=tuple(damaged),
        incomplete=tuple(incomplete),
        results=tuple(results),
        coverage=schedule.coverage(stored, record, now, config.snapshot.verify_cycle),
    )
    return result, record


def _manifests(
    config: Config, side: str, repository: SnapshotRepository, entries: list[Entry]
) -> tuple[list[schedule.Stored], list[str], list[str]]:
    """Sort the listed snapshots: sound manifests, damaged ones, incomplete ones. Reads only.

    Incomplete: a local ``.partial`` (a create in progress or left by one) or a remote snapshot
    without its manifest object (an upload in progress or interrupted; retention removes it).
    Damaged: a local snapshot directory without a valid manifest, or a manifest whose signature
    does not match the configured key.
    """
    key = signing_key(config)
    stored, damaged, incomplete = [], [], []
    for entry in entries:
        if entry.manifest is None:
            if side == "remote" or not repository.exists(entry.id):
                incomplete.append(entry.id)
            else:
                damaged.append(entry.id)
        elif key is not None and not signature_ok(entry.manifest, key):
            damaged.append(entry.id)
        else:
            files = tuple((f.path, f.stored[0]) for f in entry.manifest.files)
            stored.append(
                schedule.Stored(
                    snapshot_id=entry.id,
                    files=files,
                    verified=entry.is_verified,
                    created_at=entry.created_at,
                )
            )
    damaged_ids = set(damaged)
    return [s for s in stored if s.snapshot_id not in damaged_ids], sorted(damaged_ids), incomplete


def _manifest_item(snapshot_id: str) -> schedule.Item:
    return schedule.Item(
        snapshot_id=snapshot_id, paths=(), size_bytes=0, full=True, reason="manifest"
    )


def _read(
    deployment: Deployment,
    repository: SnapshotRepository,
    item: schedule.Item,
    now: datetime,
    reads: dict[str, list[str]],
) -> list[SnapshotResult]:
    """Read one planned item; add the paths that matched to ``reads``; [] when it vanished.

    Raises:
        UnavailableError: the repository fails (a snapshot removed meanwhile is skipped).
    """
    config = deployment.config
    try:
        expected: tuple[Finding, ...] = ()
        label = None
        if item.full:
            verified = verify_snapshot(
                deployment,
                repository,
                item.snapshot_id,
                repository.location(item.snapshot_id),
                now,
                restorable=True,
            )
            findings, expected, label = verified.findings, verified.expected, verified.label
            scope = "manifest" if item.reason == "manifest" else "full"
            passed = () if _has_errors(findings) else item.paths
        else:
            findings, passed = _read_files(config, repository, item, now)
            scope = "files"
    except (ManifestTooNew, TransportError):
        raise
    except UnavailableError:
        if repository.exists(item.snapshot_id):
            raise
        return []  # removed while the run went on (retention): nothing left to verify
    reads.setdefault(item.snapshot_id, []).extend(passed)
    return [
        SnapshotResult(
            snapshot_id=item.snapshot_id,
            scope=scope,
            paths=item.paths,
            size_bytes=item.size_bytes,
            reason=item.reason,
            findings=tuple(findings),
            expected=expected,
            label=label,
        )
    ]


def _read_files(
    config: Config, repository: SnapshotRepository, item: schedule.Item, now: datetime
) -> tuple[tuple[Finding, ...], tuple[str, ...]]:
    """Read back ``item.paths``; record the verdict in ``verified.json``; (findings, matched)."""
    with reading.scratch(config, "verify-slice") as temporary:
        checked = repository.verify_files(item.snapshot_id, item.paths, temporary)
    findings = tuple(
        registry.make(p.code, p.message, path=p.where, fix=p.fix) for p in checked.problems
    )
    before = repository.read_json(item.snapshot_id, VERIFIED) or {}
    if findings:
        document: dict[str, Any] = {
            "verified_at": utc.iso(now),
            "ok": False,
            "errors": len(findings),
            "codes": sorted({f.code for f in findings}),
            "memsync": __version__,
            "scope": "files",
            "paths": list(item.paths),
        }
    else:
        document = {**before, "files_read_at": utc.iso(now)}
    repository.write_json(item.snapshot_id, VERIFIED, document)
    return findings, tuple(entry.path for entry in checked.passed)


def _has_errors(findings: tuple[Finding, ...]) -> bool:
    return any(f.severity is Severity.ERROR for f in findings)
