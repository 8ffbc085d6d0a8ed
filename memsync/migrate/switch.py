"""``migrate --switch``: move the app onto a verified target, keeping the source and a snapshot.

Steps (docs/reference/commands/migrate.md, "The switch"): refuse (exit 10) without a journal
of this ``--to`` in phase ``verified``, when the app's mem0 config (``mem0_config_file``) is
unreadable or no longer names the source, or (exit 12) when the app holds the store and no
maintenance window is configured (or the config is in code: memsync cannot restart the app
on it). Then, under ``operation.lock``: a local snapshot of the source (``snapshot create``'s
code path; not uploaded), ``migrate-source.json`` (``source_record``), and with the app
stopped (``routes.window.app_stopped``, or as it is when it was not running) the final
catch-up and verify (``run_migrate`` again) and, only when verified, the app's new mem0
config (``app_config``). The app is started again, always: on the target, or on the source
when verification found a difference (exit 3). The journal is put in phase ``switched``
with the write (so it says what the files say, even if memsync is interrupted during the
start); when the app does not start on the target, its old config is put back, the journal
goes back to ``verified`` and the app is started again (exit 11). After: ``check`` on
memsync's config (which now names the target) and a SIGHUP to a running daemon so it
reloads that config.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import check, repository, utc
from memsync import config as config_module
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ConfigError, MemsyncError, UnavailableError
from memsync.migrate import app_config, interrupted, journal, source_record
from memsync.migrate.plan import side_of
from memsync.migrate.run import Migrated, require_target_size, run_migrate
from memsync.migrate.switch_report import Switched, planned
from memsync.routes import WINDOW_FILE, NoRouteError, Taken
from memsync.routes.window import app_stopped, bounded, run_command, signals_deferred
from memsync.snapshot import create_snapshot, pins
from memsync.state import operation_lock
from memsync.stores import journal_mode, mem0
from memsync.stores.backends import vector_store_for

logger = structlog.get_logger(__name__)

WHAT = "migrate switch"
SWITCH_FIELDS = interrupted.SWITCH_FIELDS
IN_CODE_HINT = (
    "stop the app, run memsync migrate --to NEW.toml --switch, put the printed mem0 config "
    "in the app's code, then start it"
)


@dataclass(slots=True)
class _Plan:
    """Where the switch writes and how it stops the app (found by ``_refuse``)."""

    app_file: Path | None  # the app's mem0 config; None: in code
    route: str | None  # "window", or None: the app is not running


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    """One switch's inputs, for the steps inside the window."""

    deployment: Deployment
    config_path: Path
    new_config: Config
    to: Path
    environ: Mapping[str, str]
    plan: _Plan
    snapshot: str


def run_switch(
    deployment: Deployment,
    config_path: Path,
    new_config: Config,
    to: Path,
    environ: Mapping[str, str],
    *,
    dry_run: bool,
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
) -> Switched:
    """Switch the app of ``config`` (memsync's ``--config`` at ``config_path``) to ``to``'s store.

    Args:
        deployment: memsync's current deployment (its config's mem0 dict names the source).
        config_path: the file ``config`` was loaded from (kept in ``migrate-source.json``;
            written over with NEW.toml's text when the mem0 dict is in code).
        new_config: NEW.toml, loaded.
        to: NEW.toml's path (the journal names it, resolved).
        environ: the environment (secrets of the new config are resolved from it).
        dry_run: check the refusals and plan; change nothing (no snapshot, no stop).
        batch_size: points per batch of the final catch-up (> 0).
        progress: ``progress(points_done, points_total)`` during the catch-up.

    Effects: a pinned local snapshot, ``migrate-source.json`` (removed again when the switch
    does not happen), the app stopped and started (window route), the target written (the
    catch-up), the app's mem0 config file (or memsync's config) and its ``.bak`` written
    atomically, the journal, a SIGHUP to the daemon. The source store is never written.

    Raises:
        ConfigError: (exit 10) refused (see the module docstring), or no snapshot directory.
        NoRouteError: (exit 12) the app holds the store and cannot be stopped and started.
        UnavailableError: (exit 11) the snapshot failed (nothing was stopped), a store is
            unreadable, or the app did not start on the target (its old config is back).
        WindowError, LockedError: (exit 12) the app could not be stopped; another operation runs.
    """
    config = deployment.config
    if not dry_run:  # a switch killed midway: the journal and the app level first
        with operation_lock(config.state_dir, WHAT):
            interrupted.settle(config, config_path)
    plan = _refuse(deployment, config_path, new_config, to, environ)
    now = datetime.now(UTC)
    if dry_run:
        migrated = run_migrate(deployment, new_config, to, now, dry_run=True, batch_size=batch_size)
        return planned(migrated, plan.app_file, plan.route, config_path, new_config)
    with operation_lock(config.state_dir, WHAT):
        _require_verified(journal.load(config.state_dir), to, new_config, config.state_dir)
        created = create_snapshot(
            deployment, now
        )  # rolls back a killed writer's hot journals  # before anything stops; its errors stop all
        reason = f"the source before memsync migrate --switch to {side_of(new_config).where}"
        pins.pin(deployment.repository, created.id, reason=reason, by="operator", now=now)
        logger.info("switch_snapshot", snapshot_id=created.id)
        source_record.record_source(config_path, environ, config.state_dir)
        context = _Context(
            deployment=deployment, config_path=config_path, new_config=new_config, to=to,
            environ=environ, plan=plan, snapshot=created.id,
        )  # fmt: skip
        try:
            done = _stop_copy_write(context, batch_size, progress)
        finally:  # not switched (refused, failed, rolled back): the old config is not kept,
            # and the snapshot is left to retention (each try would pin one more)
            if (journal.load(config.state_dir) or {}).get("phase") != "switched":
                source_record.path_of(config.state_dir).unlink(missing_ok=True)
                with contextlib.suppress(MemsyncError):  # never hides why the switch stopped
                    pins.unpin(deployment.repository, created.id, now=datetime.now(UTC))
        done.snapshot = created.id
        if done.switched:
            switched_config = config_module.load(config_path, environ)
            done.check_after = check.run_check(  # the deployment after the switch: its own
                Deployment.open(switched_config), datetime.now(UTC)
            )
            done.daemon_reloaded = interrupted.reload_daemon(config)
    return done


def _roll_back_if_stopped(deployment: Deployment) -> None:
    """Roll back the hot journals a killed writer left when the app is off the store.

    As the app's next start would (``mem0.prepare_for_writing``); the capture that follows reads
    read-only and could not. Skipped while the app holds an embedded store; on pgvector no holder
    shows, and SQLite rolls back only a journal no live writer holds.
    """
    if deployment.vector_store.holder() is None:
        mem0.prepare_for_writing(deployment.vector_store, deployment.config)


def _refuse(
    deployment: Deployment,
    config_path: Path,
    new_config: Config,
    to: Path,
    environ: Mapping[str, str],
) -> _Plan:
    """Check every refusal before anything is stopped; return where to write and the route."""
    config = deployment.config
    recorded = journal.load(config.state_dir)
    _require_verified(recorded, to, new_config, config.state_dir)
    assert recorded is not None
    source = side_of(config)
    app_file = app_config.app_config_path(config)
    named = f"the app's mem0 config {app_file}" if app_file else f"[mem0] of {config.source}"
    if recorded["source"] != source.where:
        raise ConfigError(
            config.source,
            [f"{named} names {source.where}, not the migration's source {recorded['source']}"],
            "the app was moved by hand: put the file back as it was to switch with memsync, "
            "or leave the migration as it is",
        )
    repository.snapshot_dir(config)  # the snapshot of the source needs a directory (exit 10)
    target = side_of(new_config)  # NEW.toml edited since the copy: refused before the stop
    require_target_size(vector_store_for(new_config), target, config.state_dir)
    if app_file is not None:
        app_config.read_app_config(app_file, config.source)
    else:
        _require_same_meaning(config, config_path, to, new_config, environ)
    app_config.require_backup_free(app_file or config_path, config.source)
    holder = deployment.vector_store.holder()
    if holder is None:
        return _Plan(app_file, "window" if _unseen_app(deployment, app_file) else None)
    if app_file is None:
        raise NoRouteError(
            f"{WHAT}: the app ({holder.describe()}) holds the store {source.where} and its mem0 "
            "config is in code: memsync cannot start it on the new store",
            IN_CODE_HINT,
        )
    if not config.app.window:
        raise NoRouteError(
            f"{WHAT}: the app ({holder.describe()}) holds the store {source.where} and no "
            "maintenance window is configured",
            "set [app] stop_command and start_command (memsync stops the app, switches and "
            "starts it), or stop the app, run --switch, and start it",
        )
    return _Plan(app_file, "window")


def _unseen_app(deployment: Deployment, app_file: Path | None) -> bool:
    """A window configured over a store whose holders cannot be seen (pgvector): stop the app."""
    config = deployment.config
    return bool(app_file and config.app.window and deployment.vector_store.lock_path() is None)


def _require_verified(
    recorded: dict[str, Any] | None, to: Path, new_config: Config, state_dir: Path
) -> None:
    """Refuse (exit 10) unless the journal is this ``--to``'s, in phase ``verified``."""
    again = f"run memsync migrate --to {to} (without --switch) until it reports verified"
    if recorded is None:
        raise ConfigError(
            new_config.source,
            [f"no migration is recorded in {journal.path_of(state_dir)}"],
            f"run memsync migrate --to {to} first: it copies and verifies; then --switch",
        )
    journal.require_same_target(
        recorded, str(to.resolve()), side_of(new_config).where, new_config.source, state_dir
    )
    phase = recorded.get("phase", "copy")
    if phase == "verified":
        return
    said = {
        "copy": ("has not finished copying (phase copy)", again),
        "differs": ("found differences (phase differs)", again),
        "switched": (
            f"was switched already at {recorded.get('switched_at')} (phase switched)",
            "nothing to do; memsync migrate --cleanup removes the old store when it is due",
        ),
        "cleaned": ("was switched and cleaned up already (phase cleaned)", "nothing to do"),
    }[phase]
    raise ConfigError(new_config.source, [f"the migration to {to} {said[0]}"], said[1])


def _require_same_meaning(
    config: Config, config_path: Path, to: Path, new_config: Config, environ: Mapping[str, str]
) -> None:
    """Refuse (exit 10) when NEW.toml's text would name other stores in memsync's config's place.

    The config-in-code switch writes NEW.toml's text over ``config_path``: relative paths in
    it resolve against that file's directory from then on, and its ``state_dir`` must be the
    current one (the journal and ``migrate-source.json``, which ``--cleanup`` and
    ``forget --erase`` read, are there).
    """
    placed = config_module.load(config_path, environ, text_from=to)
    as_placed = replace(side_of(placed), source=new_config.source)  # only the file name differs
    if (as_placed, placed.state_dir) != (side_of(new_config), new_config.state_dir):
        raise ConfigError(
            new_config.source,
            [f"its relative paths name other files when it is written over {config_path}"],
            "make the paths in NEW.toml absolute, then run the switch again",
        )
    if new_config.state_dir.resolve() != config.state_dir.resolve():
        raise ConfigError(
            new_config.source,
            [f"its state_dir {new_config.state_dir} is not {config.state_dir}: once it is "
             "memsync's config, the migration's journal and old config would be left behind"],
            f"set state_dir in NEW.toml to {config.state_dir}, then run the switch again",
        )  # fmt: skip


def _stop_copy_write(
    context: _Context, batch_size: int, progress: Callable[[int, int], None] | None
) -> Switched:
    """Stop the app (window route), catch up and verify, write the new config, start the app."""
    deployment, plan = context.deployment, context.plan
    config = deployment.config
    taken = Taken()
    done: Switched | None = None
    stop_issued = time.monotonic()

    def copy_and_write() -> Switched:
        _roll_back_if_stopped(deployment)  # the window's stop may leave a hot journal
        with _bounded(config, plan.route, stop_issued):
            migrated = run_migrate(
                deployment, context.new_config, context.to, datetime.now(UTC), dry_run=False,
                batch_size=batch_size, progress=progress, lock=False,
            )  # fmt: skip
        if migrated.differences:
            return Switched(migrated=migrated, route=plan.route)
        _require_still_free(deployment)
        _wal_for_protection(context.new_config)
        return _write(context, migrated)

    if plan.route is None:
        return copy_and_write()
    held = deployment.vector_store.holder
    try:
        with app_stopped(config, WHAT, taken, held):
            done = copy_and_write()
    except UnavailableError as failure:
        if done is None or not done.switched:
            raise
        _roll_back(config, done, failure)
    assert done is not None
    done.downtime_s = taken.downtime_s
    return done


def _bounded(config: Config, route: str | None, stop_issued: float) -> AbstractContextManager[None]:
    """The final catch-up's bound, as a window's work; none when the app was not running.

    ``[app] max_downtime_s`` from the stop issued, less the time the stop took (the start is
    given as long); nothing waits on an app that was not running.

    Raises (from the block):
        WindowOverrunError: (exit 75) the catch-up overran: no config is written, the app is
            started again on the source, the journal keeps its phase and what was copied
            stays (run ``memsync migrate --to NEW.toml`` with the app running, then the
            switch again: its catch-up is then short).
    """
    if route is None:
        return nullcontext()
    stop_took = time.monotonic() - stop_issued
    deadline = stop_issued + config.app.max_downtime_s - stop_took
    return bounded(deadline, WHAT, config.app.max_downtime_s)


def _require_still_free(deployment: Deployment) -> None:
    """Refuse (exit 12) to write the new config while a process holds the source again.

    The app was not running, or was stopped: something (a supervisor, the operator) started
    it during the catch-up. Its writes would stay in the old store.
    """
    config = deployment.config
    holder = deployment.vector_store.holder()
    if holder is not None and holder.pid != os.getpid():
        raise NoRouteError(
            f"{WHAT}: the app ({holder.describe()}) started on the store {side_of(config).where} "
            "during the switch; nothing was written",
            "keep it from being restarted meanwhile (or set [app] stop_command and "
            "start_command), then run --switch again",
        )


def _wal_for_protection(new_config: Config) -> None:
    """With ``[protect]`` in NEW.toml: the target's SQLite files in WAL mode before the app starts.

    Litestream replicates WAL-mode files only; nobody holds them now (the app is stopped or was
    not running), so they switch directly and the daemon, reloading NEW.toml, replicates them.
    """
    if new_config.protect is None:
        return
    target = Deployment.open(new_config).vector_store
    for live in journal_mode.live_files(target, new_config.history_db_path):
        if live.mode != journal_mode.WAL:
            journal_mode.switch(live.path, journal_mode.WAL)
            logger.info("switch_wal_for_protection", path=str(live.path))


def _write(context: _Context, migrated: Migrated) -> Switched:
    """Write the app's new mem0 config (or, in code, memsync's config and the printed dict).

    The journal is put in phase ``switched`` at once, before the app starts: it says what
    the files say, even when memsync is interrupted during the start.
    """
    plan = context.plan
    done = Switched(migrated=migrated, switched=True, route=plan.route, snapshot=context.snapshot)
    with signals_deferred():  # SIGTERM/Ctrl-C never lands between the file and the journal
        _write_and_record(context, done)
    return done


def _write_and_record(context: _Context, done: Switched) -> None:
    """The new config's file and its ``.bak`` written, then the journal in phase ``switched``."""
    plan, config_path = context.plan, context.config_path
    if plan.app_file is not None:
        old = app_config.read_app_config(plan.app_file, str(config_path))
        mapping = app_config.switched_mapping(old, context.new_config, context.environ)
        text = app_config.render(plan.app_file, mapping)
        done.app_config_backup = str(app_config.replace_backed_up(plan.app_file, text.encode()))
        done.app_config = str(plan.app_file)
    else:
        done.printed_config = app_config.printed_config(context.new_config)
        done.memsync_config_backup = str(
            app_config.replace_backed_up(config_path, context.to.read_bytes())
        )
    logger.info("switch_written", app_config=done.app_config, config=str(config_path))
    _record_switched(context.deployment.state, done)


def _roll_back(config: Config, done: Switched, failure: UnavailableError) -> None:
    """The app did not start on the target: put its old config back and start it again.

    Raises:
        UnavailableError: (exit 11) always; says whether the app runs on the old store now.
    """
    assert done.app_config is not None and done.app_config_backup is not None
    assert config.app.start_command is not None
    app_file = Path(done.app_config)
    app_config.put_back(app_file, Path(done.app_config_backup))
    _record_verified(config.state_dir)
    source_record.path_of(config.state_dir).unlink(missing_ok=True)
    logger.warning("switch_rolled_back", app_config=str(app_file), error=failure.message)
    try:
        run_command(
            config.app.start_command, "start_command", config.app.max_downtime_s, UnavailableError
        )
    except UnavailableError as again:
        raise UnavailableError(
            f"{WHAT}: the app did not start on the new store ({failure.message}); its old "
            f"config {app_file} is back, but it did not start on that either ({again.message})",
            "start the app by hand; the migration stays verified: fix the app's start on the "
            "new store, then run --switch again",
        ) from failure
    (config.state_dir / WINDOW_FILE).unlink(missing_ok=True)
    raise UnavailableError(
        f"{WHAT}: the app did not start on the new store ({failure.message}); its old config "
        f"{app_file} is back and it runs on the old store",
        "see why the app cannot open the new store or build the new embedder (its log), fix "
        "that, then run --switch again (the migration stays verified)",
    ) from failure


def _record_switched(state_dir: Path, done: Switched) -> None:
    """The journal in phase ``switched`` with when, the snapshot and the files written."""
    document = journal.load(state_dir) or {}
    document.update(phase="switched", switched_at=utc.iso(datetime.now(UTC)))
    if done.snapshot is not None:
        document["source_snapshot"] = done.snapshot
    if done.app_config is not None and done.app_config_backup is not None:
        document.update(app_config=done.app_config, app_config_backup=done.app_config_backup)
    journal.save(state_dir, document)


def _record_verified(state_dir: Path) -> None:
    """The journal back in phase ``verified`` (the switch was rolled back)."""
    document = journal.load(state_dir) or {}
    for key in SWITCH_FIELDS:
        document.pop(key, None)
    document["phase"] = "verified"
    journal.save(state_dir, document)
