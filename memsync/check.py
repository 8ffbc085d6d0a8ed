"""``check``: prove that vectors and history agree, finding by finding.

``find_problems`` is pure (inventory and ``today`` in, sorted findings out); ``run_check`` is
the thin I/O half: capture into ``work_dir``, read the copies, judge, clean up. Finding codes,
severities and conditions are CONTRACT.md's; docs/reference/findings.md explains each.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from memsync import state
from memsync.config import Config
from memsync.errors import UnavailableError
from memsync.model import (
    CaptureWindow,
    CheckReport,
    Finding,
    Inventory,
    MemoryHistory,
    Point,
    Severity,
    expires_on,
    parse_time,
)
from memsync.stores import deployment

# Every finding code check emits, with its severity (CONTRACT.md; docs/reference/findings.md).
FINDING_CODES: dict[str, Severity] = {
    "collection-missing": Severity.ERROR,
    "history-missing": Severity.ERROR,
    "dimension-mismatch": Severity.ERROR,
    "missing-point": Severity.ERROR,
    "resurrected-point": Severity.ERROR,
    "orphan-point": Severity.ERROR,
    "text-mismatch": Severity.ERROR,
    "hash-mismatch": Severity.ERROR,
    "missing-payload": Severity.ERROR,
    "dangling-entity-link": Severity.WARNING,
    "expired-memory": Severity.WARNING,
    "duplicate-memory": Severity.WARNING,
    "orphan-messages": Severity.WARNING,
    "in-flight": Severity.INFO,
}
# Writes start a little before they land (mem0 stamps created_at, embeds, then inserts).
IN_FLIGHT_MARGIN = timedelta(seconds=2)
FIX_RECONCILE = "memsync reconcile"
LIVE_EVENTS = frozenset({"ADD", "UPDATE"})
SCOPE_KEYS = ("agent_id", "run_id", "user_id")  # mem0's scope order: sorted key names


def session_scope(payload: Mapping[str, Any]) -> str:
    """Return mem0's session scope string for a payload (mem0ai 2.2.1 ``_build_session_scope``)."""
    parts = []
    for key in SCOPE_KEYS:
        value = payload.get(key)
        if value:
            escaped = str(value).replace("%", "%25").replace("&", "%26").replace("=", "%3D")
            parts.append(f"{key}={escaped}")
    return "&".join(parts)


def in_window(moment: datetime | None, window: CaptureWindow) -> bool:
    """Tell whether ``moment`` lies inside the capture window.

    The window runs from the vector capture's start, less ``IN_FLIGHT_MARGIN``, to the history
    capture's end. None never counts.
    """
    if moment is None:
        return False
    return window.vectors_at - IN_FLIGHT_MARGIN <= moment <= window.history_finished_at


def find_problems(inventory: Inventory, today: date) -> list[Finding]:
    """Return every disagreement between the captured stores, sorted as the contract says.

    Args:
        inventory: the captured stores, read into values.
        today: the current UTC date (for ``expired-memory``).

    Returns:
        Findings sorted by severity, code, collection, memory_id. A disagreement explained by
        a write inside the capture window is reported once, as ``in-flight`` (info). Pure.
    """
    findings: list[Finding] = []
    findings += _store_level(inventory)
    if inventory.qdrant_present and inventory.collection in inventory.collections:
        if inventory.history_present:
            findings += _point_vs_history(inventory)
        findings += _payload_checks(inventory.points.values(), inventory.collection)
        findings += _point_sizes(inventory)
        findings += _warnings(inventory, today)
    return sorted(findings, key=Finding.sort_key)


def _finding(
    inventory: Inventory,
    code: str,
    severity: Severity,
    memory_id: str | None,
    message: str,
    moment: datetime | None = None,
    fix: str | None = FIX_RECONCILE,
) -> Finding:
    if moment is not None and in_window(moment, inventory.window):
        return Finding(
            code="in-flight",
            severity=Severity.INFO,
            collection=inventory.collection,
            memory_id=memory_id,
            message=f"{code} explained by a write inside the capture window "
            f"({moment.isoformat()}): {message}",
            fix="none needed; run check again",
        )
    return Finding(
        code=code,
        severity=severity,
        collection=inventory.collection,
        memory_id=memory_id,
        message=message,
        fix=fix,
    )


def _store_level(inventory: Inventory) -> list[Finding]:
    findings = []
    live = sum(1 for memory in inventory.history.values() if memory.last.event in LIVE_EVENTS)
    collection = inventory.collections.get(inventory.collection)
    if collection is None and live:
        where = "" if inventory.qdrant_present else " (the embedded Qdrant directory itself is gone)"
        findings.append(
            Finding(
                code="collection-missing",
                severity=Severity.ERROR,
                collection=inventory.collection,
                message=f"collection {inventory.collection!r} does not exist{where} while history "
                f"has {live} live memories (a wiped /tmp, a deleted directory, a wrong path)",
                fix="memsync restore <snapshot>, or point [mem0] at the right Qdrant path",
            )
        )
    if not inventory.history_present and inventory.points:
        findings.append(
            Finding(
                code="history-missing",
                severity=Severity.ERROR,
                collection=inventory.collection,
                message=f"history.db is missing or has no history table while "
                f"{len(inventory.points)} points exist",
                fix="memsync restore <snapshot> (history.db), or memsync reconcile to record "
                "the points' ADD events",
            )
        )
    for name, info in sorted(inventory.collections.items()):
        if name not in (inventory.collection, f"{inventory.collection}_entities"):
            continue
        for key, size in inventory.expected_dims:
            if info.vector_size is not None and info.vector_size != size:
                findings.append(
                    Finding(
                        code="dimension-mismatch",
                        severity=Severity.ERROR,
                        collection=name,
                        message=f"collection {name!r} stores vectors of size {info.vector_size} "
                        f"but {key} is {size}: mem0 accepts it at start, then inserts and "
                        "searches fail",
                        fix="set the config to the collection's size, or re-embed into a new "
                        "collection of the right size",
                    )
                )
    return findings


def _point_vs_history(inventory: Inventory) -> list[Finding]:
    findings = []
    points, history = inventory.points, inventory.history
    for point_id, point in points.items():
        memory = history.get(point_id)
        if memory is None:
            findings.append(
                _finding(
                    inventory,
                    "orphan-point",
                    Severity.ERROR,
                    point_id,
                    "point exists but history has no event for it (its history write failed "
                    "or history rows were deleted)",
                    _point_time(point),
                )
            )
            continue
        last = memory.last
        if last.event == "DELETE":
            findings.append(
                _finding(
                    inventory,
                    "resurrected-point",
                    Severity.ERROR,
                    point_id,
                    f"point exists but the memory's last history event is DELETE "
                    f"(history row {last.id})",
                    last.at,
                )
            )
        elif last.event in LIVE_EVENTS:
            data = point.payload.get("data")
            if isinstance(data, str) and last.new_memory is not None and data != last.new_memory:
                findings.append(
                    _finding(
                        inventory,
                        "text-mismatch",
                        Severity.ERROR,
                        point_id,
                        f"payload data differs from the new_memory of the last {last.event} "
                        f"event (history row {last.id})",
                        _latest(last.at, _point_time(point)),
                    )
                )
    for memory_id, memory in history.items():
        if memory.last.event in LIVE_EVENTS and memory_id not in points:
            findings.append(
                _finding(
                    inventory,
                    "missing-point",
                    Severity.ERROR,
                    memory_id,
                    f"the memory's last history event is {memory.last.event} "
                    f"(history row {memory.last.id}) but no point has its id",
                    memory.last.at,
                )
            )
    return findings


def _latest(*moments: datetime | None) -> datetime | None:
    present = [moment for moment in moments if moment is not None]
    return max(present) if present else None


def _point_time(point: Point) -> datetime | None:
    return _latest(
        parse_time(point.payload.get("updated_at")), parse_time(point.payload.get("created_at"))
    )


def _payload_checks(points: Iterable[Point], collection: str) -> list[Finding]:
    findings = []
    for point in points:
        data = point.payload.get("data")
        if not isinstance(data, str):
            findings.append(
                Finding(
                    code="missing-payload",
                    severity=Severity.ERROR,
                    collection=collection,
                    memory_id=point.id,
                    message="point has no payload 'data' text: mem0 cannot return this memory",
                    fix=FIX_RECONCILE,
                )
            )
            continue
        stored = point.payload.get("hash")
        expected = hashlib.md5(data.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
        if stored != expected:
            shown = repr(stored) if isinstance(stored, str | None) else f"of type {type(stored).__name__}"
            findings.append(
                Finding(
                    code="hash-mismatch",
                    severity=Severity.ERROR,
                    collection=collection,
                    memory_id=point.id,
                    message=f"payload hash {shown} is not the md5 of payload data "
                    f"({expected}): the payload was edited outside mem0",
                    fix=FIX_RECONCILE,
                )
            )
    return findings


def _point_sizes(inventory: Inventory) -> list[Finding]:
    """Points whose vector is not the collection's size: mem0 cannot even open such a store."""
    expected = inventory.collections[inventory.collection].vector_size
    if expected is None:
        return []
    return [
        Finding(
            code="dimension-mismatch",
            severity=Severity.ERROR,
            collection=inventory.collection,
            memory_id=point.id,
            message=f"point's vector has {point.vector_size} dimensions, the collection {expected}",
            fix="memsync reconcile re-embeds it through mem0 (or restore a snapshot)",
        )
        for point in inventory.points.values()
        if point.vector_size is not None and point.vector_size != expected
    ]


def _warnings(inventory: Inventory, today: date) -> list[Finding]:
    findings: list[Finding] = []
    findings += _dangling_links(inventory)
    findings += _expired(inventory, today)
    findings += _duplicates(inventory)
    findings += _orphan_messages(inventory)
    return findings


def _dangling_links(inventory: Inventory) -> list[Finding]:
    findings = []
    for entity in inventory.entities:
        for memory_id in entity.linked_memory_ids:
            if memory_id in inventory.points:
                continue
            memory: MemoryHistory | None = inventory.history.get(memory_id)
            findings.append(
                _finding(
                    inventory,
                    "dangling-entity-link",
                    Severity.WARNING,
                    memory_id,
                    f"entity {entity.entity_id} links memory {memory_id}, which has no point",
                    memory.last.at if memory else None,
                )
            )
    return findings


def _expired(inventory: Inventory, today: date) -> list[Finding]:
    findings = []
    for point in inventory.points.values():
        expires = expires_on(point.payload)
        if expires is not None and expires < today:
            findings.append(
                Finding(
                    code="expired-memory",
                    severity=Severity.WARNING,
                    collection=inventory.collection,
                    memory_id=point.id,
                    message=f"memory expired on {expires.isoformat()} and is still stored "
                    "(mem0 hides it but never deletes it)",
                    fix="memsync prune",
                )
            )
    return findings


def _duplicates(inventory: Inventory) -> list[Finding]:
    groups: dict[tuple[object, ...], list[Point]] = defaultdict(list)
    for point in inventory.points.values():
        payload = point.payload
        digest = payload.get("hash")
        if isinstance(digest, str):
            key = (digest, *(_hashable(payload.get(name)) for name in SCOPE_KEYS))
            groups[key].append(point)
    findings = []
    for group in groups.values():
        if len(group) < 2:
            continue
        ordered = sorted(group, key=lambda p: (str(p.payload.get("created_at") or ""), p.id))
        for extra in ordered[1:]:
            findings.append(
                Finding(
                    code="duplicate-memory",
                    severity=Severity.WARNING,
                    collection=inventory.collection,
                    memory_id=extra.id,
                    message=f"same text as memory {ordered[0].id} in the same scope "
                    f"({session_scope(extra.payload) or 'no scope'})",
                    fix=f"memsync reconcile --only duplicate-memory (or memsync forget {extra.id})",
                )
            )
    return findings


def _hashable(value: object) -> object:
    """A scope value usable as a dict key (payloads may hold lists or dicts)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)[:200]


def _orphan_messages(inventory: Inventory) -> list[Finding]:
    live_scopes = {session_scope(point.payload) for point in inventory.points.values()}
    findings = []
    for scope in inventory.message_scopes:
        if scope.scope in live_scopes:
            continue
        finding = _finding(
            inventory,
            "orphan-messages",
            Severity.WARNING,
            None,
            f"{scope.row_count} raw messages of session scope {scope.scope!r} remain with no "
            "memory left in that scope (raw user text that outlived its memories)",
            scope.newest_at,
            fix="memsync reconcile --only orphan-messages",
        )
        findings.append(finding)
    return findings


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
