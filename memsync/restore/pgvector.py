"""``restore`` on a server store (pgvector): the snapshot's tables loaded beside the live ones, swapped in by renames.

Steps (each recorded in the intent journal ``restore-journal.json``, ``"backend": "pgvector"``):

1. ``loading``: each table of the snapshot (``pgvector/<table>.pgcopy``, or ``.csv`` from memsync 0.2) is loaded into a new
   table ``<table>_restore_<id>`` with its indexes (the store's ``staging()``); the
   snapshot's history.db is staged beside the live one (``<history>.restore-<id>``).
2. ``staged``: then, with the app kept off history.db (nobody holds it; or the app's memsync
   agent pauses its writes and closes mem0's history connection, ``restore.pg_agent``; or
   ``[app]``'s maintenance window stops the app), ONE transaction renames each live table aside to
   ``<table>_pre_restore_<id>`` and the new ones into place;
3. ``tables-in``: history.db (with its ``-journal``, ``-wal``, ``-shm``) moves aside to
   ``<history>.pre-restore-<id>`` and the staged copy in; ``in``: done.

``finish_interrupted`` rolls back a restore that died before the table swap committed (memsync's own
staged tables dropped, the staged history removed) and finishes one that died after it (the
history swap done, through the app's agent when the app holds history.db again). Nothing of
the live deployment is ever dropped or deleted.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import structlog

from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ConfigError, LockedError, UnavailableError
from memsync.restore.pg_agent import agent_for, history_holder, history_released
from memsync.routes.window import Taken, app_stopped, recover_window
from memsync.state import RESTORE_JOURNAL, fsync_dir, write_json_atomic
from memsync.stores import history as history_store
from memsync.stores.backends import backend_of_mode
from memsync.stores.manifest import Manifest
from memsync.stores.sqlite_files import roll_back_hot_journal, set_wal_mode, work_dir_error
from memsync.stores.vector_store import StagedRestore

logger = structlog.get_logger(__name__)

SIDES = ("-journal", "-wal", "-shm")


def staging_of(deployment: Deployment) -> StagedRestore:
    """The deployment's server store's staging (its store's ``staging()`` is not None)."""
    staging = deployment.vector_store.staging()
    assert staging is not None
    return staging


def require_free(deployment: Deployment) -> None:
    """Refuse (exit 12) while the app holds history.db with no agent answering and no window.

    First refuses (exit 11) a database without the vector extension (``load``).

    Raises:
        LockedError: the app holds history.db open, no memsync agent of it answers and
            ``[app] stop_command``/``start_command`` are not both set.
        UnavailableError: (exit 11) an agent answers for another deployment or process.
    """
    config = deployment.config
    staging_of(deployment).require_ready()  # a dry run says it too
    holder = history_holder(config)
    if holder is None or config.app.window:
        return
    client = agent_for(deployment, holder)
    if client is not None:
        client.close()
        return
    raise LockedError(
        f"restore: the app ({holder.describe()}) holds {config.history_db_path} open; "
        "memsync cannot swap it under the app, no memsync agent of it answers and no "
        "maintenance window is configured",
        "attach memsync.agent in the app, or stop the app and run again, or set [app] "
        "stop_command and start_command (docs/how-to/pgvector.md#restore)",
    )


def would_route(deployment: Deployment) -> str | None:
    """The route a restore's swap would take now: direct, agent, window; None: refused. Reads only."""
    config = deployment.config
    holder = history_holder(config)
    if holder is None:
        return "direct"
    client = agent_for(deployment, holder)
    if client is not None:
        client.close()
        return "agent"
    return "window" if config.app.window else None


def plan_tables(deployment: Deployment, snapshot_id: str) -> list[dict[str, Any]]:
    """The memory and entity tables of a restore: live, staged and aside names. Pure."""
    return staging_of(deployment).plan(snapshot_id)


def with_catalog(deployment: Deployment, tables: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record which live tables exist and give each aside a name no table has. Reads only."""
    return staging_of(deployment).with_catalog(tables)


def put_in_place(
    deployment: Deployment,
    manifest: Manifest,
    plain: Path,
    tables: list[dict[str, Any]],
    history: Any,
    taken: Taken,
    before_swap: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Load, stage, then swap tables and history.db; returns (tables, every name moved aside).

    ``history`` is history.db's ``restore.Move`` (its aside name already unique); ``taken``
    receives the route of the swap (direct, agent, window). ``before_swap`` runs once all is
    staged, before anything live is touched; when it raises, what was staged is removed (the
    snapshot's hashes, checked while the tables load). Runs under the operation lock;
    see the module docstring for the steps and the journal.

    Raises:
        LockedError: the app holds history.db and no window is configured (exit 12).
        WindowError, UnavailableError, TryLaterError: as ``app_stopped`` and ``load``.
    """
    config = deployment.config
    store = deployment.vector_store
    staging, root = staging_of(deployment), plain / store.capture_dir
    captured = staging.captured_tables(root)
    tables = [
        {**t, "staged": t["staged"] if t["live"] in captured else None}
        for t in staging.with_catalog(tables)
    ]
    document: dict[str, Any] = {
        "backend": store.mode, "snapshot_id": manifest.id, "phase": "loading",
        "tables": tables, "history": asdict(history),
    }  # fmt: skip
    write_json_atomic(journal(config), document)
    try:
        staging.load(root, tables)
        _stage_history(manifest, plain, history, store.capture_dir)
        if before_swap is not None:
            before_swap()
        _phase(config, document, "staged")
    except BaseException:
        _roll_back(deployment, document)
        raise
    with _app_kept_off(deployment, taken):
        try:
            # nobody holds history.db now: roll back what a killed app left, as its start would
            roll_back_hot_journal(Path(history.live))
            document["history_rowid"] = history_store.last_rowid(Path(history.live))
            write_json_atomic(journal(config), document)  # rows above it: written after the swap
            staging.swap(tables)
        except BaseException:
            _roll_back(deployment, document)
            raise
        _phase(config, document, "tables-in")
        _swap_history(history)
        journal(config).unlink(missing_ok=True)
    aside = [t["aside"] for t in tables if t["had_live"]]
    files = [p for p in (history.aside, *(history.aside + s for s in SIDES)) if Path(p).exists()]
    logger.info("pgvector_restored", snapshot_id=manifest.id, route=taken.route, aside=aside)
    return tables, [*aside, *files]


def journal(config: Config) -> Path:
    """The restore intent journal (shared with the embedded restore)."""
    return config.state_dir / RESTORE_JOURNAL


def _phase(config: Config, document: dict[str, Any], phase: str) -> None:
    document["phase"] = phase
    write_json_atomic(journal(config), document)


@contextmanager
def _app_kept_off(deployment: Deployment, taken: Taken) -> Iterator[None]:
    """Run the block with the app off history.db; ``taken.route`` says how.

    Nobody holds it (direct), its agent lets it go (agent, ``restore.pg_agent``), or the
    window stops the app; else refuse (exit 12).
    """
    config = deployment.config
    holder = history_holder(config)
    if holder is None:
        taken.route = "direct"
        yield
        return
    client = agent_for(deployment, holder)
    if client is not None:
        with client, history_released(config, client, taken):
            yield
        return
    require_free(deployment)
    with app_stopped(config, "restore", taken, lambda: history_holder(config)):
        yield


def _stage_history(manifest: Manifest, plain: Path, history: Any, capture_dir: str) -> None:
    """Copy the snapshot's history.db to ``history.staged`` (WAL mode back if so), owner matched."""
    from memsync.restore import match_owner

    entries = [e for e in manifest.files if not e.path.startswith(f"{capture_dir}/")]
    staged = Path(history.staged)
    staged.unlink(missing_ok=True)
    if not entries:
        return
    try:
        shutil.copy2(plain / entries[0].path, staged)
    except OSError as error:
        staged.unlink(missing_ok=True)
        raise work_dir_error(staged.parent, error) from error
    if entries[0].journal_mode == "wal":
        set_wal_mode(staged)
    match_owner(staged, Path(history.live))
    with staged.open("rb+") as handle:
        os.fsync(handle.fileno())
    fsync_dir(staged.parent)


def _swap_history(history: Any) -> None:
    """history.db and its sides aside, the staged copy in. Idempotent (resumable after a kill)."""
    live, staged = Path(history.live), Path(history.staged)
    if not staged.exists():
        return  # done already (or the snapshot held none)
    if live.exists():
        os.rename(live, history.aside)
    for side in SIDES:
        if Path(history.live + side).exists():
            os.rename(history.live + side, history.aside + side)
    fsync_dir(live.parent)
    os.rename(staged, live)
    fsync_dir(live.parent)


def _roll_back(deployment: Deployment, document: dict[str, Any]) -> None:
    """Drop memsync's staged tables, remove the staged history.db, remove the journal."""
    config = deployment.config
    staged = [t["staged"] for t in document["tables"] if t["staged"] is not None]
    staging_of(deployment).drop_staged(staged)
    Path(document["history"]["staged"]).unlink(missing_ok=True)
    journal(config).unlink(missing_ok=True)


def _swapped(deployment: Deployment, document: dict[str, Any]) -> bool:
    """Whether the table swap committed (the journal may predate it). Reads the catalog."""
    if document["phase"] in ("tables-in", "in"):
        return True
    if document["phase"] != "staged":
        return False  # loading: staged tables may not exist yet, the swap never began
    return staging_of(deployment).swapped(document["tables"])


def finish_interrupted(deployment: Deployment, document: dict[str, Any]) -> str:
    """Finish (the tables were swapped) or roll back (they were not) a pgvector restore that died.

    Call under the operation lock. Idempotent. A window the dead restore left open is closed
    (the app started) afterwards.

    Raises:
        LockedError: the tables were swapped but the app now holds history.db: stop it first.
        UnavailableError: the journal is not a pgvector restore's, or the server is unreachable.
    """
    config = deployment.config
    try:
        snapshot_id = str(document["snapshot_id"])
        history = document["history"]
        swapped = _swapped(deployment, document)
    except (KeyError, TypeError) as error:
        raise UnavailableError(
            f"restore journal {journal(config)} is not a pgvector restore's ({error})",
            "compare the *_restore_* and *_pre_restore_* tables by hand, then move the journal aside",
        ) from error
    if swapped:
        _finish_history(deployment, snapshot_id, history, document.get("history_rowid"))
        outcome = f"finished the restore of {snapshot_id}"
    else:
        _roll_back(deployment, document)
        outcome = f"rolled back the unfinished restore of {snapshot_id}"
    recover_window(config)
    return outcome


def _finish_history(
    deployment: Deployment, snapshot_id: str, history: dict[str, Any], rowid: int | None
) -> None:
    """Swap history.db in after the tables (the app's agent lets it go when the app holds it).

    History rows the app wrote to the old file after the table swap (rowid above ``rowid``,
    their points are in the new tables) are carried over into the restored file.
    """
    config = deployment.config
    holder = history_holder(config)
    if holder is None or not Path(history["staged"]).exists():
        _swap_history_and_carry(history, rowid)
        journal(config).unlink(missing_ok=True)
        return
    client = agent_for(deployment, holder)
    if client is None:
        raise LockedError(
            f"an unfinished restore of {snapshot_id} swapped the tables but not history.db, "
            f"and the app ({holder.describe()}) holds {history['live']} open",
            "attach memsync.agent in the app, or stop the app; then run: memsync restore --resume",
        )
    with client, history_released(config, client, Taken()):
        _swap_history_and_carry(history, rowid)
        journal(config).unlink(missing_ok=True)


def _swap_history_and_carry(history: dict[str, Any], rowid: int | None) -> None:
    """``_swap_history``, then the rows written to the old file after the table swap copied in."""
    move = _HistoryMove(**history)
    _swap_history(move)
    if rowid is not None and Path(move.live).exists():  # idempotent: INSERT OR IGNORE
        carried = history_store.carry_rows_after(Path(move.aside), Path(move.live), int(rowid))
        logger.info("history_rows_carried", rows=carried, source=move.aside)


class _HistoryMove:
    """history.db's move as the journal recorded it (``restore.Move``'s fields)."""

    def __init__(self, live: str, staged: str, aside: str, had_live: bool = True) -> None:
        self.live, self.staged, self.aside, self.had_live = live, staged, aside, had_live


def read_journal(path: Path) -> dict[str, Any] | None:
    """The journal's document when it is a server store's restore (``backend``), else None. Reads only."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (
        document
        if isinstance(document, dict) and isinstance(document.get("backend"), str)
        else None
    )


OTHER_BACKEND_HINT = (
    "restore a snapshot of this deployment's backend; to look at this one (taken before a "
    "memsync migrate --switch), copy it with the config of its backend: memsync --config "
    "OLD.toml restore ID --to DIR (memsync.toml.bak, or your config with mem0_config_file "
    "naming the app's .bak)"
)
OLD_CONFIG_HINT = (
    "a snapshot taken before memsync migrate --switch: run it with memsync's config as it "
    "was before the switch (memsync --config OLD.toml restore ID --to DIR: memsync.toml.bak, "
    "or your config with mem0_config_file naming the app's .bak)"
)


def refuse_other_backend(
    deployment: Deployment, manifest: Manifest, hint: str = OTHER_BACKEND_HINT
) -> None:
    """Refuse a snapshot of another backend (exit 10): pgvector vs embedded Qdrant.

    Raises:
        ConfigError: the manifest's mode and the config's vector store differ.
    """
    config = deployment.config
    configured, taken = deployment.vector_store, backend_of_mode(manifest.mode)
    if configured.mode != taken.mode:
        article = "an" if taken.label[0] in "aeiou" else "a"
        raise ConfigError(
            config.source,
            [
                f"mem0.vector_store.provider: snapshot {manifest.id} is of "
                f"{article} {taken.label} deployment, this one uses {configured.label}"
            ],
            hint,
        )
