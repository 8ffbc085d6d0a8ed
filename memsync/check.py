"""``check``: prove that vectors and history agree, finding by finding.

``find_problems`` (in ``memsync.judge.rules``, re-exported here) is pure: inventory and ``today`` in,
sorted findings out. ``run_check`` is the thin I/O half: capture into ``work_dir``, read the
copies, judge, clean up. Finding codes, severities and fixes live in ``memsync.findings``;
docs/reference/findings.md explains each.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import TypeVar

from memsync import findings, state
from memsync.deployment import Deployment
from memsync.errors import MemsyncError, UnavailableError
from memsync.judge.rules import (
    LIVE_EVENTS,
    NOTHING_AROUND,
    SCOPE_KEYS,
    Memories,
    OutOfOrder,
    Surroundings,
    find_problems,
    in_window,
    judge_memories,
    merge_by_id,
    session_scope,
)
from memsync.model import (
    CaptureWindow,
    CheckReport,
    Finding,
    Inventory,
    Point,
    Severity,
    count_scopes,
)
from memsync.stores import capture
from memsync.stores.capture import Captured

__all__ = [
    "FINDING_CODES",
    "LIVE_EVENTS",
    "SCOPE_KEYS",
    "Surroundings",
    "find_problems",
    "in_window",
    "judge",
    "judge_capture",
    "run_check",
    "session_scope",
    "settled_capture",
    "settled_inventory",
    "settled_named",
    "settled_report",
    "surroundings",
]

# Every finding code check emits, with its severity (from the registry, memsync.findings).
FINDING_CODES: dict[str, Severity] = {
    code: findings.spec(code).severity for code in findings.codes(findings.Source.CHECK)
}


T = TypeVar("T")
Held = TypeVar("Held")


def run_check(
    deployment: Deployment,
    now: datetime,
    settle: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> CheckReport:
    """Capture both stores into ``work_dir``, judge them, remove the copies.

    When some disagreement may be a write in flight (``maybe_in_flight``) and ``settle`` is
    set, waits until the margin has passed (at most ~3 s) and captures once more, so a write
    that was merely in flight disappears and a real failure that just happened is reported
    as the error it is. Reads the deployment only (no lock, no mem0 import); writes only its
    own work directory. Judges the memories as a stream (``judge_capture``): memory stays
    flat in the number of memories where the vector store's capture is in id order (pgvector).

    Args:
        deployment: the deployment (``memsync.deployment``).
        now: the current time (aware UTC); ``today`` for expiry is its date.
        settle: allow the one re-capture.
        progress: called as ``progress(points_read, points_total)`` while decoding.

    Raises:
        UnavailableError: both stores absent, or a store file unreadable or damaged.
        TryLaterError: a store is busy, or the work directory is full or unwritable.

    Records what it counted in ``<state_dir>/last-check.json`` (``state.record_check``), so a
    restore after a lost disk can say what the snapshot lacks; a state directory it cannot
    write is passed over (the check itself still answers).
    """
    report = settled_report(deployment, now, settle, progress)[0]
    state.record_check(deployment.state, report)
    return report


def settled_report(
    deployment: Deployment,
    now: datetime,
    settle: bool = True,
    progress: Callable[[int, int], None] | None = None,
    inspect: Callable[[Captured], T] | None = None,
) -> tuple[CheckReport, T | None]:
    """``run_check``, plus ``inspect(captured)`` of the capture the report comes from.

    ``settled_capture`` without the inventory: the memories are judged as a stream
    (``judge_capture``). ``inspect`` runs while the copies exist (doctor's probes of the copied
    files). Without ``inspect``, live files in WAL mode are read in place, not copied
    (``capture.temporary_capture(in_place=True)``). Raises as ``run_check``.
    """
    store, config = deployment.vector_store, deployment.config

    def once() -> tuple[None, CheckReport, T | None]:
        with capture.temporary_capture(store, config, in_place=inspect is None) as captured:
            report = judge_capture(
                captured, deployment, now.date(), surroundings(deployment, captured), progress
            )
            if captured.in_place:  # the live files' read snapshots were held until now
                held_s = (datetime.now(UTC) - report.window.vectors_at).total_seconds()
                report = replace(report, window=replace(report.window, longest_read_s=held_s))
            return None, report, inspect(captured) if inspect is not None else None

    _, report, inspected = _settled(deployment, settle, once)
    return report, inspected


def settled_inventory(
    deployment: Deployment,
    now: datetime,
    settle: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Inventory, CheckReport]:
    """Capture and judge, re-capturing once when writes were in flight (see ``run_check``).

    Returns the inventory and its report; the copies are removed. Raises as ``run_check``, and
    UnavailableError while a restore that died is unfinished (the stores may be a mix).
    """
    inventory, report, _ = settled_capture(deployment, now, settle, progress)
    return inventory, report


def settled_capture(
    deployment: Deployment,
    now: datetime,
    settle: bool = True,
    progress: Callable[[int, int], None] | None = None,
    inspect: Callable[[Captured], T] | None = None,
) -> tuple[Inventory, CheckReport, T | None]:
    """``settled_inventory``, plus ``inspect(captured)`` of the capture the report comes from.

    The one path from the live stores to a check report with its inventory (``reconcile``,
    ``forget`` and ``doctor`` take it; ``check`` takes ``run_check``, the same capture and
    judge without holding the inventory): ``inspect`` runs while the copies exist (doctor's
    probes of the copied files) and its result is returned, from the re-capture when there
    was one.
    """
    return _settled(
        deployment, settle, lambda: _capture_and_judge(deployment, now.date(), progress, inspect)
    )


def settled_named(
    deployment: Deployment,
    now: datetime,
    whole: Callable[[CheckReport], bool],
    *,
    also: Iterable[str] = (),
    keep_point: Callable[[Point], bool] | None = None,
    settle: bool = True,
) -> tuple[Inventory, CheckReport]:
    """``settled_inventory`` holding only what its findings name (``capture.read_named``).

    The report is judged as a stream (``judge_capture``), then the copies are read again for
    the memory ids its findings name and ``also``, and the points ``keep_point`` accepts, so
    memory grows with those, not with the store; when ``whole(report)``, the whole inventory
    is read instead. Raises as ``settled_inventory``.
    """
    wanted = frozenset(also)
    store, config = deployment.vector_store, deployment.config

    def once() -> tuple[Inventory, CheckReport, None]:
        with capture.temporary_capture(store, config) as captured:
            around = surroundings(deployment, captured)
            report = judge_capture(captured, deployment, now.date(), around)
            if whole(report):
                inventory = capture.read_inventory(store, captured, config)
            else:
                named = wanted | {f.memory_id for f in report.findings if f.memory_id}
                inventory = capture.read_named(store, captured, config, named, keep_point)
        return inventory, report, None

    inventory, report, _ = _settled(deployment, settle, once)
    return inventory, report


def _settled(
    deployment: Deployment, settle: bool, once: Callable[[], tuple[Held, CheckReport, T | None]]
) -> tuple[Held, CheckReport, T | None]:
    """Run ``once`` (a capture and its judgement), and again when a write was in flight."""
    pending = state.unfinished_restore(deployment.state)
    if pending is not None:
        raise UnavailableError(
            f"a restore of snapshot {pending} did not finish: the stores may be a mix",
            "memsync restore --resume (finishes it or rolls it back), then try again",
        )
    settled = once()
    first = settled[1]
    if settle and maybe_in_flight(first):
        wait_out_the_margin(first.window)
        held, again, inspected = once()
        settled = (held, seen_twice(first, again), inspected)
    return settled


def wait_out_the_margin(window: CaptureWindow) -> None:
    """Sleep until the in-flight margin has passed since ``window``'s capture (at most ~margin).

    A write that was in flight then has landed by now, or has failed: what the next capture
    sees of it again is the error it is.
    """
    wait = window.history_finished_at + window.in_flight_margin - datetime.now(UTC)
    time.sleep(min(max(wait.total_seconds(), 0.0) + 0.05, window.in_flight_margin_s + 1.0))


# the pair's disagreements: a write in flight between the two stores can leave each of them,
# and not always dated inside the capture window (see maybe_in_flight)
PAIR_CODES = frozenset({"missing-point", "orphan-point", "resurrected-point", "text-mismatch"})


def maybe_in_flight(report: CheckReport) -> bool:
    """Whether a write in flight may explain some of the report's findings. Pure.

    ``in-flight`` findings say so; an error of ``PAIR_CODES`` may too, undated: mem0 deletes a
    point before it writes the DELETE event, and until that event lands history still dates
    the memory by its last ADD or UPDATE, maybe days back (a ``missing-point``); a
    ``memory.reset()`` drops history before the points (``orphan-point``).
    """
    return any(f.code == "in-flight" or _disagreement(f) for f in report.findings)


def seen_twice(before: CheckReport, after: CheckReport) -> CheckReport:
    """``after`` with each pair disagreement it alone shows made ``in-flight``. Pure.

    ``before`` is a capture at least the in-flight margin earlier (``wait_out_the_margin``).
    An error of ``PAIR_CODES`` on a memory (or collection) with no finding in ``before`` may be
    the next write in flight (a ``delete_all`` goes on deleting): it is ``in-flight``, and
    the next check judges it. One found in both captures is the error it is.
    """
    seen = {_key(f) for f in before.findings if f.code == "in-flight" or _disagreement(f)}
    found = [
        as_in_flight(f, ONE_CAPTURE) if _disagreement(f) and _key(f) not in seen else f
        for f in after.findings
    ]
    return replace(after, findings=tuple(sorted(found, key=lambda f: f.sort_key())))


def _disagreement(finding: Finding) -> bool:
    return finding.code in PAIR_CODES and finding.severity is Severity.ERROR


def _key(finding: Finding) -> str:
    return finding.memory_id or f"{finding.code} {finding.collection}"


ONE_CAPTURE = (
    "a write in flight: in this capture only, not in the one a margin before it (such as a "
    "delete whose DELETE event had not landed)"
)


def as_in_flight(finding: Finding, why: str) -> Finding:
    """``finding``, a pair disagreement ``why`` explains (a write in flight), ``in-flight``. Pure."""
    return findings.make(
        "in-flight",
        f"{finding.code} explained by {why}: {finding.message}",
        collection=finding.collection,
        memory_id=finding.memory_id,
        scope=finding.scope,
        expected=finding.expected,
        observed=finding.observed,
    )


def _capture_and_judge(
    deployment: Deployment,
    today: date,
    progress: Callable[[int, int], None] | None,
    inspect: Callable[[Captured], T] | None,
) -> tuple[Inventory, CheckReport, T | None]:
    store, config = deployment.vector_store, deployment.config
    with capture.temporary_capture(store, config) as captured:
        inventory = capture.read_inventory(store, captured, config, progress)
        inspected = inspect(captured) if inspect is not None else None
        around = surroundings(deployment, captured)
    return inventory, judge(inventory, today, around), inspected


def judge_capture(
    captured: Captured,
    deployment: Deployment,
    today: date,
    around: Surroundings = NOTHING_AROUND,
    progress: Callable[[int, int], None] | None = None,
    sizes: Counter[int | None] | None = None,
) -> CheckReport:
    """``judge(read_inventory(captured))`` without holding the inventory. Reads the copies only.

    ``sizes``, when given, is filled with the memory collection's points per vector size (None:
    a point without a dense vector), counted on the same read.

    Points (``VectorStore.points_in_order``) and history's memories (``history.iter_memories``)
    are merged by id and judged ``CHUNK_MEMORIES`` at a time (``problems.judge_memories``), so
    what is held is a chunk, whatever the number of memories (embedded Qdrant's points are
    sorted through a temporary SQLite database: ``qdrant_embedded.rows.points_in_order``).
    The same report as ``judge(read_inventory(...))``: when a
    stream turns out not to be in order (an id the server's ``lower()`` sorts otherwise than
    Python's), the capture is read whole and judged that way.

    Raises:
        UnavailableError: as ``capture.read_inventory`` (the live file named).
    """
    store, config = deployment.vector_store, deployment.config
    try:
        with capture.naming_live_files(captured):
            summary, (points, memories) = capture.memory_streams(store, captured, config, progress)
            judged = judge_memories(
                Memories(
                    summary=summary,
                    pairs=merge_by_id(points if sizes is None else _sized(points, sizes), memories),
                    points_again=lambda: store.points_in_order(
                        captured.vectors, capture.CHECKED_PAYLOAD_KEYS
                    ),
                ),
                today,
                around,
            )
    except OutOfOrder:
        inventory = capture.read_inventory(store, captured, config, progress)
        if sizes is not None:
            sizes.clear()
            sizes.update(point.vector_size for point in inventory.points.values())
        return judge(inventory, today, around)
    return CheckReport(
        findings=tuple(judged.findings),
        points=judged.points,
        history_memories=judged.memories,
        history_rows=summary.history_rows,
        window=summary.window,
        scopes=judged.scopes,
    )


def _sized(points: Iterator[Point], sizes: Counter[int | None]) -> Iterator[Point]:
    """``points``, each counted in ``sizes`` by its vector size as it passes."""
    for point in points:
        sizes[point.vector_size] += 1
        yield point


def surroundings(deployment: Deployment, captured: Captured) -> Surroundings:
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
        history_path=str(deployment.history),
        history_file_exists=captured.history_copy is not None,
        store_location=store.where,
        foreign_holder=holder.describe() if foreign and holder is not None else None,
        missing_collection=store.describe_missing(captured.qdrant_present),
    )


def judge(inventory: Inventory, today: date, around: Surroundings = NOTHING_AROUND) -> CheckReport:
    """Build the check report of an inventory (and its capture's surroundings). Pure."""
    return CheckReport(
        findings=tuple(find_problems(inventory, today, around)),
        points=len(inventory.points),
        history_memories=len(inventory.history),
        history_rows=inventory.history_rows,
        window=inventory.window,
        scopes=count_scopes(p.payload for p in inventory.points.values()),
    )
