"""``restore --at TIME``: every SQLite file of the deployment back to one moment, from its replica.

The files are the ones ``protect`` wrote Litestream's configuration for
(``<state_dir>/litestream.yml``: each collection's ``storage.sqlite``, then history.db); when a
lost disk took the state directory along, each collection with a replica, then history.db. For
each, ``pick`` chooses from the replica's listing the newest generation started at or before
TIME and the last object shipped at or before it; ``litestream restore -generation G -timestamp
T`` then restores exactly that object's position (T is its own time, so a segment shipped
while memsync ran is never taken, and a TIME later than the last shipment restores the last
shipment instead of failing). ``meta.json`` (not SQLite: not replicated) comes from the newest
snapshot taken at or before TIME, else from the live store. ``stage_at`` lays the files out
as a snapshot's plaintext (``qdrant/...``, ``history.db``), so ``restore``'s own staging and
swap (``put_files_in_place``) or ``restore --to``'s copy take them from there.

What the report says of TIME (``FileAt``): per file the position restored (generation, WAL
index and offset) and when it was shipped; for history.db the newest event's time in it; and,
when a live history.db is there, the history events after TIME and their memories ("lost
after TIME"). The seam (``seam``): the check's findings on the restored pair, memory by memory.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from memsync import check, protection, repository, restore, state, utc
from memsync.config import Config
from memsync.config.scratch import ScratchLayout
from memsync.deployment import Deployment
from memsync.errors import ConfigError, LockedError, MemsyncError, UnavailableError, UsageError
from memsync.model import CaptureWindow, CheckReport, Severity
from memsync.repository import encryption_key, reading
from memsync.restore import Restored, to_dir
from memsync.snapshot import choose
from memsync.stores import capture, history, journal_mode
from memsync.stores.point_ids import normalize_point_id
from memsync.stores.snapshots import read_manifest
from memsync.stores.sqlite_files import connect_readonly, translate

logger = structlog.get_logger(__name__)

DOCS = "docs/how-to/continuous-protection.md"
HISTORY = "history.db"
RESTORE_TIMEOUT_S = 3600


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """Where one file's replica is restored to (``pick``'s answer). Pure data.

    ``position``: the last WAL segment at or before TIME, ``<generation>/<index>_<offset>``
    (hex, Litestream's names); None when only the generation's snapshot is. ``shipped_at``:
    when the last object restored reached the replica; ``stamp``: that time as Litestream
    reads it (RFC 3339, nanoseconds for a directory replica).
    """

    generation: str
    position: str | None
    shipped_at: datetime
    stamp: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FileAt:
    """One SQLite file restored to TIME (``restore --at --json``'s ``at.files[]``)."""

    label: str
    live: Path
    relative: str  # its path in the staged layout: qdrant/collection/<name>/storage.sqlite
    replica: str
    point: Point
    last_event_at: str | None = None  # history.db: the newest event's time it holds

    def to_json(self) -> dict[str, Any]:
        """The file's entry in ``at.files``."""
        return {
            "label": self.label,
            "path": str(self.live),
            "replica": self.replica,
            "generation": self.point.generation,
            "position": self.point.position,
            "shipped_at": utc.iso(self.point.shipped_at),
            "last_event_at": self.last_event_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class At:
    """What ``restore --at`` restored, and what TIME means for it (``at`` in the JSON)."""

    time: datetime | None  # None: latest
    files: tuple[FileAt, ...]
    meta_from: str  # "snapshot <id>" or "live store"
    lost_after: dict[str, Any] | None = None
    seam: tuple[dict[str, Any], ...] = ()
    reconcile: str | None = None
    # what running reconcile on the seam did: {"actions": counts by status, "check_after":
    # counts, "safety_snapshot": id, "error": text}; None when it was not run
    reconciled_by: dict[str, Any] | None = None

    @property
    def restore_id(self) -> str:
        """The name of this restore's staged and moved-aside paths: ``at-<TIME>`` (UTC)."""
        moment = self.time or max(f.point.shipped_at for f in self.files)
        return "at-" + moment.strftime("%Y%m%dT%H%M%S") + f"{moment.microsecond:06d}Z"

    def with_check(self, report: CheckReport | None, config_flag: str = "") -> At:
        """This report with the seam: the check's findings that name a memory, one by one."""
        if report is None:
            return self
        seam = tuple(
            {"code": f.code, "memory_id": f.memory_id, "collection": f.collection}
            for f in report.findings
            if f.memory_id is not None and f.severity == Severity.ERROR
        )
        command = f"memsync{config_flag} reconcile" if seam else None
        return replace(self, seam=seam, reconcile=command)

    def to_json(self) -> dict[str, Any]:
        """``restore --at --json``'s ``at`` object (docs/reference/json-output.md)."""
        return {
            "time": utc.iso(self.time) if self.time else "latest",
            "files": [f.to_json() for f in self.files],
            "meta_json": self.meta_from,
            "lost_after": self.lost_after,
            "seam": list(self.seam),
            "reconcile": self.reconcile,
            "reconciled": self.reconciled,
            "reconcile_result": self.reconciled_by,
        }

    @property
    def reconciled(self) -> bool:
        """Whether reconcile ran on the seam and the check after it found no error."""
        done = self.reconciled_by or {}
        return not done.get("error") and (done.get("check_after") or {}).get("errors") == 0


def parse_at(text: str) -> datetime | None:
    """``--at TIME``: ``latest`` (None), or what ``--before`` accepts, not in the future.

    Raises:
        UsageError: (exit 2) as ``choose.parse_time``, or TIME is later than now.
    """
    if text.strip() == "latest":
        return None
    try:
        when = choose.parse_time(text)
    except UsageError as error:
        raise UsageError(error.message.replace("--before", "--at", 1), error.hint) from None
    now = datetime.now(UTC)
    if when > now:
        raise UsageError(
            f"--at {text.strip()} is in the future (now is {utc.iso(now)}): no replica holds it",
            "give a past time, or --at latest for the last second shipped",
        )
    return when


def require_embedded(deployment: Deployment, what: str) -> None:
    """Refuse ``what`` on a server store (pgvector), where only ``restore --at`` in place runs.

    Raises:
        UsageError: (exit 2) the vector store is a server's tables.
    """
    if deployment.vector_store.staging() is not None:
        raise UsageError(
            f"{what} restores embedded stores from Litestream replicas; on pgvector the table's "
            "point in time is PostgreSQL's own recovery, and `restore --at TIME` (in place, "
            "--dry-run to see the pair) brings history.db to the same time",
            f"see {PG_DOCS}",
        )


PG_DOCS = "docs/how-to/pgvector.md"


def require_server_at(deployment: Deployment, when: datetime | None) -> None:
    """On a server store, refuse ``--at`` while history.db is held, or the table is after TIME.

    A table holding a memory written after ``when`` was not recovered to it.

    The table is PostgreSQL's to recover (``recovery_target_time``); ``restore --at`` brings
    history.db to the same time and checks the pair. mem0 stamps a memory before it writes
    it, so a memory stamped after ``when`` was committed after it (the app's clock and the
    server's agree, as NTP keeps them).

    Raises:
        LockedError: (exit 12) a process holds history.db.
        UnavailableError: (exit 11) the table holds a memory written after ``when``.
    """
    staging = deployment.vector_store.staging()
    if staging is None:
        return
    from memsync.restore.pg_agent import history_holder

    holder = history_holder(deployment.config)
    if holder is not None:
        raise LockedError(
            f"history.db {deployment.config.history_db_path} is held by pid {holder.pid} "
            f"({holder.cmdline or 'command line unknown'}): restore --at on pgvector swaps history.db while the app is stopped",
            f"stop the app (its table is being recovered by PostgreSQL too), then run again ({PG_DOCS})",
        )
    if when is None:
        return
    found = staging.written_after(when)
    if found is not None:
        memory_id, stamp = found
        raise UnavailableError(
            f"table {deployment.vector_store.collection} holds memory {memory_id} written at "
            f"{stamp}, after {utc.iso(when)}: the database was not recovered to that time",
            f"recover the database to {utc.iso(when)} with PostgreSQL's point-in-time recovery "
            f"and point the config at it first ({PG_DOCS}), or choose a later --at TIME",
        )


def pick(
    objects: list[protection.ReplicaObject], when: datetime | None, label: str, where: str
) -> tuple[str, protection.ReplicaObject, str | None]:
    """The generation, the last object at or before ``when`` (None: the last), its position. Pure.

    The generation is the newest one whose snapshot was shipped at or before ``when``.

    Raises:
        UnavailableError: (exit 11) the replica holds no generation, or none reaches back to
            ``when`` (its oldest snapshot is later).
    """
    generations: dict[str, list[tuple[str, str, str | None, protection.ReplicaObject]]] = {}
    for item in objects:
        found = protection.SEGMENT.search(item.key)
        if found and not item.key.endswith(".tmp"):  # Litestream died writing it: not shipped
            generation, kind, index, offset = found.groups()
            generations.setdefault(generation, []).append((kind, index, offset, item))
    starts = {
        generation: min(o.modified for kind, _, _, o in items if kind == "snapshots")
        for generation, items in generations.items()
        if any(kind == "snapshots" for kind, _, _, _ in items)
    }
    if not starts:
        raise UnavailableError(
            f"{label}: its replica {where} holds no generation: there is nothing to restore it from",
            f"protect it and let the daemon run Litestream ({DOCS})",
        )
    oldest = min(starts.values())
    if when is not None and when < oldest:
        raise UnavailableError(
            f"{label}: its replica {where} does not reach back to {utc.iso(when)} (its oldest "
            f"snapshot was shipped at {utc.iso(oldest)})",
            "choose a later --at TIME, or restore a snapshot taken before it (restore --before)",
        )
    generation = max(
        (g for g, start in starts.items() if when is None or start <= when),
        key=lambda g: starts[g],
    )
    shipped = [
        (kind, index, offset, o)
        for kind, index, offset, o in generations[generation]
        if when is None or o.modified <= when
    ]
    last = max(shipped, key=lambda item: item[3].modified)[3]
    segments = [(index, offset) for kind, index, offset, _ in shipped if kind == "wal" and offset]
    position = None
    if segments:
        index, offset = max(segments)
        position = f"{generation}/{index}_{offset}"
    return generation, last, position


def foreign_segment(
    objects: list[protection.ReplicaObject],
    generation: str,
    when: datetime | None,
    read: Callable[[str], bytes],
) -> tuple[str, str] | None:
    """The first WAL segment restoring ``generation`` to ``when`` applies that is not its WAL.

    Litestream restores the newest snapshot at or before ``when``, then hands SQLite each WAL
    index from the snapshot's on, each one a WAL file: its header (the segment at offset 0,
    the WAL magic and two salts), then frames carrying the same salts. SQLite stops at the
    first frame with other salts without a word, so a position after it was never restored.
    ``read(key)``: the object's bytes. Returns (key, why) or None. A segment that cannot be read
    or is not LZ4 ends its index's look: Litestream's restore fails on it with its own reason.
    """
    snapshots: list[str] = []
    wal: dict[str, list[tuple[int, protection.ReplicaObject]]] = {}
    for item in objects:
        found = protection.SEGMENT.search(item.key)
        if found is None or found.group(1) != generation or item.key.endswith(".tmp"):
            continue
        _, kind, index, offset = found.groups()
        if kind == "snapshots" and (when is None or item.modified <= when):
            snapshots.append(index)
        elif kind == "wal" and offset:
            wal.setdefault(index, []).append((int(offset, 16), item))
    shipped = [
        i for i, items in wal.items() if any(when is None or o.modified <= when for _, o in items)
    ]
    first, last = max(snapshots, default="00000000"), max(shipped, default="")
    order = [
        (index, offset, item)
        for index in sorted(i for i in wal if first <= i <= last)
        for offset, item in sorted(wal[index], key=lambda pair: pair[0])
    ]
    current, salts, broken = "", None, ""
    ahead = _read_ahead(read, [item.key for _, _, item in order])
    for (index, offset, item), data in zip(order, ahead, strict=True):
        if index != current:
            current, salts = index, None
        if index == broken:
            continue
        try:
            if data is None:
                raise ValueError("unreadable")
            header, frame = protection.segment_salts(data, offset)
        except ValueError:  # unreadable or not LZ4: Litestream's restore fails on it itself
            broken = index
            continue
        if offset == 0 and header is None:
            return item.key, "it does not begin with a WAL header"
        if offset == 0:
            salts = header
        elif salts is None:
            return item.key, f"WAL index {index} has no segment at offset 0 (its WAL header)"
        if frame is not None and frame != salts:
            return item.key, "its frames carry the salts of another WAL than its index's header"
    return None


READ_AHEAD = 8  # segments read at once (Litestream's own restore reads 8 at a time)


def _read_ahead(read: Callable[[str], bytes], keys: list[str]) -> Iterator[bytes | None]:
    """``read(key)`` of each key in order, ``READ_AHEAD`` at a time; None: an OSError."""

    def one(key: str) -> bytes | None:
        try:
            return read(key)
        except OSError:
            return None

    with ThreadPoolExecutor(READ_AHEAD) as pool:
        for start in range(0, len(keys), READ_AHEAD * 8):
            yield from pool.map(one, keys[start : start + READ_AHEAD * 8])


def _stamp(config: Config, name: str, item: protection.ReplicaObject) -> str:
    """``item``'s time as Litestream compares it: a file's mtime to the nanosecond, else S3's."""
    protect = config.protect
    assert protect is not None
    if protect.directory is None:
        return item.modified.isoformat().replace("+00:00", "Z")
    nanoseconds = (protect.directory / name / item.key).stat().st_mtime_ns
    whole = datetime.fromtimestamp(nanoseconds // 10**9, item.modified.tzinfo)
    return whole.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanoseconds % 10**9:09d}Z"


def replicated_files(deployment: Deployment) -> list[tuple[str, Path, str]]:
    """The files ``protect`` configured Litestream for: (label, live path, staged relative path).

    Raises:
        ConfigError: (exit 10) no ``[protect]`` section.
        UnavailableError: (exit 11) Litestream's configuration is missing or unreadable, or
            names a file that is not one of this deployment's.
    """
    config = deployment.config
    if config.protect is None:
        raise ConfigError(
            config.source,
            ["protect: no [protect] section: restore --at restores from its replicas"],
            f"see {DOCS}",
        )
    path = protection.config_file(config)
    hint = (
        "copy it from where you keep it, or on a new host write it again with `memsync protect` "
        f"once the app has created its stores ({DOCS})"
    )
    try:
        dbs = json.loads(path.read_text(encoding="utf-8"))["dbs"]
        paths = [Path(db["path"]) for db in dbs]
    except FileNotFoundError:  # lost with the state directory (a lost disk): the replicas say
        server = deployment.vector_store.staging() is not None  # its table is PostgreSQL's
        names = [] if server else protection.replicated_collections(config.protect, config)
        paths = [
            *(deployment.vector_store.collection_file(name) for name in names),
            config.history_db_path,
        ]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UnavailableError(
            f"Litestream configuration {path} is missing or unreadable ({type(error).__name__}): "
            "restore --at restores the files it lists",
            hint,
        ) from error
    store = deployment.vector_store
    files = []
    for live in paths:
        if live == config.history_db_path:
            files.append((HISTORY, live, HISTORY))
            continue
        name = live.parent.name
        if store.collection_file(name) != live:
            raise UnavailableError(
                f"Litestream configuration {path} names {live}, which is not a file of this "
                "deployment",
                hint,
            )
        relative = store.collection_file(name, Path(store.capture_dir)).as_posix()
        files.append((f"collection {name}", live, relative))
    if not files:
        raise UnavailableError(f"Litestream configuration {path} lists no file", hint)
    listed = {live for _, live, _ in files}
    wanted = [config.history_db_path]  # and every collection: the live ones, else mem0's own
    if store.staging() is None:
        present = [f.path for f in journal_mode.live_files(store, config.history_db_path)]
        wanted += present or [store.collection_file(store.collection)]
    missing = [str(w) for w in wanted if w not in listed]
    if missing:
        raise UnavailableError(
            f"Litestream configuration {path} has no replica of {', '.join(missing)}: "
            "restore --at would leave it out of the restored pair",
            "write the configuration again with `memsync protect` (once the daemon has shipped "
            f"every file), or restore a snapshot (restore --before TIME) ({DOCS})",
        )
    return files


def _replica_name(label: str) -> str:
    """The replica of a file's label: ``history.db``, ``collection/<name>``. Pure."""
    return HISTORY if label == HISTORY else "collection/" + label.split(" ", 1)[1]


def stage_at(deployment: Deployment, when: datetime | None, plain: Path) -> At:
    """Restore every replicated file to ``when``, and ``meta.json``, into ``plain``.

    ``plain`` is laid out as a snapshot's plaintext. Writes under ``plain`` only; reads the
    replicas, and the live history.db when there.

    Raises:
        UnavailableError: (exit 11) a file has no replica, its replica does not reach back to
            ``when``, Litestream fails, or no meta.json can be found.
        ConfigError: (exit 10) no ``[protect]``, or Litestream is not found or not 0.3.
    """
    config = deployment.config
    files = replicated_files(deployment)
    protection.require_litestream(config)
    protect = config.protect
    assert protect is not None
    binary = shutil.which(protect.litestream) or protect.litestream
    # Litestream reads the replicas memsync reads: the config's, not a litestream.yml that a
    # lost state directory took along or an older [protect] wrote
    own = plain.parent / "litestream-restore.yml"
    own.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    own.write_text(
        protection.render(
            {
                "dbs": [
                    {"path": str(live), "replicas": [protection.replica_of(protect, config, n)]}
                    for n, live in ((_replica_name(label), live) for label, live, _ in files)
                ]
            }
        ),
        encoding="utf-8",
    )
    restored = []
    for label, live, relative in files:
        name = _replica_name(label)
        where = protection.replica_where(protect, config, name)
        objects = protection.replica_objects(protect, config, name)
        generation, last, position = pick(objects, when, label, where)
        foreign = foreign_segment(
            objects, generation, when, protection.replica_reader(protect, config, name)
        )
        if foreign is not None:
            raise UnavailableError(
                f"{label}: its replica {where} holds {foreign[0]}, which is not a segment of "
                f"generation {generation}'s WAL ({foreign[1]}): SQLite skips it, so no restore "
                "reaches the position after it",
                "move that segment out of the replica (copied there by hand or by another "
                "Litestream), then run again; or restore a snapshot (restore --before TIME)",
            )
        stamp = _stamp(config, name, last)
        out = plain / relative
        out.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _litestream_restore(
            [binary, "restore", "-config", str(own)]
            + ["-generation", generation, "-timestamp", stamp, "-o", str(out), str(live)],
            label,
        )
        for side in out.parent.glob(out.name + ".tmp*"):  # Litestream leaves its -wal/-shm
            side.unlink()
        point = Point(
            generation=generation, position=position, shipped_at=last.modified, stamp=stamp
        )
        newest = _newest_event(out) if label == HISTORY else None
        restored.append(
            FileAt(
                label=label,
                live=live,
                relative=relative,
                replica=where,
                point=point,
                last_event_at=newest,
            )
        )
        logger.info("restore_at_file", file=label, generation=generation, position=position)
    server = deployment.vector_store.staging() is not None  # pgvector: history.db only
    meta_from = (
        "none (a server store)"
        if server
        else _meta_json(deployment, when, plain / deployment.vector_store.capture_dir)
    )
    return At(
        time=when,
        files=tuple(restored),
        meta_from=meta_from,
        lost_after=_lost_after(config.history_db_path, plain / HISTORY),
    )


def _litestream_restore(argv: list[str], label: str) -> None:
    """Run ``litestream restore``; raise with the last line it logged when it fails."""
    try:
        done = subprocess.run(  # noqa: S603 - the configured binary, no shell
            argv, capture_output=True, text=True, timeout=RESTORE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UnavailableError(
            f"litestream restore of {label} failed: {error}", f"see {DOCS}"
        ) from error
    if done.returncode != 0:
        # Litestream 0.3.13 logs to stdout, older ones to stderr: its last line either way
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        raise UnavailableError(
            f"litestream restore of {label} failed: {last}",
            "fix what Litestream says, then run restore --at again",
        )


def _newest_event(path: Path) -> str | None:
    """The time of the newest history event (by row) that records one, as mem0 wrote it."""
    connection = connect_readonly(path)
    try:
        row = connection.execute(
            "SELECT coalesce(updated_at, created_at) FROM history "
            "WHERE coalesce(updated_at, created_at) IS NOT NULL ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
    except sqlite3.Error as error:
        if "no such table" in str(error):
            return None
        raise translate(error, path, "read its newest history event") from error
    finally:
        connection.close()
    return None if row is None else str(row[0])


def _lost_after(live: Path, restored: Path) -> dict[str, Any] | None:
    """The live history's events after the restored one's last row, and their memories.

    mem0 only appends history rows, so the live rows above the restored file's last row id are
    the events written after TIME: ``memories`` every memory they touch, ``only_in_live`` those
    added after TIME and not deleted since (in the live store, not in the restored pair). None
    when there is no live history.db (a lost disk).
    """
    if not live.is_file():
        return None
    after = history.last_rowid(restored)
    try:
        connection = connect_readonly(live)
        try:
            count = connection.execute(
                "SELECT count(*) FROM history WHERE rowid > ?", (after,)
            ).fetchone()[0]
            added = connection.execute(
                "SELECT DISTINCT memory_id FROM history WHERE rowid > ? AND event = 'ADD' "
                "AND memory_id IS NOT NULL AND memory_id NOT IN (SELECT memory_id FROM history "
                "WHERE rowid > ? AND event = 'DELETE' AND memory_id IS NOT NULL)",
                (after, after),
            ).fetchall()
        finally:
            connection.close()
        memories = sorted(history.memory_ids_since(live, after))
    except (sqlite3.Error, MemsyncError):
        return None
    only = sorted({normalize_point_id(str(row[0])) for row in added})
    return {"history_events": int(count), "memories": memories, "only_in_live": only}


def _meta_json(deployment: Deployment, when: datetime | None, vectors: Path) -> str:
    """Put ``meta.json`` into ``vectors``; return where from: ``snapshot <id>`` or ``live store``.

    From the newest verified snapshot taken at or before ``when``, else the live store's.

    Raises:
        UnavailableError: (exit 11) neither has one, or the snapshot's differs from its manifest.
    """
    config = deployment.config
    store = deployment.vector_store
    vectors.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = vectors / store.index_file
    before = None if when is None else when + timedelta(microseconds=1)
    relative = f"{store.capture_dir}/{store.index_file}"
    with reading.scratch(config, "restore-at-meta") as scratch:
        try:
            chosen, _ = choose.resolve(deployment, "latest" if when is None else None, before)
            directory = choose.materialize(config, chosen, scratch)
            manifest = read_manifest(directory)
            entry = next((e for e in manifest.files if e.path == relative), None)
        except (UnavailableError, ConfigError, UsageError):
            entry = None
        if entry is not None:
            if not repository.copy_checked(directory, entry, encryption_key(config), target):
                raise UnavailableError(
                    f"snapshot {manifest.id}: its {relative} differs from its manifest",
                    f"memsync snapshot verify {manifest.id}, or restore --at a time before it",
                )
            return f"snapshot {manifest.id}"
    live = next((d.path / store.index_file for d in store.local_dirs()), None)
    if live is None or not live.is_file():
        raise UnavailableError(
            "restore --at: no snapshot taken at or before TIME holds meta.json, and the live "
            "store has none (Litestream replicates SQLite files only)",
            "restore a snapshot with `memsync restore --before TIME`, or take snapshots beside "
            "protection (`memsync snapshot create`)",
        )
    shutil.copy2(live, target)
    return "live store"


def files_of(deployment: Deployment, at: At) -> tuple[list[str], set[str]]:
    """The staged layout's files (``stage``'s ``listed``) and those in WAL mode. Pure."""
    store = deployment.vector_store
    listed = [f.relative for f in at.files]
    if store.staging() is None:
        listed.append(f"{store.capture_dir}/{store.index_file}")
    return listed, {f.relative for f in at.files}


def check_replicas(deployment: Deployment, now: datetime) -> tuple[At, CheckReport]:
    """Restore every replica to its last shipment in ``work_dir`` and check the pair there.

    What ``protect --verify`` (the daemon's ``replica`` job) runs: the restore a lost disk
    would need, proven now. Nothing of it is kept; the live stores are not written. Returns
    ``at`` with the seam as ``restore --at`` reports it, and the check with the seam's writes
    in flight (changed within the shipping gap) as ``in-flight`` (``_seam_in_flight``).

    Raises:
        ConfigError, UnavailableError: as ``stage_at``.
    """
    require_embedded(deployment, "protect --verify")
    with reading.scratch(deployment.config, "protect-verify") as scratch:
        at = stage_at(deployment, None, scratch / "plain")
        listed, wal = files_of(deployment, at)
        layout = ScratchLayout(root=scratch / "copy")
        _, report = to_dir.copy_into(
            deployment, scratch / "plain", listed, wal, layout, at.restore_id, now
        )
        at = at.with_check(report)
        if at.seam:
            report = _seam_in_flight(deployment, at, report, scratch / "plain", now)
    return at, report


def shipping_gap(at: At, margin_s: float) -> CaptureWindow:
    """The restored pair's capture window: from the older file's shipment to the newer's. Pure.

    Each file is restored to its own last shipment, so a write whose parts landed between the
    two shipments is in one file only. The window is check's own (``in_window``): from the
    older shipment less ``margin_s`` (``[check] in_flight_margin_s``: mem0 stamps a memory
    before it writes it) to the newer shipment.
    """
    shipped = [f.point.shipped_at for f in at.files]
    older, newer = min(shipped), max(shipped)
    return CaptureWindow(
        vectors_at=older,
        vectors_finished_at=newer,
        history_at=older,
        history_finished_at=newer,
        longest_read_s=0.0,
        in_flight_margin_s=margin_s,
    )


SEAM_DELETE = (
    "a delete in flight at the seam: the point's removal shipped, and the live history changed "
    "the memory after the restored history's last event"
)


def _seam_in_flight(
    deployment: Deployment, at: At, report: CheckReport, plain: Path, now: datetime
) -> CheckReport:
    """``report`` with the seam's writes in flight judged ``in-flight`` (info), not errors.

    The seam's memories are judged again by check's own rules (``check.judge`` on the restored
    pair's points and events of those memories), with the shipping gap as the capture window
    (``shipping_gap``): a disagreement whose memory changed within it is ``in-flight``, and so
    is a ``missing-point`` whose memory the live history changed after the restored history's
    last event (a delete in flight: its DELETE event not shipped yet); any other stays the
    error it is. Reads the restored files under ``plain``, and the live history.db's rows
    after the restored one's (``At.lost_after``).
    """
    config, store = deployment.config, deployment.vector_store
    named = frozenset(str(s["memory_id"]) for s in at.seam)
    gap = shipping_gap(at, config.check.in_flight_margin_s)
    captured = capture.from_directory(plain, gap, config, store)
    judged = check.judge(capture.read_named(store, captured, config, named), now.date())
    # a delete in flight leaves no date in the window: the point's removal shipped, its DELETE
    # event (written after it) not yet; the live history holds it after the restored one's end
    later = set((at.lost_after or {}).get("memories") or ())
    judged = replace(
        judged,
        findings=tuple(
            check.as_in_flight(f, SEAM_DELETE)
            if f.code == "missing-point" and f.severity is Severity.ERROR and f.memory_id in later
            else f
            for f in judged.findings
        ),
    )
    again = [
        f
        for f in judged.findings
        if f.memory_id in named and (f.severity is Severity.ERROR or f.code == "in-flight")
    ]
    kept = [
        f for f in report.findings if f.memory_id not in named or f.severity is not Severity.ERROR
    ]
    return replace(report, findings=tuple(sorted(kept + again, key=lambda f: f.sort_key())))


def _check_with_history(deployment: Deployment, history_db: Path, now: datetime) -> CheckReport:
    """Check the live server table paired with ``history_db`` (a restored copy). Reads only."""
    from memsync import check

    paired = replace(deployment.config, history_db_path=history_db)
    return check.run_check(Deployment.open(paired), now)


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoredAt:
    """What ``restore --at`` did: restore's report (in place) or the copy's (``--to``), and ``at``."""

    at: At
    restored: Restored | None = None
    copied: to_dir.CopiedTo | None = None

    def to_json(self, now: datetime) -> dict[str, Any]:
        """``restore --at --json``: restore's (or ``--to``'s) document with ``at``."""
        if self.copied is not None:
            return {**self.copied.to_json(), "at": self.at.to_json()}
        assert self.restored is not None
        return {**self.restored.to_json(now), "at": self.at.to_json()}


def run_restore_at(
    deployment: Deployment,
    when: datetime | None,
    now: datetime,
    *,
    dry_run: bool,
    force: bool,
) -> RestoredAt:
    """Restore every file of the deployment to ``when`` (None: latest) from its replica, in place.

    The files are restored into ``work_dir`` first (``stage_at``), then staged beside the
    live ones and swapped in by restore's own ``put_files_in_place`` (journal, files moved
    aside, rollback), checked, and older pre-restore copies retired as ``restore`` does. A dry
    run restores and checks them in ``work_dir`` and changes nothing.

    Raises:
        UsageError: (exit 2) a server store, or data and no ``--force``.
        ConfigError, UnavailableError: as ``stage_at``.
        LockedError: (exit 12) the app holds the embedded store, or another operation runs.
    """
    config = deployment.config
    recovered = restore.finish_interrupted(deployment)
    store = deployment.vector_store
    store.require_free("restore")
    require_server_at(deployment, when)
    with reading.scratch(config, "restore-at") as scratch:
        plain = scratch / "plain"
        at = stage_at(deployment, when, plain)
        listed, wal = files_of(deployment, at)
        moves = restore.plan_restore(deployment, at.restore_id)
        if store.staging() is not None:  # the table is the server's: history.db alone
            moves = moves[-1:]
        planned = Restored(
            snapshot_id=at.restore_id,
            dry_run=dry_run,
            skipped=False,
            moves=tuple(moves),
            check=None,
            recovered=recovered,
        )
        restore.require_force(deployment, force or dry_run)
        if dry_run:
            if store.staging() is not None:
                staged = _check_with_history(deployment, plain / HISTORY, now)
            else:
                layout = ScratchLayout(root=scratch / "copy")
                _, staged = to_dir.copy_into(
                    deployment, plain, listed, wal, layout, at.restore_id, now
                )
            return RestoredAt(
                at=at.with_check(staged),
                restored=replace(
                    planned, moves=tuple(restore.existing(deployment, moves)), route="direct"
                ),
            )
        placed = restore.put_files_in_place(deployment, at.restore_id, plain, moves, listed, wal)
        assert placed is not None  # no manifest to differ from: it stages or raises
        moves = placed[0]
        aside = restore.moved_aside(moves)
    report, check_error, removed, _ = restore.checked_after_swap(deployment, now, aside)
    logger.info(
        "restore_at_finished",
        at=utc.iso_or_none(when),
        errors=report.count(Severity.ERROR) if report else None,
    )
    done = replace(
        planned,
        moves=tuple(moves),
        check=report,
        moved_aside=aside,
        route="direct",
        verification={"snapshot": "replica", "check_after": "full" if report else "failed"},
        pre_restore_removed=removed,
        check_error=check_error,
    )
    return RestoredAt(at=at.with_check(report), restored=done)


def run_restore_at_to(
    deployment: Deployment, when: datetime | None, now: datetime, dest: Path, *, dry_run: bool
) -> RestoredAt:
    """Restore every file to ``when`` from its replica into the new directory ``dest``; check it.

    As ``restore --to``: ``dest`` gets the stores and configs pointing there; the live stores
    are not written (the live history.db is read to count what came after ``when``). A dry run
    restores and checks in ``work_dir`` and writes nothing in ``dest``.

    Raises:
        UsageError: (exit 2) a server store, or ``dest`` is not new or empty or lies inside
            the live deployment.
        ConfigError, UnavailableError: as ``stage_at``.
    """
    require_embedded(deployment, "restore --at --to")
    config = deployment.config
    to_dir.require_new_directory(deployment, dest)
    layout = ScratchLayout(root=dest.absolute())
    with reading.scratch(config, "restore-at") as scratch:
        plain = scratch / "plain"
        at = stage_at(deployment, when, plain)
        listed, wal = files_of(deployment, at)
        into = ScratchLayout(root=scratch / "copy") if dry_run else layout
        if not dry_run:
            state.record_restored_to(config.state_dir, layout.root)  # forget --erase lists it
        mem0, report = to_dir.copy_into(deployment, plain, listed, wal, into, at.restore_id, now)
    flag = f" --config {layout.config}"
    copied = to_dir.CopiedTo(
        snapshot_id=at.restore_id,
        dry_run=dry_run,
        layout=layout,
        chosen=None,
        mem0=None if dry_run else mem0,
        check=report,
    )
    logger.info("restore_at_to_finished", at=utc.iso_or_none(when), to=str(layout.root))
    return RestoredAt(at=at.with_check(report, "" if dry_run else flag), copied=copied)
