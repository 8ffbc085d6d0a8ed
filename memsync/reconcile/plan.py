"""The reconcile planner: one small pure rule per finding code, dispatched through a table.

``plan_reconcile`` groups check's findings by code and hands each group to ``RULES[code]``; a
rule looks only at its findings and the captured inventory and returns actions. Which codes a
plain ``reconcile`` answers (damage) and which only with ``--only`` (policy) comes from the
registry (``memsync.findings``); ``tests/unit/test_findings_registry.py`` proves every repaired
code has exactly one rule. Policy: docs/reference/commands/reconcile.md. Nothing here does I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from memsync import findings
from memsync.findings import Repair
from memsync.judge.rules import LIVE_EVENTS
from memsync.model import Finding, Inventory, Recovery, Severity, parse_time
from memsync.reconcile.actions import (
    Action,
    ActionKind,
    Context,
    Rule,
    act,
    add_row,
    event_row,
    payload_time,
    text_of,
)

DAMAGE_CODES = findings.repaired(Repair.DAMAGE)
POLICY_CODES = findings.repaired(Repair.POLICY)
LEGACY_WHY = (
    "the collection keeps qdrant-client's legacy dbm point store: its points are invisible, "
    "not lost, so nothing is deleted, recorded as lost or put back until it is migrated"
)


def _each(rule: Callable[[Finding, Context], list[Action]]) -> Rule:
    """Lift a one-finding rule to the table's signature (findings of one code, in order)."""
    return lambda group, ctx: [action for finding in group for action in rule(finding, ctx)]


# --- one rule per code --------------------------------------------------------------------------


def _resurrected_point(finding: Finding, ctx: Context) -> list[Action]:
    return [
        act(
            finding,
            ActionKind.DELETE_POINT,
            "its last history event is DELETE: tombstones win, delete it through mem0",
        )
    ]


def _missing_point(finding: Finding, ctx: Context) -> list[Action]:
    last, memory_id = ctx.last(finding), finding.memory_id
    if not memory_id or last is None:
        return []

    def close(why: str) -> list[Action]:
        row = event_row(
            memory_id, "DELETE", last.new_memory, None, last.created_at, ctx.stamp, ctx.new_id()
        )
        return [act(finding, ActionKind.RECORD_EVENT, why, row=row)]

    source = ctx.recoveries.get(memory_id)
    if memory_id in ctx.forgetting:
        return close(
            "a forget was deleting it when memsync stopped: close it with its DELETE event "
            "(never brought back)"
        )
    if source is not None:
        why = (
            f"history says it is live; snapshot {source.snapshot_id} holds it with the text "
            "history expects: put it back with its original id, vector and payload"
        )
        return [
            act(
                finding,
                ActionKind.RESTORE_POINT,
                why,
                snapshot_id=source.snapshot_id,
                storage=str(source.storage),
                text=last.new_memory,
            )
        ]
    if ctx.record_lost:
        return close(
            "no snapshot holds it with the expected text: recorded as lost (--record-lost), "
            "with a DELETE event"
        )
    why = (
        "no snapshot holds it with the text history expects (or something newer says it was "
        "deleted): not invented; pass --record-lost to record it as lost"
    )
    return [act(finding, ActionKind.REPORT, why, status="unrecoverable")]


def _orphan_point(finding: Finding, ctx: Context) -> list[Action]:
    point = ctx.point(finding)
    if point is None:
        return []
    return [
        act(
            finding,
            ActionKind.RECORD_EVENT,
            "real content whose history write failed or was lost: keep it "
            "and record the missing ADD",
            row=add_row(point, ctx.new_id, finding.memory_id),
        )
    ]


def _history_missing(finding: Finding, ctx: Context) -> list[Action]:
    if not ctx.history_writable:
        return [
            act(
                finding,
                ActionKind.REPORT,
                f"history.db does not exist at {finding.path or 'the configured path'}: check "
                "the path first (mem0_dir, [mem0] history_db_path); a new history.db is created "
                "only with --create-history",
                target=finding.collection,
                status="unrecoverable",
            )
        ]
    return [
        act(
            finding,
            ActionKind.RECORD_EVENT,
            "history.db lost its rows: record the ADD of every point",
            target=point.id,
            row=add_row(point, ctx.new_id),
        )
        for point in sorted(ctx.inventory.points.values(), key=lambda p: p.id)
    ]


def _text_mismatch(finding: Finding, ctx: Context) -> list[Action]:
    point, last = ctx.point(finding), ctx.last(finding)
    if point is None or last is None:
        return []
    point_at = parse_time(point.payload.get("updated_at")) or parse_time(
        point.payload.get("created_at")
    )
    if point_at is None or (last.at is not None and point_at <= last.at):
        return [
            act(
                finding,
                ActionKind.UPDATE_POINT,
                "history is newer (or the same age): update the point "
                "through mem0, which re-embeds the text",
                text=last.new_memory,
            )
        ]
    actions = [
        act(
            finding,
            ActionKind.RECORD_EVENT,
            "the point is newer than the last event: record the UPDATE it missed",
            row=event_row(
                finding.memory_id or point.id,
                "UPDATE",
                last.new_memory,
                text_of(point),
                payload_time(point, "created_at"),
                payload_time(point, "updated_at"),
                ctx.new_id(),
            ),
        )
    ]
    if "hash-mismatch" in ctx.codes_of.get(point.id, frozenset()):
        actions.append(
            act(
                finding,
                ActionKind.UPDATE_POINT,
                "and its hash is stale: rewrite it through mem0",
                code="hash-mismatch",
                text=text_of(point),
            )
        )
    return actions


def _hash_mismatch(finding: Finding, ctx: Context) -> list[Action]:
    point = ctx.point(finding)
    if point is None:
        return []
    if "text-mismatch" in ctx.codes_of.get(point.id, frozenset()) and "text-mismatch" in ctx.wanted:
        return []  # answered with the text-mismatch
    return [
        act(
            finding,
            ActionKind.UPDATE_POINT,
            "payload hash is not the md5 of its text: rewrite it through mem0",
            text=text_of(point),
        )
    ]


def _missing_payload(finding: Finding, ctx: Context) -> list[Action]:
    last = ctx.last(finding)
    if last is not None and last.event in LIVE_EVENTS and last.new_memory is not None:
        return [
            act(
                finding,
                ActionKind.UPDATE_POINT,
                "the point lost its text: write history's text back through mem0",
                text=last.new_memory,
            )
        ]
    return [
        act(
            finding,
            ActionKind.REPORT,
            "the point lost its text and history does not know it",
            status="unrecoverable",
        )
    ]


def _restore_instead(finding: Finding, ctx: Context) -> list[Action]:
    """``collection-missing`` and ``dimension-mismatch``: nothing reconcile can write fixes them."""
    if finding.code == "dimension-mismatch" and ctx.point(finding) is not None:
        return [
            act(
                finding,
                ActionKind.REPORT,
                "its vector has the wrong size, and qdrant-client 1.20 cannot "
                "even open a collection with mixed sizes, so mem0 cannot repair it: restore a snapshot "
                "(memsync restore)",
                status="unrecoverable",
            )
        ]
    return [
        act(
            finding,
            ActionKind.REPORT,
            "not something reconcile can repair: restore the deployment from a "
            "snapshot (memsync restore) or fix the config",
            target=finding.collection,
            status="unrecoverable",
        )
    ]


def _policy_delete(finding: Finding, ctx: Context) -> list[Action]:
    return [
        act(
            finding, ActionKind.DELETE_POINT, "policy requested with --only: delete it through mem0"
        )
    ]


def _orphan_messages(finding: Finding, ctx: Context) -> list[Action]:
    return [
        act(
            finding,
            ActionKind.DELETE_MESSAGES,
            "policy requested with --only: delete the raw messages of a scope with no memory left",
            scope=finding.scope,
        )
    ]


def _relink_entities(group: Sequence[Finding], ctx: Context) -> list[Action]:
    """One action per entity that links dead memories: drop those links, or the entity when none remain."""
    dead: dict[str, set[str]] = defaultdict(set)
    for finding in group:
        for entity in ctx.inventory.entities:
            if finding.memory_id and finding.memory_id in entity.linked_memory_ids:
                dead[entity.entity_id].add(finding.memory_id)
    actions = []
    for entity in ctx.inventory.entities:
        gone = dead.get(entity.entity_id)
        if gone:
            remaining = [m for m in entity.linked_memory_ids if m not in gone]
            actions.append(
                Action(
                    index=0,
                    kind=ActionKind.RELINK_ENTITY,
                    code="dangling-entity-link",
                    memory_id=sorted(gone)[0],
                    why=f"entity {entity.entity_id} links memories with no point: "
                    + (
                        "delete the entity (no link remains)"
                        if not remaining
                        else "drop those links"
                    ),
                    params={"entity_id": entity.entity_id, "remaining": remaining},
                )
            )
    return actions


RULES: Mapping[str, Rule] = {
    "resurrected-point": _each(_resurrected_point),
    "missing-point": _each(_missing_point),
    "orphan-point": _each(_orphan_point),
    "history-missing": _each(_history_missing),
    "text-mismatch": _each(_text_mismatch),
    "hash-mismatch": _each(_hash_mismatch),
    "missing-payload": _each(_missing_payload),
    "collection-missing": _each(_restore_instead),
    "dimension-mismatch": _each(_restore_instead),
    "dangling-entity-link": _relink_entities,
    "duplicate-memory": _each(_policy_delete),
    "expired-memory": _each(_policy_delete),
    "orphan-messages": _each(_orphan_messages),
}
# Rules that answer many findings with one action per entity run after every per-memory rule.
RUN_LAST = ("dangling-entity-link",)


def _grouped(
    listed: Sequence[Finding], wanted: frozenset[str]
) -> tuple[dict[str, list[Finding]], dict[str, set[str]]]:
    """The findings each rule answers, by code in contract order; and every memory's codes."""
    codes_of: dict[str, set[str]] = defaultdict(set)
    groups: dict[str, list[Finding]] = {}
    for finding in listed:
        if finding.memory_id:
            codes_of[finding.memory_id].add(finding.code)
        if (
            finding.severity is not Severity.INFO
            and finding.code in wanted
            and finding.code in RULES
        ):
            groups.setdefault(finding.code, []).append(finding)
    return groups, codes_of


def plan_reconcile(
    findings: Iterable[Finding],
    inventory: Inventory,
    recoveries: Mapping[str, Recovery | None],
    *,
    only: frozenset[str] | None,
    record_lost: bool,
    now: datetime,
    new_id: Callable[[], str],
    forgetting: frozenset[str] = frozenset(),
    history_writable: bool = True,
) -> list[Action]:
    """Return the actions that answer ``findings``, in a stable order. Pure.

    Args:
        findings: check's findings on ``inventory``.
        inventory: the captured stores the findings came from.
        recoveries: per missing memory id, the snapshot to recover it from, or None.
        only: limit to these codes (required for the policy codes).
        record_lost: record an unrecoverable missing memory as deleted (a DELETE event).
        now: the current time (UTC), for event rows.
        new_id: makes ``memsync-<uuid4>`` ids for event rows (kept in the journal).
        forgetting: memory ids of a forget that did not finish: closed, never recovered.
        history_writable: False when history.db does not exist and creating one was not asked
            for (``--create-history``): ``history-missing`` is then reported, never answered
            with events into a new file at a path that may be wrong.

    Returns:
        Actions numbered from 0: findings in contract order, one code's rule at a time, entity
        relinks last. Info findings and codes outside ``only`` (default: the damage codes) get none.
    """
    wanted = only if only is not None else DAMAGE_CODES
    listed = sorted(findings, key=Finding.sort_key)
    legacy = [finding for finding in listed if finding.code == "legacy-point-store"]
    if legacy:  # its points are invisible, not lost: nothing may be deleted, recorded or put back
        blocked = [act(f, ActionKind.REPORT, LEGACY_WHY, status="unrecoverable") for f in legacy]
        return [replace(action, index=index) for index, action in enumerate(blocked)]
    groups, codes_of = _grouped(listed, wanted)
    ctx = Context(
        inventory=inventory,
        recoveries=recoveries,
        record_lost=record_lost,
        stamp=now.isoformat(),
        new_id=new_id,
        forgetting=forgetting,
        wanted=wanted,
        codes_of={memory_id: frozenset(codes) for memory_id, codes in codes_of.items()},
        history_writable=history_writable,
    )
    order = [code for code in groups if code not in RUN_LAST] + [
        code for code in RUN_LAST if code in groups
    ]
    actions = [action for code in order for action in RULES[code](groups[code], ctx)]
    return [replace(action, index=index) for index, action in enumerate(actions)]
