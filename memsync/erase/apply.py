"""Erasure: after a delete, the memory's text leaves every place memsync controls.

History rows keep their events and times but lose their text (a DELETE row by ``memsync``
with no text records the erasure); raw ``messages`` of scopes left without memories go; both
SQLite files are rewritten (``secure_delete``, ``VACUUM``) so no free page keeps the text;
memsync's own work copies, stale ``.partial`` snapshots, reconcile journals and pre-restore
copies are purged too. The ids are added to the erasure ledger (``memsync.erase.ledger``: ids only),
and every copy memsync knows of that still holds the text is listed (``erase.copies``), each
with the command that removes it.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import check, state
from memsync.deployment import Deployment
from memsync.erase import copies, holding, ledger, proof
from memsync.erase.holding import other_backend, snapshots_holding
from memsync.erase.old_store import erase_old_store
from memsync.errors import MemsyncError
from memsync.model import Inventory
from memsync.stores import capture, journal_mode, snapshots
from memsync.stores.sqlite_files import translate

__all__ = [
    "other_backend",
    "blank_history",
    "copies_left",
    "erase_texts",
    "erase_copies_only",
    "purge_own_copies",
    "scope_past",
    "snapshots_holding",
    "unverified",
]


def _scope_fields(scope: str) -> dict[str, str]:
    """mem0's scope string back into its fields (``agent_id=a&user_id=u``). Pure."""
    fields = {}
    for part in scope.split("&"):
        key, _, value = part.partition("=")
        fields[key] = value.replace("%3D", "=").replace("%26", "&").replace("%25", "%")
    return fields


logger = structlog.get_logger(__name__)

# Raw messages are deleted when they contain a version of an erased text at least this long
# (shorter texts would match unrelated messages).
MIN_MESSAGE_MATCH = 12


def erase_texts(
    deployment: Deployment,
    before: Inventory,
    memory_ids: Sequence[str],
    now: datetime,
    scope: dict[str, str] | None = None,
    *,
    checkpoint: proof.Checkpointer | None = None,
    known: Collection[str] | None = None,
) -> dict[str, Any]:
    """Remove the texts of deleted memories from every place memsync controls, and prove it.

    Blanks their history texts, drops raw messages of scopes left empty, VACUUMs the stores,
    checkpoints and truncates the files in WAL mode (``checkpoint``: the agent's, else memsync's
    own connection; ``erase.proof``) and searches every byte of the live files, ``-wal``,
    ``-shm`` and journals for the texts; purges memsync's own copies, removes the points from
    a switched migration's old store (``migration_source``: ``erase.old_store``) and records
    the ids in the erasure ledger. A scope erasure also purges the scope's memories found only
    in the copies a restore moved aside (``only_in_copies``: a restore rolled them back).
    ``known``: for a scope erasure, every id a record ties to some scope (``scope_past``):
    deleted memories with text left and none are ``unattributed``.
    Returns what was done (``verified``: the byte search); ``copies_left`` lists what else
    still holds them.
    """
    config = deployment.config
    scopes = {
        check.session_scope(before.points[m].payload) for m in memory_ids if m in before.points
    }
    if (
        scope
    ):  # a whole user/agent/run: every raw-message scope of it, also of memories deleted earlier
        scopes |= {
            s.scope
            for s in before.message_scopes
            if all(_scope_fields(s.scope).get(k) == v for k, v in scope.items())
        }
    remaining = {
        check.session_scope(p.payload)
        for p in before.points.values()
        if p.id not in set(memory_ids)
    }
    empty_scopes = sorted(scopes - remaining)
    texts = history_texts(config.history_db_path, memory_ids) | {
        str(before.points[m].payload.get("data"))
        for m in memory_ids
        if m in before.points and isinstance(before.points[m].payload.get("data"), str)
    }
    rows = blank_history(config.history_db_path, memory_ids, empty_scopes, now)
    compaction = deployment.vector_store.compact()
    if compaction not in ("VACUUM", "VACUUM FULL"):
        logger.warning("erase_compaction_partial", compaction=compaction)
    files = journal_mode.live_files(deployment.vector_store, config.history_db_path)
    checkpointed = proof.checkpoint(files, checkpoint)
    ours = set(memory_ids)
    others = [p.payload.get("data") for p in before.points.values() if p.id not in ours]
    candidates = {  # a text that stays inside another memory's is not the erasure's to prove
        t
        for t in texts
        if len(t) >= MIN_MESSAGE_MATCH and not any(isinstance(o, str) and t in o for o in others)
    }
    needles = sorted(candidates - texts_held(config.history_db_path, candidates))
    verified = proof.byte_hits(files, needles)
    # a scope's memories a restore rolled back are in the copies it moved aside, not live
    only_in_copies = sorted(deployment.vector_store.set_aside_ids(scope) - ours) if scope else []
    purged = purge_own_copies(deployment, [*memory_ids, *only_in_copies], empty_scopes, now)
    old_store = erase_old_store(deployment, memory_ids)  # a switched migration's, until cleanup
    deleted = [before.points[m].payload for m in memory_ids if m in before.points]
    ledger.record(config.state_dir, [*memory_ids, *only_in_copies], scope, now, deleted)
    if checkpointed or verified["hits"]:
        logger.info("erase_verified", checkpoint=checkpointed, **verified)
    unattributed = (  # deleted before the look (not added since), text left, no record
        {}
        if known is None
        else {
            "unattributed": sorted(
                m
                for m in history_ids(config.history_db_path) - set(known)
                if m in before.history and m not in before.points
            )
        }
    )
    return {
        "history_rows_blanked": rows,
        "compaction": compaction,
        "checkpoint": checkpointed,
        "verified": verified,
        "message_scopes_removed": empty_scopes,
        "purged": purged,
        **({"only_in_copies": only_in_copies} if only_in_copies else {}),
        **unattributed,
        **({"migration_source": old_store} if old_store is not None else {}),
    }


def unverified(erased: Mapping[str, Any]) -> list[str]:
    """Why an erasure's bytes are not proven gone (empty: proven). Pure.

    A WAL file not truncated (``checkpoint``), or a live file still holding a text
    (``verified.hits``).
    """
    why = [
        f"{label}: {verdict}"
        for label, verdict in sorted((erased.get("checkpoint") or {}).items())
        if verdict != proof.TRUNCATED
    ]
    hits = (erased.get("verified") or {}).get("hits") or []
    return why + [f"{path} still holds the text" for path in hits]


def scope_past(deployment: Deployment, scope: Mapping[str, str]) -> tuple[dict[str, str], set[str]]:
    """``({id: where found}, every id a record ties to a scope)`` for a scope erasure. Reads only.

    The scope's ids come from the erasure ledger (earlier erasures of exactly this scope:
    ``"erasure ledger"``), from the points of every complete local snapshot
    (``"snapshot <id>"``, sealed ones opened with the key) and of the copies ``restore --to``
    made (``holding.restored_to_points``): memories the app deleted since keep
    their text in history, which carries no scope. The second value also holds the ids of
    other scopes' points in the snapshots and every erased id.

    Raises:
        UnavailableError: the ledger is unreadable.
    """
    config = deployment.config
    found = {m: "erasure ledger" for m in ledger.erased_ids(config.state_dir, scope)}
    seen = set(ledger.erased_ids(config.state_dir))
    for snapshot_id, point_id, payload in holding.snapshot_points(deployment):
        seen.add(point_id)
        if all(payload.get(k) == v for k, v in scope.items()):
            found.setdefault(point_id, f"snapshot {snapshot_id}")
    for copy, point_id, payload in holding.restored_to_points(deployment):
        seen.add(point_id)
        if all(payload.get(k) == v for k, v in scope.items()):
            found.setdefault(point_id, f"the copy restore --to made at {copy}")
    return found, seen


def history_texts(history_db: Path, memory_ids: Sequence[str]) -> set[str]:
    """Every text in the history rows of ``memory_ids``. Reads only.

    Raises:
        UnavailableError, TryLaterError: history.db cannot be read.
    """
    if not memory_ids:
        return set()
    marks = ",".join("?" * len(memory_ids))
    query = f"SELECT old_memory, new_memory FROM history WHERE memory_id IN ({marks})"
    return {
        text
        for row in _read(history_db, query, memory_ids)
        for text in row
        if isinstance(text, str)
    }


def texts_held(history_db: Path, texts: Iterable[str]) -> set[str]:
    """The texts a history row still carries (in another memory's text). Reads only."""
    query = (
        "SELECT 1 FROM history WHERE instr(old_memory, ?) > 0 OR instr(new_memory, ?) > 0 LIMIT 1"
    )
    return {t for t in texts if _read(history_db, query, [t, t])}


def history_ids(history_db: Path) -> set[str]:
    """The memory ids with a history row that still carries text. Reads only."""
    query = (
        "SELECT DISTINCT memory_id FROM history "
        "WHERE old_memory IS NOT NULL OR new_memory IS NOT NULL"
    )
    return {str(row[0]) for row in _read(history_db, query, [])}


def _read(history_db: Path, query: str, args: Sequence[object]) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(history_db, timeout=5.0)
    try:
        return list(connection.execute(query, list(args)))
    except sqlite3.Error as error:
        raise translate(error, history_db, "read history") from error
    finally:
        connection.close()


def copies_left(
    deployment: Deployment, memory_ids: Sequence[str], scope: dict[str, str] | None
) -> dict[str, Any]:
    """``{"copies": [...], "snapshots_holding": [ids]}``: what still holds the erased text.

    Run after the route closed (it reads snapshots and the bucket: never inside a window).
    See ``erase.copies.copies_holding``.
    """
    config = deployment.config
    try:
        found = copies.copies_holding(deployment, memory_ids, scope)
    except MemsyncError as error:  # the erasure is done: the listing never undoes its success
        found = [
            {"kind": "copies", "where": str(config.source), "snapshot_id": None,
             "holds": "unknown", "why": f"unknown: the copies could not be listed ({error.message})",
             "remove": "fix the cause, then: memsync snapshot purge-memory "
             f"{copies.selector(memory_ids, scope)} --dry-run"}
        ]  # fmt: skip
    return {
        "snapshots_holding": [c["snapshot_id"] for c in found if c["kind"] == "local-snapshot"],
        "copies": found,
    }


def blank_history(
    history_db: Path,
    memory_ids: Sequence[str],
    scopes: Iterable[str],
    now: datetime,
    record: bool = True,
) -> int:
    """Blank the memories' history texts, record the erasure, drop raw messages, VACUUM.

    ``old_memory``/``new_memory`` become NULL (events and times stay); a DELETE row by memsync
    with no text records the erasure (``record``); the raw messages of ``scopes`` are deleted.
    Returns the rows blanked.
    """
    connection = sqlite3.connect(history_db, timeout=5.0)
    try:
        connection.execute("PRAGMA secure_delete = ON")
        with connection:
            marks = ",".join("?" * len(memory_ids))
            texts = {
                text
                for row in connection.execute(
                    f"SELECT old_memory, new_memory FROM history WHERE memory_id IN ({marks})",
                    list(memory_ids),
                )
                for text in row
                if isinstance(text, str) and len(text) >= MIN_MESSAGE_MATCH
            }
            blanked = connection.execute(
                f"UPDATE history SET old_memory = NULL, new_memory = NULL WHERE memory_id IN ({marks})",
                list(memory_ids),
            ).rowcount
            if record:
                connection.executemany(
                    "INSERT INTO history (id, memory_id, old_memory, new_memory, event, created_at, updated_at, "
                    "is_deleted, actor_id, role) VALUES (?, ?, NULL, NULL, 'DELETE', ?, ?, 1, 'memsync', NULL)",
                    [
                        (f"memsync-{uuid.uuid4()}", m, now.isoformat(), now.isoformat())
                        for m in memory_ids
                    ],
                )
            tables = {
                r[0]
                for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if "messages" in tables:
                connection.executemany(
                    "DELETE FROM messages WHERE session_scope = ?", [(s,) for s in scopes]
                )
                # raw messages that contain any version of the text, whatever their scope
                connection.executemany(
                    "DELETE FROM messages WHERE instr(content, ?) > 0", [(t,) for t in texts]
                )
        connection.execute("VACUUM")
        return int(blanked)
    except sqlite3.Error as error:
        raise translate(error, history_db, "erase texts") from error
    finally:
        connection.close()


def erase_copies_only(
    deployment: Deployment, scope: Mapping[str, str], now: datetime, *, dry_run: bool
) -> dict[str, Any] | None:
    """A scope with no live memory: purge its memories from the copies a restore moved aside.

    A restore that rolled back every memory of the scope leaves them only there
    (``VectorStore.set_aside_ids``); they are purged from every copy, vectors and history, and
    recorded in the erasure ledger. Nothing live is touched (no route needed). None when no
    copy holds the scope; a dry run only names the ids.
    """
    ids = sorted(deployment.vector_store.set_aside_ids(scope))
    if not ids:
        return None
    if dry_run:
        return {"only_in_copies": ids, "purged": []}
    purged = purge_own_copies(deployment, ids, [], now)
    ledger.record(deployment.config.state_dir, ids, scope, now)
    logger.info("erased_from_copies", memories=len(ids), copies=len(purged))
    return {"only_in_copies": ids, "purged": purged}


def purge_own_copies(
    deployment: Deployment, memory_ids: Sequence[str], scopes: Sequence[str], now: datetime
) -> list[str]:
    """Purge memsync's own copies of the memories.

    Stale captures and partial snapshots are removed, a finished reconcile journal too, and
    pre-restore copies are rewritten without the memories.
    """
    config = deployment.config
    done: list[str] = []
    if config.work_dir.is_dir():
        done += [str(p) for p in capture.remove_stale_captures(config.work_dir, max_age_s=0)]
    if config.snapshot.directory is not None:
        done += [str(p) for p in snapshots.remove_stale_partials(config.snapshot.directory)]
    journal = config.state_dir / "reconcile-journal.json"
    if journal.is_file() and '"status": "done"' in journal.read_text(encoding="utf-8"):
        journal.unlink()
        done.append(str(journal))
    store = deployment.vector_store
    done += store.erase_set_aside(memory_ids)  # a server store's copies (pgvector: tables)
    store_dir = store.location  # None: pgvector (tables, not files)
    live = [path for path in (store_dir, config.history_db_path) if path is not None]
    for copy in state.pre_restore_copies(live):
        if copy.is_dir():
            store.erase_points(copy, memory_ids)
            # Litestream's shadow WAL of a file moved aside (raw frames, text included): it
            # replicates nothing any more, and the copy's own file stays
            for shadow in copy.rglob(".*-litestream"):
                if shadow.is_dir() and not shadow.is_symlink():
                    shutil.rmtree(shadow)
                    done.append(str(shadow))
        elif copy.is_file():
            blank_history(copy, memory_ids, scopes, now, record=False)
        done.append(str(copy))
    return done
