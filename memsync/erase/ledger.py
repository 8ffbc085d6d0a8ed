"""The erasure ledger (``<state_dir>/erasures.json``): which memory ids were erased, never their text.

``forget --erase`` and ``snapshot purge-memory`` append one record per run: the UTC time, the
memory ids and the scope asked for, its values kept only as sha256 digests
(``{"user_id": "sha256:…"}``), so the ledger names no user. Later runs of
``snapshot purge-memory`` read it to find the ids of a scope whose memories are gone from the
live store and from every local snapshot, and to look for every erased memory in the bucket's
noncurrent object versions; ``snapshot create``'s tripwire reads it so an erasure of a scope is
not taken for a mass deletion.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsync.errors import UnavailableError
from memsync.model import SCOPE_KINDS, TOTAL, count_scopes
from memsync.state import write_json_atomic

LEDGER = "erasures.json"


def digest(value: str) -> str:
    """``sha256:<hex>`` of a scope value (a user, agent or run id). Pure."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()


def _load(state_dir: Path) -> list[dict[str, Any]]:
    try:
        document = json.loads((state_dir / LEDGER).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:
        raise _unreadable(state_dir, type(error).__name__) from error
    records = document.get("erasures", []) if isinstance(document, dict) else None
    if not isinstance(records, list) or not all(_is_record(r) for r in records):
        raise _unreadable(state_dir, "not a list of erasures with memory_ids")
    return records


def _is_record(record: object) -> bool:
    ids = record.get("memory_ids", []) if isinstance(record, dict) else None
    return isinstance(ids, list) and all(isinstance(i, str) for i in ids)


def _unreadable(state_dir: Path, why: str) -> UnavailableError:
    """Exit 11 for a ledger that cannot be read: never overwritten, never read as empty."""
    return UnavailableError(
        f"erasure ledger {state_dir / LEDGER} is unreadable ({why})",
        "restore it from a backup of the state directory, or move it aside (the ids of "
        "earlier erasures are then found only in snapshots)",
    )


def record(
    state_dir: Path,
    memory_ids: Sequence[str],
    scope: Mapping[str, str] | None,
    now: datetime,
    payloads: Iterable[Mapping[str, Any]] = (),
) -> None:
    """Append one erasure (ids, hashed scope, time). Writes the ledger atomically (0600).

    ``payloads``: of the memories this erasure deleted from the live store (none for a purge of
    snapshots only); their counts per scope are kept as ``dropped`` (``{"total": n,
    "user_id": {"sha256:…": n}, ...}``: no id in the clear), so ``snapshot create``'s tripwire
    can tell a drop that was an erasure from a mass deletion.

    Raises:
        UnavailableError: the ledger exists and cannot be read.
    """
    if not memory_ids:
        return
    counted = count_scopes(payloads)
    records = _load(state_dir)
    records.append(
        {
            "at": now.isoformat(),
            "memory_ids": sorted(set(memory_ids)),
            "scope": {key: digest(value) for key, value in (scope or {}).items()},
            "dropped": {
                TOTAL: counted[TOTAL],
                **{k: {digest(i): n for i, n in counted[k].items()} for k in SCOPE_KINDS},
            },
        }
    )
    write_json_atomic(state_dir / LEDGER, {"erasures": records})


def erased_counts(state_dir: Path, since: datetime) -> dict[str, int]:
    """Memories erased from the live store at or after ``since`` (UTC), in all and per scope.

    Returns ``{"total": n, "<kind>:sha256:<hex>": n, ...}`` summed over the erasures since
    (those recorded before ``dropped`` existed count nothing). Reads only.

    Raises:
        UnavailableError: the ledger is unreadable.
    """
    found: dict[str, int] = {TOTAL: 0}
    for entry in _load(state_dir):
        dropped = entry.get("dropped")
        if not isinstance(dropped, dict) or not _at_or_after(entry.get("at"), since):
            continue
        found[TOTAL] += _int(dropped.get(TOTAL))
        for kind in SCOPE_KINDS:
            scopes = dropped.get(kind)
            for hashed, count in scopes.items() if isinstance(scopes, dict) else ():
                key = f"{kind}:{hashed}"
                found[key] = found.get(key, 0) + _int(count)
    return found


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def erased_ids(state_dir: Path, scope: Mapping[str, str] | None = None) -> set[str]:
    """Every erased memory id, or those of erasures asked for exactly ``scope``. Reads only.

    Raises:
        UnavailableError: the ledger is unreadable.
    """
    wanted = {key: digest(value) for key, value in (scope or {}).items()}
    return {
        str(memory_id)
        for entry in _load(state_dir)
        if not wanted or entry.get("scope") == wanted
        for memory_id in entry.get("memory_ids") or []
    }


def erased_scopes(state_dir: Path, since: datetime | None = None) -> set[str]:
    """``"<kind>:sha256:<hex>"`` of every scope an erasure named (``user_id:sha256:…``). Reads only.

    ``since``: only erasures recorded at or after it (UTC); a record whose time cannot be read
    counts.

    Raises:
        UnavailableError: the ledger is unreadable.
    """
    return {
        f"{kind}:{value}"
        for entry in _load(state_dir)
        if isinstance(entry.get("scope"), dict) and _at_or_after(entry.get("at"), since)
        for kind, value in entry["scope"].items()
        if isinstance(value, str)
    }


def _at_or_after(at: object, since: datetime | None) -> bool:
    if since is None:
        return True
    try:
        moment = datetime.fromisoformat(str(at))
    except ValueError:
        return True
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment >= since
