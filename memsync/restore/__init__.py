"""``restore``: put both stores of a snapshot in place together, or neither.

``plan_restore`` is pure (which files move where). ``run_restore`` verifies the snapshot first,
refuses while the app holds the store, stages the snapshot's files on each target's own
filesystem, writes an intent journal, moves the current files aside to
``<path>.pre-restore-<id>`` (never deleting them), moves the new ones in with the owner and mode
of the files they replace, and checks the result. ``finish_interrupted`` finishes or rolls back a restore
that died, so the deployment is always the old one or the new one, never a mix.

Which snapshot (``latest``, ``--before``) and its verification are ``memsync.snapshot.choose``;
a copy into a directory of its own, away from the live deployment, is ``restore.to_dir``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from memsync import check, repository, state
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ConfigError, LockedError, MemsyncError, UnavailableError, UsageError
from memsync.model import CaptureWindow, CheckReport, Finding, Severity
from memsync.repository import copy_checked, encryption_key, reading
from memsync.repository.plaintext import NO_KEY
from memsync.restore import loss, pre_restore
from memsync.snapshot import choose
from memsync.state import RESTORE_JOURNAL, fsync_dir, operation_lock, write_json_atomic
from memsync.stores import history, locks
from memsync.stores.locks import LockHolder
from memsync.stores.manifest import FileEntry, Manifest
from memsync.stores.manifest_schema import id_time
from memsync.stores.snapshots import sha256_file
from memsync.stores.sqlite_files import set_wal_mode, work_dir_error

if TYPE_CHECKING:  # a server store's restore (its routes, the agent's client) loads only for one
    from memsync.routes.window import Taken
    from memsync.stores.vector_store import VectorStore

logger = structlog.get_logger(__name__)

SIDE_SUFFIXES = ("-journal", "-wal", "-shm")


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """One target of a restore: the live path, the staged copy beside it, where the old goes."""

    live: str
    staged: str
    aside: str
    had_live: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Restored:
    """What a restore did."""

    snapshot_id: str
    dry_run: bool
    skipped: bool
    moves: tuple[Move, ...]
    check: CheckReport | None
    recovered: str | None = None
    moved_aside: tuple[str, ...] = ()  # every path a restore moved aside (files, sides, dirs)
    chosen: choose.Chosen | None = None  # how ``latest`` or ``--before`` picked it
    route: str | None = None  # how the swap reached a running app: direct, agent, window
    since_snapshot: dict[str, Any] | None = None  # what the last check saw after it (loss.py)
    # {"snapshot": "hashed"|"full", "check_after": "recorded"|"full"|"failed"}: the paths taken
    verification: dict[str, str] | None = None
    pre_restore_removed: tuple[str, ...] = ()  # older copies [restore] keep_pre_restore removed
    check_error: str | None = None  # why the check after the swap could not run (exit 4)

    def age_s(self, now: datetime) -> float | None:
        """Seconds from the snapshot (its id's UTC time) to ``now``; None for an odd id."""
        try:
            return round((now - id_time(self.snapshot_id)).total_seconds(), 1)
        except ValueError:
            return None

    def move_json(self, move: Move) -> dict[str, Any]:
        """One target of the report; ``aside`` is null when nothing was (or would be) moved."""
        if self.dry_run or self.skipped:
            aside = move.aside if move.had_live else None
        else:
            aside = move.aside if move.aside in self.moved_aside else None
        return {"live": move.live, "aside": aside}

    def to_json(self, now: datetime) -> dict[str, Any]:
        """``restore --json`` at ``now`` (docs/reference/json-output.md)."""
        return {
            "command": "restore",
            "snapshot_id": self.snapshot_id,
            "snapshot_age_s": self.age_s(now),
            "chosen": self.chosen.to_json() if self.chosen else None,
            "dry_run": self.dry_run,
            "skipped": self.skipped,
            "recovered": self.recovered,
            "route": self.route,
            "moves": [self.move_json(m) for m in self.moves],
            "moved_aside": None if self.dry_run or self.skipped else list(self.moved_aside),
            "check_after": self.check.counts() if self.check else None,
            "verification": self.verification,
            "pre_restore_removed": None
            if self.dry_run or self.skipped
            else list(self.pre_restore_removed),
            "since_snapshot": None if self.skipped else self.since_snapshot,
            "check_error": self.check_error,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed:
    """``restore --resume``: what finishing an unfinished restore did (None: there was none)."""

    recovered: str | None

    def to_json(self) -> dict[str, Any]:
        """``restore --resume --json``."""
        return {"command": "restore", "resume": True, "recovered": self.recovered}


def plan_restore(deployment: Deployment, snapshot_id: str) -> list[Move]:
    """The moves of a restore of ``snapshot_id``: the vector store, then history.db. Pure.

    On a server store (pgvector) the vector store's moves name tables (``mem0`` ->
    ``mem0_pre_restore_<id>``, then the entity table), see ``restore.pgvector``; history.db's
    move is a file's.
    """
    config = deployment.config
    history = _file_move(config.history_db_path, snapshot_id)
    store = deployment.vector_store
    staging = store.staging()
    if staging is not None:
        tables = staging.plan(snapshot_id)
        return [
            *(Move(live=t["live"], staged=t["staged"], aside=t["aside"]) for t in tables),
            history,
        ]
    return [_file_move(store.location, snapshot_id), history]


def _file_move(target: Path | None, snapshot_id: str) -> Move:
    return Move(
        live=str(target),
        staged=f"{target}.restore-{snapshot_id}",
        aside=f"{target}.pre-restore-{snapshot_id}",
    )


def _unique_asides(moves: list[Move]) -> list[Move]:
    """Never reuse an existing ``.pre-restore-<id>`` name: earlier copies are kept, never replaced."""
    unique = []
    for move in moves:
        aside, number = move.aside, 1
        while (
            Path(aside).exists()
            or Path(aside).is_symlink()
            or any(Path(aside + suffix).exists() for suffix in SIDE_SUFFIXES)
        ):
            aside = f"{move.aside}-{number}"
            number += 1
        unique.append(replace(move, aside=aside))
    return unique


def _with_existence(moves: list[Move]) -> list[Move]:
    """Record which targets exist now (a rollback must remove what had nothing before)."""
    return [replace(m, had_live=Path(m.live).exists() or Path(m.live).is_symlink()) for m in moves]


def existing(
    deployment: Deployment, moves: list[Move], manifest: Manifest | None = None
) -> list[Move]:
    """``_with_existence`` and ``_unique_asides``, as a real run names the moves. Reads only.

    On a server store the tables are looked up in its catalog, and a table ``manifest``'s
    snapshot does not hold gets no staged copy (``staged`` "", as a real run's report).
    """
    store = deployment.vector_store
    staging = store.staging()
    if staging is None:
        return _unique_asides(_with_existence(moves))
    *tables, history = moves
    found = staging.with_catalog([{**asdict(t), "indexes": {}} for t in tables])
    if manifest is not None:
        listed = {entry.path for entry in manifest.files}
        found = [
            t
            if any(
                f"{store.capture_dir}/{n}" in listed
                for n in store.capture_names(t["live"])
                if n != store.index_file  # schema.json: listed with any table
            )
            else {**t, "staged": None}
            for t in found
        ]
    return [*(_table_move(t) for t in found), *_unique_asides(_with_existence([history]))]


def _table_move(table: dict[str, Any]) -> Move:
    """A table's move as the report shows it (``staged`` "" when the snapshot had no such table)."""
    return Move(
        live=table["live"],
        staged=table["staged"] or "",
        aside=table["aside"],
        had_live=table["had_live"],
    )


def journal_path(config: Config) -> Path:
    """The intent journal of a restore in progress."""
    return config.state_dir / RESTORE_JOURNAL


def has_data(deployment: Deployment) -> bool:
    """Whether the deployment holds anything a restore would replace (a vector store, or history)."""
    config = deployment.config
    history = config.history_db_path
    return deployment.vector_store.holds_data() or (history.exists() and history.stat().st_size > 0)


def run_restore(
    deployment: Deployment,
    target: str | None,
    now: datetime,
    *,
    dry_run: bool,
    force: bool,
    if_empty: bool,
    before: datetime | None = None,
) -> Restored:
    """Restore a snapshot over the deployment, both stores together.

    ``target``: an id, a path, ``s3://…`` or ``latest``; or None with ``before`` (the newest
    complete, verified snapshot made before it): ``choose.resolve``.

    Raises:
        UnavailableError: the snapshot is missing or fails verification, or none qualifies
            for ``latest``/``before`` (exit 11).
        ConfigError: it does not fit the config (collection, dimensions) (exit 10).
        LockedError: the app holds the embedded store, or another memsync operation runs (12).
        UsageError: the deployment has data and neither --force nor --if-empty was given, or
            the snapshot is named twice (2).
    """
    config = deployment.config
    recovered = finish_interrupted(deployment)
    seen = state.last_check(config.state_dir)  # before this restore's own check replaces it
    store = deployment.vector_store
    store.require_free("restore")
    in_store = store.staging() is not None  # a server store stages and swaps it itself
    if in_store:
        from memsync.restore import pgvector as pg_restore
        from memsync.routes.window import Taken

        pg_restore.require_free(deployment)  # the app holds history.db and no window is configured
    target, chosen = choose.resolve(deployment, target, before, no_safety=True)
    # <work_dir>/restore-<pid>-*: the next run removes a download a SIGKILL left
    with reading.scratch(config, "restore") as scratch:
        directory = choose.materialize(config, target, scratch)
        data = has_data(deployment)
        swaps = not dry_run and not (data and (if_empty or not force))
        # the fast path: create verified these files; the copy below hashes them (_fits_after)
        recorded = choose.recorded_clean(deployment, directory) if swaps else None
        manifest = recorded or _verified(deployment, directory, now)
        if recorded is not None and recorded.encrypted and not config.snapshot.encrypt_key_file:
            raise ConfigError(config.source, [NO_KEY])
        snapshot_id = manifest.id
        moves = plan_restore(deployment, snapshot_id)
        planned = Restored(
            snapshot_id=snapshot_id,
            dry_run=dry_run,
            skipped=False,
            moves=tuple(moves),
            check=None,
            recovered=recovered,
            chosen=chosen,
            since_snapshot=loss.since_snapshot(seen, manifest, now),
        )
        if data and if_empty:
            return replace(planned, skipped=True)
        require_force(deployment, force or dry_run)
        if dry_run:
            route = pg_restore.would_route(deployment) if in_store else "direct"
            return replace(planned, moves=tuple(existing(deployment, moves, manifest)), route=route)
        taken: Taken | None = None
        if in_store:
            taken = Taken(route="direct")
            hashing = None
            if recorded is not None and encryption_key(config) is None:
                hashing = _hashing(deployment, directory, manifest, now)  # beside the load
                plain: Path | None = directory
            else:
                plain = _pg_plaintext(
                    deployment, directory, manifest, scratch, now, recorded is not None
                )
            try:
                if plain is not None:
                    moves, aside, loaded = _put_tables_in_place(
                        deployment, manifest, plain, moves, taken, hashing
                    )
            except (_Differs, MemsyncError) as error:
                if hashing is None:
                    raise
                try:  # a load that failed on a damaged file reports the damage, as before
                    hashing()
                except _Differs:
                    _verified(deployment, directory, now)  # raises: a file differs
                    plain = None
                if not isinstance(error, _Differs) and plain is not None:
                    raise
            if plain is None:  # a file differed, yet the full verification passed: read again
                recorded = None
                plain = repository.plaintext(config, directory, manifest, scratch / "plain")
                moves, aside, loaded = _put_tables_in_place(
                    deployment, manifest, plain, moves, taken
                )
            identities: dict[str, tuple[int, int, int, int]] = {}
        else:
            loaded = None
            placed = None
            if recorded is not None:
                placed = _put_in_place(deployment, manifest, directory, moves, fast=True)
                if placed is None:  # a file differs: the full verification reports it (exit 11)
                    recorded = None
                    manifest = _verified(deployment, directory, now)
            if placed is None:
                plain = repository.plaintext(config, directory, manifest, scratch / "plain")
                placed = _put_in_place(deployment, manifest, plain, moves)
            assert placed is not None  # the full path stages or raises
            moves, identities = placed
            aside = moved_aside(moves)
    first = None
    if recorded is not None:
        first = lambda: _in_place(deployment, manifest, identities, now, loaded)  # noqa: E731
    report, check_error, removed, checked_in_place = checked_after_swap(
        deployment, now, aside, first
    )
    logger.info(
        "restore_finished",
        snapshot_id=snapshot_id,
        errors=report.count(Severity.ERROR) if report else None,
        verified="hashed" if recorded is not None else "full",
        checked="recorded" if checked_in_place else "full" if report else "failed",
    )
    verification = {
        "snapshot": "hashed" if recorded is not None else "full",
        "check_after": "recorded" if checked_in_place else "full" if report else "failed",
    }
    return replace(
        planned,
        moves=tuple(moves),
        check=report,
        moved_aside=aside,
        route=taken.route if taken is not None else "direct",
        verification=verification,
        pre_restore_removed=removed,
        check_error=check_error,
    )


def checked_after_swap(
    deployment: Deployment,
    now: datetime,
    aside: tuple[str, ...],
    first: Callable[[], CheckReport | None] | None = None,
) -> tuple[CheckReport | None, str | None, tuple[str, ...], bool]:
    """The check after a swap, then ``[restore] keep_pre_restore`` once the pair is checked.

    ``first``: a cheaper check tried before the full one (``_in_place``; None: not possible).
    Whatever stops the check, the swap stands: its cause is returned (``check_error``) and
    older copies are left. Returns the report, the error, the copies removed, and whether
    ``first``'s report is the one returned.
    """
    config = deployment.config
    report = None
    recorded = False
    check_error = None
    try:
        if first is not None:
            report = first()
            recorded = report is not None
        if report is None:
            report = check.run_check(deployment, now)
    except MemsyncError as error:
        check_error = error.message + (f" (hint: {error.hint})" if error.hint else "")
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM after the swap: stop, but say what was done
        check_error = "interrupted before the check after the swap finished"
    targets = [path for path in (deployment.vector_store.location, config.history_db_path) if path]
    removed: tuple[str, ...] = ()
    if check_error is None:  # older copies go only once the restored pair is checked
        removed = pre_restore.apply_retention(
            targets, config.settings.restore.keep_pre_restore, config.state_dir, aside
        )
    return report, check_error, removed, recorded


def _verified(deployment: Deployment, directory: Path, now: datetime) -> Manifest:
    """The full verification (``choose.verify_fit``) and the backend's fit. Raises as they do."""
    manifest = choose.verify_fit(deployment, directory, now)
    refuse_other_backend(deployment, manifest)
    return manifest


def _fits_after(deployment: Deployment, manifest: Manifest) -> None:
    """The fast path's fit, once the bytes matched: a damaged snapshot refuses first (exit 11)."""
    choose.require_fit(deployment.config, manifest)
    refuse_other_backend(deployment, manifest)


def refuse_other_backend(
    deployment: Deployment, manifest: Manifest, *, old_config: bool = False
) -> None:
    """Refuse a snapshot of another backend (exit 10): ``restore.pgvector.refuse_other_backend``.

    A snapshot of the store's own manifest mode always fits, so a restore of one never loads
    the server restore's modules (its routes, the agent's client). ``old_config``: the hint of
    ``restore --to`` (run it with the config from before the switch).

    Raises:
        ConfigError: the manifest's mode and the config's vector store differ.
    """
    if manifest.mode == deployment.vector_store.mode:
        return
    from memsync.restore import pgvector as pg_restore

    hint = pg_restore.OLD_CONFIG_HINT if old_config else pg_restore.OTHER_BACKEND_HINT
    pg_restore.refuse_other_backend(deployment, manifest, hint)


def _pg_plaintext(
    deployment: Deployment,
    directory: Path,
    manifest: Manifest,
    scratch: Path,
    now: datetime,
    fast: bool,
) -> Path | None:
    """The snapshot's files as plaintext on pgvector, their bytes checked against the manifest.

    On the fast path each file's sha256 is compared (a sealed one's while it is decrypted);
    any difference runs the full verification, which reports it as a restore always has
    (None when it passes after all: the caller reads the files the full way).
    """
    config = deployment.config
    if fast:
        key = encryption_key(config)
        plain = scratch / "plain"  # a sealed snapshot's files decrypt there; else not written
        if all(
            _hash_matches(directory, entry, key, plain / entry.path) for entry in manifest.files
        ):
            _fits_after(deployment, manifest)
            return directory if key is None else plain
        _verified(deployment, directory, now)  # raises: a file differs
        return None
    return repository.plaintext(config, directory, manifest, scratch / "plain")


class _Differs(Exception):
    """A snapshot file's sha256 differs from its manifest's (found while the tables loaded)."""


def _hashing(
    deployment: Deployment, directory: Path, manifest: Manifest, now: datetime
) -> Callable[[], None]:
    """The fast path's hashes of an unsealed pgvector snapshot, computed beside the load.

    Starts a thread comparing every file's sha256 with the manifest (hashlib lets go of the
    GIL, the server parses the rows meanwhile) and checks the snapshot's fit to the config
    (``_fits_after``: exit 10; a damaged snapshot refuses first, exit 11). Returns what the
    restore calls once everything is staged and before anything live is touched: it waits
    for the hashes and raises ``_Differs`` when one differs.
    """
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="restore-hash")
    try:
        done = pool.submit(
            lambda: all(_hash_matches(directory, e, None, directory) for e in manifest.files)
        )
    finally:
        pool.shutdown(wait=False)

    def matched() -> None:
        if not done.result():
            raise _Differs(manifest.id)

    try:
        _fits_after(deployment, manifest)
    except MemsyncError:
        if not done.result():
            _verified(deployment, directory, now)  # raises: a file differs
        raise
    return matched


def _hash_matches(directory: Path, entry: FileEntry, key: bytes | None, target: Path) -> bool:
    """Whether a snapshot file's plaintext has the manifest's sha256 (decrypted into ``target``)."""
    if key is not None:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return repository.copy_checked(directory, entry, key, target)
    return sha256_file(directory / entry.path) == (entry.size, entry.sha256)


def require_force(deployment: Deployment, given: bool) -> None:
    """Raise UsageError (exit 2) when the deployment has data and --force was not given."""
    if not given and has_data(deployment):
        raise UsageError(
            "the deployment has data: a restore would replace it",
            "pass --force (the current files are moved aside, never deleted)",
        )


def _put_tables_in_place(
    deployment: Deployment,
    manifest: Manifest,
    plain: Path,
    moves: list[Move],
    taken: Taken,
    before_swap: Callable[[], None] | None = None,
) -> tuple[list[Move], tuple[str, ...], dict[str, int]]:
    """A server store: load and swap the tables, swap history.db (``restore.pgvector``).

    ``before_swap``: run once staged, before the swap (``_hashing``). Returns the moves, what
    was moved aside, and the rows loaded into each table now in place.
    """
    from memsync.restore import pgvector as pg_restore

    config = deployment.config
    with operation_lock(config.state_dir, "restore"):
        *tables, history = moves
        history = _unique_asides(_with_existence([history]))[0]
        planned = [{**asdict(t), "indexes": {}} for t in tables]
        state.record_pre_restore(config.state_dir, [history.aside], time.time())
        done, aside = pg_restore.put_in_place(
            deployment, manifest, plain, planned, history, taken, before_swap
        )
    loaded = {t["live"]: int(t["rows"]) for t in done if t["staged"] and "rows" in t}
    return [*(_table_move(t) for t in done), history], tuple(aside), loaded


def moved_aside(moves: list[Move]) -> tuple[str, ...]:
    """The paths a swap moved aside: each target and its ``-journal``, ``-wal``, ``-shm``. Reads only.

    ``_unique_asides`` picked names no file had, so an aside path that exists now is one it moved.
    """
    candidates = [path for m in moves for path in (m.aside, *(m.aside + s for s in SIDE_SUFFIXES))]
    return tuple(path for path in candidates if Path(path).exists() or Path(path).is_symlink())


def _put_in_place(
    deployment: Deployment,
    manifest: Manifest,
    plain: Path,
    moves: list[Move],
    *,
    fast: bool = False,
) -> tuple[list[Move], dict[str, tuple[int, int, int, int]]] | None:
    """Stage the snapshot's files, then swap both stores together (``put_files_in_place``).

    With ``fast``, ``plain`` is the snapshot directory itself: each file is hashed (and
    decrypted) while it is staged, and when one differs from the manifest nothing is swapped,
    the staged files are removed and None is returned.
    """
    config = deployment.config
    return put_files_in_place(
        deployment,
        manifest.id,
        plain,
        moves,
        [entry.path for entry in manifest.files],
        {entry.path for entry in manifest.files if entry.journal_mode == "wal"},
        checked=(manifest, encryption_key(config)) if fast else None,
        fits=(lambda: _fits_after(deployment, manifest)) if fast else None,
    )


def put_files_in_place(
    deployment: Deployment,
    restore_id: str,
    plain: Path,
    moves: list[Move],
    listed: list[str],
    wal: set[str],
    *,
    checked: tuple[Manifest, bytes | None] | None = None,
    fits: Callable[[], None] | None = None,
) -> tuple[list[Move], dict[str, tuple[int, int, int, int]]] | None:
    """Stage ``listed`` (paths under ``plain``), then swap both stores together under the lock.

    ``restore_id`` names the staged and moved-aside paths and the journal's restore; ``wal``
    the files put back in WAL mode; ``checked`` as for ``stage``; ``fits`` runs once staged
    (the fast path's fit to the config; it raises to refuse). The intent journal says
    ``staged`` before the swap; a failed swap is rolled back. Returns the moves as made (aside
    names made unique, existence recorded) and each file moved in with its identity
    (``stage``); None when ``stage`` found a file differing from the manifest.
    """
    config = deployment.config
    with operation_lock(config.state_dir, "restore"):
        store = deployment.vector_store
        store.require_free("restore")
        moves = _unique_asides(_with_existence(moves))
        identities = stage(plain, moves, listed, store.capture_dir, wal, checked=checked)
        if identities is None:
            return None
        if fits is not None:
            try:
                fits()
            except MemsyncError:
                _remove_staged(moves)
                raise
        try:  # an app may have opened the store while the files were staged: not under it
            store.require_free("restore")
        except MemsyncError:
            _remove_staged(moves)
            raise
        write_json_atomic(
            journal_path(config),
            {"snapshot_id": restore_id, "phase": "staged", "moves": [asdict(m) for m in moves]},
        )
        state.record_pre_restore(config.state_dir, [m.aside for m in moves], time.time())
        try:
            _swap(config, restore_id, moves, store)
            # an app that opened the store after the last question holds what went aside: its
            # files go back under it, the restore refuses as if it had held the store before
            holder = _held_aside(store, moves)
            if holder is not None:
                raise LockedError(
                    f"restore: the embedded Qdrant store {store.location} was opened by "
                    f"{holder.describe()} as the restore swapped it; the swap was undone",
                    "stop that process (the app) first; embedded Qdrant allows one process at "
                    "a time",
                )
        except BaseException:
            _rollback(moves)
            journal_path(config).unlink(missing_ok=True)
            raise
        journal_path(config).unlink(missing_ok=True)
    return moves, identities


def _held_aside(store: VectorStore, moves: list[Move]) -> LockHolder | None:
    """Another process holding the store's lock file where it was moved aside, or None.

    The lock's inode moves with its directory, so an app that opened the store in the instant
    before the rename holds the lock at the aside path (reads /proc only). None for a server
    store (no lock file).
    """
    lock = store.lock_path()  # <store>/.lock
    for move in moves:
        if lock is not None and Path(move.live) == lock.parent:
            aside = Path(move.aside)
            holder = locks.find_holder(aside / lock.name, aside)
            if holder is not None and holder.pid != os.getpid():
                return holder
    return None


def stage(
    plain: Path,
    moves: list[Move],
    listed: list[str],
    vectors_dir: str,
    wal: set[str],
    *,
    checked: tuple[Manifest, bytes | None] | None = None,
) -> dict[str, tuple[int, int, int, int]] | None:
    """Copy the snapshot's listed files (and nothing else) beside each target.

    Files under ``vectors_dir`` (``VectorStore.capture_dir``) go to the vector store's staged
    directory, the rest (history.db) to history's. The files listed in ``wal`` (WAL mode when
    captured; the snapshot holds rollback-mode copies) are switched back to WAL mode.
    With ``checked`` (the manifest and the snapshot key, or None), ``plain`` is the snapshot
    directory: each file is decrypted when sealed and hashed as it is copied; when one differs
    from the manifest every staged file is removed and None returned.
    Returns, for each file staged, the path it will have once moved in and its identity
    (``st_dev``, ``st_ino``, ``st_size``, ``st_mtime_ns``) after its last write.
    """
    prefix = f"{vectors_dir}/"
    *vectors, history_move = moves  # a server store's restore --at: history.db alone
    vectors_move = vectors[0] if vectors else history_move
    _remove_staged(moves)
    entries = {entry.path: entry for entry in checked[0].files} if checked else {}
    staged_files: dict[Path, Path] = {}
    try:
        for relative in listed:
            if relative.startswith(prefix):
                target = Path(vectors_move.staged) / relative.removeprefix(prefix)
                live = Path(vectors_move.live) / relative.removeprefix(prefix)
            else:
                target, live = Path(history_move.staged), Path(history_move.live)
            target.parent.mkdir(parents=True, exist_ok=True)
            if checked is None:
                shutil.copy2(plain / relative, target)
            elif not copy_checked(plain, entries[relative], checked[1], target, durable=True):
                _remove_staged(moves)
                return None
            if relative in wal:
                set_wal_mode(target)
            staged_files[target] = live
    except (OSError, MemsyncError) as error:
        _remove_staged(moves)
        if isinstance(error, MemsyncError):
            raise
        raise work_dir_error(Path(vectors_move.staged).parent, error) from error
    for move in moves:
        staged = Path(move.staged)
        match_owner(staged, Path(move.live))
        for path in [staged, *(staged.rglob("*") if staged.is_dir() else [])]:
            if path.is_file():
                with path.open("rb+") as handle:
                    os.fsync(handle.fileno())
        fsync_dir(staged.parent)
    identities = {}
    for target, live in staged_files.items():
        found = target.stat()
        identities[str(live)] = (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
    return identities


def _remove_staged(moves: list[Move]) -> None:
    """Remove every ``<path>.restore-<id>`` a stage left (files or directories)."""
    for move in moves:
        staged = Path(move.staged)
        if staged.is_dir() and not staged.is_symlink():
            shutil.rmtree(staged, ignore_errors=True)
        else:
            staged.unlink(missing_ok=True)


def _in_place(
    deployment: Deployment,
    manifest: Manifest,
    identities: dict[str, tuple[int, int, int, int]],
    now: datetime,
    loaded: dict[str, int] | None = None,
) -> CheckReport | None:
    """The check after a fast-path swap: what the hash cannot prove, at the cost of a stat and two counts.

    The hash proved the staged bytes are the ones ``snapshot create`` verified and judged. What
    it cannot prove is what happened to them after: each live file must still be the file staged
    (same inode, size and modification time: nothing replaced or wrote it since), history.db
    and each collection must open as SQLite with their rows there (``history.rows`` exactly,
    at least the points the manifest counts). On a server store (``loaded``: the rows each
    table's load took, by live name) the tables were filled from the hashed export by the
    restore's own COPY, which took exactly the rows the export recorded, and renamed into
    place in one transaction: those counts stand for the collections'. Then the report is the
    manifest's judgement of these bytes (its findings
    and counts; ``last-check.json`` records it). None when anything differs, when create's
    judgement was not clean (errors, or writes it caught in flight, which a restore turns into
    the errors they stand for) or when the manifest lacks its counts: the caller runs the full
    check. Reads only.
    """
    recorded = manifest.check
    counts = [recorded.get(key) for key in ("points", "history_memories")]
    if not manifest.restores_clean or manifest.scopes is None:
        return None
    if not all(type(count) is int for count in counts):
        return None
    try:
        findings = tuple(_recorded_finding(found) for found in recorded.get("findings") or [])
        for live, identity in identities.items():
            found = Path(live).stat()
            if (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns) != identity:
                return None
        rows = loaded
        if rows is None:
            store = deployment.vector_store
            own = store.local_dirs()
            if not own:
                return None
            captured = store.open_capture(own[0].path, now, now)
            rows = store.count_rows(captured)
        summary = history.read_summary(deployment.history)
    except (OSError, MemsyncError, KeyError, TypeError, ValueError):
        return None
    for name, info in manifest.collections.items():
        if rows.get(name, 0) < int(info.get("points") or 0):
            return None
    if not summary.present or summary.rows != manifest.history.get("rows"):
        return None
    report = CheckReport(
        findings=findings,
        points=int(counts[0] or 0),
        history_memories=int(counts[1] or 0),
        history_rows=summary.rows,
        window=CaptureWindow(
            vectors_at=now,
            vectors_finished_at=now,
            history_at=now,
            history_finished_at=now,
            longest_read_s=0.0,
        ),
        scopes=manifest.scopes,
    )
    state.record_check(deployment.config.state_dir, report)
    return report


def _recorded_finding(found: dict[str, Any]) -> Finding:
    """A finding as the manifest's ``check.findings`` records it (``Finding.to_json``)."""
    return Finding(
        code=found["code"],
        severity=Severity(found["severity"]),
        message=found["message"],
        collection=found.get("collection"),
        memory_id=found.get("memory_id"),
        path=found.get("path"),
        fix=found.get("fix"),
        scope=found.get("scope"),
        expected=found.get("expected"),
        observed=found.get("observed"),
    )


def match_owner(staged: Path, live: Path) -> None:
    """Give the staged files the owner and mode of the files they replace (or of the parent)."""
    reference = live if live.exists() else live.parent
    info = reference.stat()
    for path in [staged, *(staged.rglob("*") if staged.is_dir() else [])]:
        try:
            os.chown(path, info.st_uid, info.st_gid)
        except PermissionError:
            pass  # not root: the files stay ours, which is the app's user when we run as it
        if live.exists() and path == staged and not staged.is_dir():
            os.chmod(path, info.st_mode & 0o777)


def _swap(config: Config, snapshot_id: str, moves: list[Move], store: VectorStore) -> None:
    store.require_free("restore")  # again, after the journal's fsyncs: just before the renames
    for move in moves:  # 1: everything current goes aside
        live = Path(move.live)
        if live.exists() or live.is_symlink():
            os.rename(live, move.aside)
        for suffix in SIDE_SUFFIXES:
            side = Path(move.live + suffix)
            if side.exists():
                os.rename(side, move.aside + suffix)
        fsync_dir(live.parent)
    _write_phase(config, snapshot_id, moves, "aside")
    for move in moves:  # 2: everything new comes in
        os.rename(move.staged, move.live)
        fsync_dir(Path(move.live).parent)
    _write_phase(config, snapshot_id, moves, "in")


def _write_phase(config: Config, snapshot_id: str, moves: list[Move], phase: str) -> None:
    write_json_atomic(
        journal_path(config),
        {"snapshot_id": snapshot_id, "phase": phase, "moves": [asdict(m) for m in moves]},
    )


def _rollback(moves: list[Move]) -> None:
    """Put the old files back: new ones that came in go back to their staged name."""
    for move in moves:
        live, aside = Path(move.live), Path(move.aside)
        if aside.exists() or aside.is_symlink():
            if live.exists():
                os.rename(live, move.staged)
            os.rename(aside, live)
        elif not move.had_live and live.exists() and not Path(move.staged).exists():
            os.rename(live, move.staged)  # there was nothing here before: take the new one out
        for suffix in SIDE_SUFFIXES:  # history.db's -journal/-wal/-shm go back with it
            side = Path(move.aside + suffix)
            if side.exists():
                os.rename(side, move.live + suffix)
        fsync_dir(live.parent)
    _remove_staged(moves)


def finish_interrupted(deployment: Deployment) -> str | None:
    """Finish or roll back a restore that died; return what was done, or None.

    A restore whose every new file was moved in is finished (its journal removed); anything
    earlier is rolled back to the old files. Idempotent.
    """
    config = deployment.config
    path = journal_path(config)
    if not path.is_file():
        return None
    with operation_lock(config.state_dir, "finishing an unfinished restore"):
        return _recover_locked(deployment, path)


def _recover_locked(deployment: Deployment, path: Path) -> str | None:
    if not path.is_file():  # another process finished it while we waited for nothing
        return None
    from memsync.restore import pgvector as pg_restore

    document = pg_restore.read_journal(path)
    if document is not None:
        outcome = pg_restore.finish_interrupted(deployment, document)
        logger.info("restore_recovered", outcome=outcome)
        return outcome
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        moves = [Move(**item) for item in document["moves"]]
        snapshot_id = str(document["snapshot_id"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UnavailableError(
            f"restore journal {path} is unreadable ({type(error).__name__}): memsync cannot tell which "
            "files are old and which new",
            "compare the *.restore-* and *.pre-restore-* paths beside the stores by hand, then move the "
            "journal aside",
        ) from error
    document["snapshot_id"] = snapshot_id
    if document.get("phase") == "in":
        outcome = f"finished the restore of {document['snapshot_id']}"
    else:
        _rollback(moves)
        outcome = f"rolled back the unfinished restore of {document['snapshot_id']}"
    path.unlink()
    logger.info("restore_recovered", outcome=outcome)
    return outcome
