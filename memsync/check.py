"""``check``: prove that vectors and history agree, finding by finding.

``find_problems`` (in ``memsync.problems``, re-exported here) is pure: inventory and ``today`` in,
sorted findings out. ``run_check`` is the thin I/O half: capture into ``work_dir``, read the
copies, judge, clean up. Finding codes, severities and fixes live in ``memsync.findings``;
docs/reference/findings.md explains each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import TypeVar

from memsync import findings, state
from memsync.config import Config
from memsync.errors import MemsyncError, UnavailableError
from memsync.model import CheckReport, Inventory, Severity
from memsync.problems import (
    IN_FLIGHT_MARGIN,
    LIVE_EVENTS,
    NOTHING_AROUND,
    SCOPE_KEYS,
    Surroundings,
    find_problems,
    in_window,
    session_scope,
)
from memsync.stores import deployment
from memsync.stores.deployment import Captured

__all__ = [
    "FINDING_CODES",
    "IN_FLIGHT_MARGIN",
    "LIVE_EVENTS",
    "SCOPE_KEYS",
    "Surroundings",
    "find_problems",
    "in_window",
    "judge",
    "run_check",
    "session_scope",
    "settled_capture",
    "settled_inventory",
    "surroundings",
]

# Every finding code check emits, with its severity (from the registry, memsync.findings).
FINDING_CODES: dict[str, Severity] = {
    code: findings.spec(code).severity for code in findings.codes(findings.Source.CHECK)
}


def run_check(
    config: Config,
    now: datetime,
    settle: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> CheckReport:
    """Capture both stores into ``work_dir``, judge them, remove the copies.

    When some disagreement falls inside the capture window (``in-flight``) and ``settle`` is
    set, waits until the margin has passed (at most ~3 s) and captures once more, so a write
    that was merely in flight disappears and a real failure that just happened is reported
    as the error it is. Reads the deployment only (no lock, no mem0 import); writes only its
    own work directory.

    Args:
        config: the validated configuration.
        now: the current time (aware UTC); ``today`` for expiry is its date.
        settle: allow the one re-capture.
        progress: called as ``progress(points_read, points_total)`` while decoding.

    Raises:
        UnavailableError: both stores absent, or a store file unreadable or damaged.
        TryLaterError: a store is busy, or the work directory is full or unwritable.
    """
    return settled_inventory(config, now, settle, progress)[1]


def settled_inventory(
    config: Config,
    now: datetime,
    settle: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Inventory, CheckReport]:
    """Capture and judge, re-capturing once when writes were in flight (see ``run_check``).

    Returns the inventory and its report; the copies are removed. Raises as ``run_check``, and
    UnavailableError while a restore that died is unfinished (the stores may be a mix).
    """
    inventory, report, _ = settled_capture(config, now, settle, progress)
    return inventory, report


T = TypeVar("T")


def settled_capture(
    config: Config,
    now: datetime,
    settle: bool = True,
    progress: Callable[[int, int], None] | None = None,
    inspect: Callable[[Captured], T] | None = None,
) -> tuple[Inventory, CheckReport, T | None]:
    """``settled_inventory``, plus ``inspect(captured)`` of the capture the report comes from.

    The one path from the live stores to a check report (``check``, ``reconcile`` and
    ``doctor`` all take it): ``inspect`` runs while the copies exist (doctor's probes of the
    copied files) and its result is returned, from the re-capture when there was one.
    """
    pending = state.unfinished_restore(config.state_dir)
    if pending is not None:
        raise UnavailableError(
            f"a restore of snapshot {pending} did not finish: the stores may be a mix",
            "memsync restore --resume (finishes it or rolls it back), then try again",
        )
    settled = _capture_and_judge(config, now.date(), progress, inspect)
    report = settled[1]
    if settle and report.count(Severity.INFO):
        wait = report.window.history_finished_at + IN_FLIGHT_MARGIN - datetime.now(UTC)
        time.sleep(min(max(wait.total_seconds(), 0.0) + 0.05, 3.0))
        settled = _capture_and_judge(config, now.date(), progress, inspect)
    return settled


def _capture_and_judge(
    config: Config,
    today: date,
    progress: Callable[[int, int], None] | None,
    inspect: Callable[[Captured], T] | None,
) -> tuple[Inventory, CheckReport, T | None]:
    with deployment.temporary_capture(config) as captured:
        inventory = deployment.read_inventory(captured, config, progress)
        inspected = inspect(captured) if inspect is not None else None
        around = surroundings(config, captured)
    return inventory, judge(inventory, today, around), inspected


def surroundings(config: Config, captured: Captured) -> Surroundings:
    """What the judge needs beyond the copies: does history.db exist, who holds the store.

    Reads /proc (``VectorStore.holder``); never takes a lock.
    """
    store = captured.store
    try:
        holder = store.holder()
    except (OSError, MemsyncError):  # /proc or the store unreadable: no cause to name
        holder = None
    foreign = holder is not None and holder.sees_same_file is False
    return Surroundings(
        history_path=str(config.history_db_path),
        history_file_exists=captured.history_copy is not None,
        store_location=store.where,
        foreign_holder=holder.describe() if foreign and holder is not None else None,
        store_kind=store.kind,
    )


def judge(inventory: Inventory, today: date, around: Surroundings = NOTHING_AROUND) -> CheckReport:
    """Build the check report of an inventory (and its capture's surroundings). Pure."""
    return CheckReport(
        findings=tuple(find_problems(inventory, today, around)),
        points=len(inventory.points),
        history_memories=len(inventory.history),
        history_rows=inventory.history_rows,
        window=inventory.window,
    )
