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
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import check, repository, state
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import MemsyncError, UnavailableError, UsageError
from memsync.model import CheckReport, Severity
from memsync.repository import reading
from memsync.restore import loss
from memsync.restore import pgvector as pg_restore
from memsync.routes.window import Taken
from memsync.snapshot import choose
from memsync.state import RESTORE_JOURNAL, fsync_dir, operation_lock, write_json_atomic
from memsync.stores.manifest import Manifest
from memsync.stores.manifest_schema import id_time
from memsync.stores.sqlite_files import set_wal_mode, work_dir_error

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
            "since_snapshot": None if self.skipped else self.since_snapshot,
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


def _existing(deployment: Deployment, moves: list[Move]) -> list[Move]:
    """``_with_existence``; on a server store the tables are looked up in its catalog. Reads only."""
    staging = deployment.vector_store.staging()
    if staging is None:
        return _with_existence(moves)
    *tables, history = moves
    found = staging.with_catalog([{**asdict(t), "indexes": {}} for t in tables])
    return [*(_table_move(t) for t in found), *_with_existence([history])]


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
        pg_restore.require_free(deployment)  # the app holds history.db and no window is configured
    target, chosen = choose.resolve(deployment, target, before, no_safety=True)
    # <work_dir>/restore-<pid>-*: the next run removes a download a SIGKILL left
    with reading.scratch(config, "restore") as scratch:
        directory = choose.materialize(config, target, scratch)
        manifest = choose.verify_fit(deployment, directory, now)
        pg_restore.refuse_other_backend(deployment, manifest)
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
        if has_data(deployment) and if_empty:
            return replace(planned, skipped=True)
        _require_force(deployment, force or dry_run)
        if dry_run:
            route = pg_restore.would_route(deployment) if in_store else "direct"
            return replace(planned, moves=tuple(_existing(deployment, moves)), route=route)
        plain = repository.plaintext(config, directory, manifest, scratch / "plain")
        taken = Taken(route="direct")
        if in_store:
            moves, aside = _put_tables_in_place(deployment, manifest, plain, moves, taken)
        else:
            moves = _put_in_place(deployment, manifest, plain, moves)
            aside = moved_aside(moves)
    report = check.run_check(deployment, now)
    logger.info("restore_finished", snapshot_id=snapshot_id, errors=report.count(Severity.ERROR))
    return replace(planned, moves=tuple(moves), check=report, moved_aside=aside, route=taken.route)


def _require_force(deployment: Deployment, given: bool) -> None:
    """Raise UsageError (exit 2) when the deployment has data and --force was not given."""
    if not given and has_data(deployment):
        raise UsageError(
            "the deployment has data: a restore would replace it",
            "pass --force (the current files are moved aside, never deleted)",
        )


def _put_tables_in_place(
    deployment: Deployment, manifest: Manifest, plain: Path, moves: list[Move], taken: Taken
) -> tuple[list[Move], tuple[str, ...]]:
    """A server store: load and swap the tables, swap history.db (``restore.pgvector``)."""
    config = deployment.config
    with operation_lock(config.state_dir, "restore"):
        *tables, history = moves
        history = _unique_asides(_with_existence([history]))[0]
        planned = [{**asdict(t), "indexes": {}} for t in tables]
        done, aside = pg_restore.put_in_place(deployment, manifest, plain, planned, history, taken)
    return [*(_table_move(t) for t in done), history], tuple(aside)


def moved_aside(moves: list[Move]) -> tuple[str, ...]:
    """The paths a swap moved aside: each target and its ``-journal``, ``-wal``, ``-shm``. Reads only.

    ``_unique_asides`` picked names no file had, so an aside path that exists now is one it moved.
    """
    candidates = [path for m in moves for path in (m.aside, *(m.aside + s for s in SIDE_SUFFIXES))]
    return tuple(path for path in candidates if Path(path).exists() or Path(path).is_symlink())


def _put_in_place(
    deployment: Deployment, manifest: Manifest, plain: Path, moves: list[Move]
) -> list[Move]:
    """Stage the snapshot's files, then swap both stores together under the operation lock.

    The intent journal says ``staged`` before the swap; a failed swap is rolled back. Returns
    the moves as made (aside names made unique, existence recorded).
    """
    config = deployment.config
    with operation_lock(config.state_dir, "restore"):
        store = deployment.vector_store
        store.require_free("restore")
        moves = _unique_asides(_with_existence(moves))
        wal = {entry.path for entry in manifest.files if entry.journal_mode == "wal"}
        stage(plain, moves, [entry.path for entry in manifest.files], store.capture_dir, wal)
        write_json_atomic(
            journal_path(config),
            {"snapshot_id": manifest.id, "phase": "staged", "moves": [asdict(m) for m in moves]},
        )
        try:
            _swap(config, manifest.id, moves)
        except BaseException:
            _rollback(moves)
            journal_path(config).unlink(missing_ok=True)
            raise
        journal_path(config).unlink(missing_ok=True)
    return moves


def stage(
    plain: Path, moves: list[Move], listed: list[str], vectors_dir: str, wal: set[str]
) -> None:
    """Copy the snapshot's listed files (and nothing else) beside each target.

    Files under ``vectors_dir`` (``VectorStore.capture_dir``) go to the vector store's staged
    directory, the rest (history.db) to history's. The files listed in ``wal`` (WAL mode when
    captured; the snapshot holds rollback-mode copies) are switched back to WAL mode.
    """
    prefix = f"{vectors_dir}/"
    vectors_move, history_move = moves
    for move in moves:
        staged = Path(move.staged)
        if staged.is_dir():
            shutil.rmtree(staged)
        else:
            staged.unlink(missing_ok=True)
    try:
        for relative in listed:
            if relative.startswith(prefix):
                target = Path(vectors_move.staged) / relative.removeprefix(prefix)
            else:
                target = Path(history_move.staged)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(plain / relative, target)
            if relative in wal:
                set_wal_mode(target)
    except (OSError, MemsyncError) as error:
        for move in moves:
            staged = Path(move.staged)
            shutil.rmtree(staged, ignore_errors=True) if staged.is_dir() else staged.unlink(
                missing_ok=True
            )
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


def _swap(config: Config, snapshot_id: str, moves: list[Move]) -> None:
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
    for move in moves:
        staged = Path(move.staged)
        if staged.is_dir():
            shutil.rmtree(staged, ignore_errors=True)
        else:
            staged.unlink(missing_ok=True)


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
