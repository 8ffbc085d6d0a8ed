"""Doctor's capture-budget probe: would a capture's read come close to the app's busy timeout?

``wal-recommended`` (registered in ``memsync.findings``; docs/reference/findings.md): for every
live SQLite file not in WAL mode whose estimated capture read (``memsync.capture_budget``)
exceeds 2.5 s, a warning naming the file and ``memsync tune --wal``; otherwise one ok result
with the largest estimate. The rate is the slowest of the recorded ones and of this doctor
run's own capture (its copies of the same live files).
"""

from __future__ import annotations

from memsync import capture_budget, findings
from memsync.deployment import Deployment
from memsync.doctor.status import OK, WARNING
from memsync.model import DoctorResult
from memsync.stores.capture import Captured

CODE = "wal-recommended"


def probe_wal(deployment: Deployment, captured: Captured) -> list[DoctorResult]:
    """``wal-recommended`` results for the deployment's live files. Reads headers and sizes.

    Raises:
        UnavailableError: the vector store's metadata is unreadable (doctor's capture, which
            runs first, reports the same).
    """
    config = deployment.config
    # a server store's export files are not SQLite: only history.db can block the app
    copies = [*captured.collection_copies.values()] if captured.store.location else []
    if captured.history_copy is not None:
        copies.append(captured.history_copy)
    budget = capture_budget.estimate(
        deployment.vector_store, config, capture_budget.samples_from_copies(copies)
    )
    return judge_budget(budget)


def judge_budget(budget: capture_budget.CaptureBudget) -> list[DoctorResult]:
    """A warning per file near the busy timeout, else one ok result. Pure."""
    rate = budget.rate
    measured = (
        f"{rate.bytes_per_s / 1e6:.0f} MB/s measured on {rate.source}"
        if rate.measured_at is not None
        else f"{rate.bytes_per_s / 1e6:.0f} MB/s assumed (no large capture measured yet)"
    )
    limit = f"mem0's {capture_budget.BUSY_TIMEOUT_S:.0f} s busy timeout"
    if budget.near_timeout:
        return [
            DoctorResult(
                code=CODE,
                status=WARNING,
                path=str(near.path),
                message=f"a capture would hold its read on this {near.journal_mode or 'unknown'}-"
                f"mode file about {near.estimated_hold_s:.1f} s ({near.size_bytes} bytes at "
                f"{measured}), close to {limit}: the app's writes to it wait meanwhile and fail "
                "with 'database is locked' past it; in WAL mode they never wait for a reader",
                fix=findings.spec(CODE).fix,
            )
            for near in budget.near_timeout
        ]
    if not budget.files:
        return []
    if all(entry.journal_mode == "wal" for entry in budget.files):
        message = "every SQLite file is in WAL mode: captures never block the app's writer"
    else:
        largest = max(budget.files, key=lambda entry: entry.estimated_hold_s)
        message = (
            f"longest estimated capture read {largest.estimated_hold_s:.2f} s ({largest.path}, "
            f"{measured}), under {budget.threshold_s} s; {limit} is not at risk"
        )
    return [DoctorResult(code=CODE, status=OK, message=message)]
