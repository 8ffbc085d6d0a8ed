"""``doctor``: a health check of every path and store of the deployment, for people and monitors.

``probe_*`` functions read (files, mounts, processes, versions) and return ``DoctorResult``s;
``run_doctor`` runs them all plus ``check`` on one capture. Doctor never writes to the
deployment, never imports mem0 and never takes Qdrant's lock. The probes live in
``doctor.paths``, ``doctor.stores``, ``doctor.wal``, ``doctor.versions``, ``doctor.state``,
``doctor.copies``; what only a backend knows it says itself, through the port
(``LiveStore.probe_server``, ``probe_capture``, ``probe_app_view``, ``sqlite_verdicts``,
``local_dirs``, ``telemetry``: ``memsync.stores.<backend>.doctor``). Result codes:
docs/reference/commands/doctor.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsync import check
from memsync.deployment import Deployment
from memsync.doctor.copies import probe_copies
from memsync.doctor.paths import probe_locks, probe_paths
from memsync.doctor.pending import probe_pending, probe_route
from memsync.doctor.protect import probe_protection
from memsync.doctor.s3 import S3_RESULT_CODES, probe_backups
from memsync.doctor.state import probe_daemon, probe_last_snapshot, probe_restores
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.doctor.stores import check_results, probe_sqlite
from memsync.doctor.versions import judge_mem0_version, probe_versions
from memsync.doctor.wal import probe_wal
from memsync.errors import MemsyncError
from memsync.model import CheckReport, DoctorResult
from memsync.stores.backends import doctor_codes

__all__ = [
    "ERROR", "OK", "RESULT_CODES", "WARNING", "DoctorReport", "judge_mem0_version", "probe_daemon",
    "probe_last_snapshot", "probe_locks", "probe_paths", "probe_restores", "probe_versions",
    "run_doctor", "summarize",
]  # fmt: skip

# Every result code doctor emits (docs/reference/commands/doctor.md).
RESULT_CODES = (
    "path-mount", "path-volatile", "path-under-tmp", "disk-space", "path-permissions",
    "store-lock", "private-tmp-mismatch", "sqlite-integrity", "journal-mode", "sqlite-version",
    "collection-params", "check", "capture-duration", "mem0-version", "qdrant-client-version",
    "app-interpreter", "store-meta", "store-decode", "last-snapshot", "restore-unfinished", "pre-restore-copy", "daemon",
    "daemon-job", "old-store-copy", "legacy-point-store", "wal-recommended", "pending-requests",
    "pending-erasure-overdue", "window-left-open", "write-route", "agent-refused",
    "store-size", "protection", "replica-generation-changed", *doctor_codes(),
    *S3_RESULT_CODES,
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class DoctorReport:
    """Doctor's results in probe order, plus the check report when the capture succeeded."""

    results: tuple[DoctorResult, ...]
    check: CheckReport | None

    def count(self, status: str) -> int:
        """Number of results with ``status``."""
        return sum(1 for result in self.results if result.status == status)

    @property
    def ok(self) -> bool:
        """True when no result is an error."""
        return self.count(ERROR) == 0

    def to_json(self) -> dict[str, Any]:
        """The contract's ``doctor --json`` document."""
        return {
            "command": "doctor",
            "ok": self.ok,
            "counts": summarize(self.results),
            "results": [result.to_json() for result in self.results],
            "check": self.check.counts() if self.check else None,
        }


def run_doctor(deployment: Deployment, now: datetime) -> DoctorReport:
    """Run every probe and ``check`` on one capture. Reads the deployment only.

    Never raises for a store problem: an unreadable store becomes an error result. The check
    summary comes from ``check.settled_report``, the path ``check`` takes, so both agree.
    """
    config = deployment.config
    results: list[DoctorResult] = []
    results += probe_paths(deployment)  # catches its own OSErrors, path by path
    try:
        results += probe_locks(deployment)
    except OSError as error:  # an unreachable path is a finding, not a crash
        results.append(
            DoctorResult(
                code="path-permissions",
                status=ERROR,
                path=getattr(error, "filename", None),
                message=f"cannot inspect {getattr(error, 'filename', 'a path')}: {error.strerror}",
                fix="run memsync as the app's user, or give its group access (UMask=0007)",
            )
        )
    store = deployment.vector_store
    results += store.probe_server(config.expected_dims)  # a server backend's (pgvector: pg-*)
    report: CheckReport | None = None
    try:  # check's own path: a write in flight is waited out and captured again, as check does
        report, probed = check.settled_report(
            deployment,
            now,
            inspect=lambda captured: [
                *captured.store.probe_capture(captured.vectors, config.expected_dims),
                *probe_sqlite(config, captured),
                *probe_wal(deployment, captured),
            ],
        )
        results += probed or []
        results += check_results(report, blocks_writers=store.capture_blocks_writers)
    except MemsyncError as error:  # the stores could not be checked: never "healthy"
        results.append(
            DoctorResult(code="check", status=ERROR, message=error.message, fix=error.hint)
        )
    results += probe_versions(deployment)
    results.append(probe_last_snapshot(deployment, now))
    results += probe_restores(config)
    results += probe_copies(deployment, now)
    results += probe_daemon(config, now)
    results.append(probe_route(deployment))
    results += probe_pending(config, now)
    results += probe_backups(config, now)  # snapshot space, pending uploads, the bucket
    results += probe_protection(deployment, now)
    return DoctorReport(results=tuple(results), check=report)


def summarize(results: Iterable[DoctorResult]) -> dict[str, int]:
    """Counts by status: ``{"ok": n, "warnings": n, "errors": n}``."""
    listed = list(results)
    return {
        "ok": sum(1 for r in listed if r.status == OK),
        "warnings": sum(1 for r in listed if r.status == WARNING),
        "errors": sum(1 for r in listed if r.status == ERROR),
    }
