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

from memsync import findings, state
from memsync.config import Config
from memsync.errors import UnavailableError
from memsync.model import CheckReport, Inventory, Severity
from memsync.problems import (
    IN_FLIGHT_MARGIN,
    LIVE_EVENTS,
    SCOPE_KEYS,
    find_problems,
    in_window,
    session_scope,
)
from memsync.stores import deployment

__all__ = [
    "FINDING_CODES",
    "IN_FLIGHT_MARGIN",
    "LIVE_EVENTS",
    "SCOPE_KEYS",
    "find_problems",
    "in_window",
    "judge",
    "run_check",
    "session_scope",
    "settled_inventory",
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
    pending = state.unfinished_restore(config.state_dir)
    if pending is not None:
        raise UnavailableError(
            f"a restore of snapshot {pending} did not finish: the stores may be a mix",
            "memsync restore --resume (finishes it or rolls it back), then try again",
        )
    inventory, report = _capture_and_judge(config, now.date(), progress)
    if settle and report.count(Severity.INFO):
        wait = report.window.history_finished_at + IN_FLIGHT_MARGIN - datetime.now(UTC)
        time.sleep(min(max(wait.total_seconds(), 0.0) + 0.05, 3.0))
        inventory, report = _capture_and_judge(config, now.date(), progress)
    return inventory, report


def _capture_and_judge(
    config: Config, today: date, progress: Callable[[int, int], None] | None
) -> tuple[Inventory, CheckReport]:
    with deployment.temporary_capture(config) as captured:
        inventory = deployment.read_inventory(captured, config, progress)
    return inventory, judge(inventory, today)


def judge(inventory: Inventory, today: date) -> CheckReport:
    """Build the check report of an inventory. Pure."""
    return CheckReport(
        findings=tuple(find_problems(inventory, today)),
        points=len(inventory.points),
        history_memories=len(inventory.history),
        history_rows=inventory.history_rows,
        window=inventory.window,
    )
