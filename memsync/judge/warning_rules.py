"""Warning-level findings: dangling entity links, expired memories, duplicates, orphan messages. Pure.

Part of ``memsync.judge.rules``: ``expired`` runs on each chunk of memories; the others on what
the whole stream gathered (the linked memories, the duplicate candidates, the live scopes).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from memsync import findings
from memsync.judge.common import SCOPE_KEYS, finding_or_in_flight, session_scope
from memsync.model import Finding, Inventory, Point, expires_on


def dangling_links(inventory: Inventory) -> list[Finding]:
    """``dangling-entity-link`` for each entity link whose memory has no point in ``inventory``."""
    found = []
    for entity in inventory.entities:
        for memory_id in entity.linked_memory_ids:
            if memory_id in inventory.points:
                continue
            memory = inventory.history.get(memory_id)
            found.append(
                finding_or_in_flight(
                    inventory,
                    "dangling-entity-link",
                    memory_id,
                    f"entity {entity.entity_id} links memory {memory_id}, which has no point",
                    memory.last.at if memory else None,
                    observed=entity.entity_id,
                )
            )
    return found


def expired(inventory: Inventory, today: date) -> list[Finding]:
    """``expired-memory`` for each point whose ``expiration_date`` is before ``today`` (UTC)."""
    found = []
    for point in inventory.points.values():
        expires = expires_on(point.payload)
        if expires is not None and expires < today:
            found.append(
                findings.make(
                    "expired-memory",
                    f"memory expired on {expires.isoformat()} and is still stored (mem0 hides it but never deletes it)",
                    collection=inventory.collection,
                    memory_id=point.id,
                    scope=session_scope(point.payload),
                    observed=expires.isoformat(),
                )
            )
    return found


def duplicates(inventory: Inventory) -> list[Finding]:
    """``duplicate-memory`` for each point but the oldest of a ``duplicate_key`` group."""
    groups: dict[tuple[object, ...], list[Point]] = defaultdict(list)
    for point in inventory.points.values():
        key = duplicate_key(point)
        if key is not None:
            groups[key].append(point)
    found = []
    for group in groups.values():
        if len(group) < 2:
            continue
        ordered = sorted(group, key=lambda p: (str(p.payload.get("created_at") or ""), p.id))
        for extra in ordered[1:]:
            scope = session_scope(extra.payload)
            found.append(
                findings.make(
                    "duplicate-memory",
                    f"same text as memory {ordered[0].id} in the same scope ({scope or 'no scope'})",
                    collection=inventory.collection,
                    memory_id=extra.id,
                    fix=f"memsync reconcile --only duplicate-memory (or memsync forget {extra.id})",
                    scope=scope,
                    expected=ordered[0].id,
                )
            )
    return found


def duplicate_key(point: Point) -> tuple[object, ...] | None:
    """What two duplicates share: payload ``hash`` and scope values; None without a hash. Pure."""
    payload = point.payload
    digest = payload.get("hash")
    if not isinstance(digest, str):
        return None
    return (digest, *(_hashable(payload.get(name)) for name in SCOPE_KEYS))


def _hashable(value: object) -> object:
    """A scope value usable as a dict key (payloads may hold lists or dicts)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)[:200]


def orphan_messages(inventory: Inventory, live_scopes: set[str]) -> list[Finding]:
    """``orphan-messages`` for each message scope not among ``live_scopes`` (the points' scopes)."""
    return [
        finding_or_in_flight(
            inventory,
            "orphan-messages",
            None,
            f"{scope.row_count} raw messages of session scope {scope.scope!r} remain with no memory left "
            "in that scope (raw user text that outlived its memories)",
            scope.newest_at,
            scope=scope.scope,
            observed=scope.row_count,
        )
        for scope in inventory.message_scopes
        if scope.scope not in live_scopes
    ]
