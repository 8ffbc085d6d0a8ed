"""A switch killed midway (SIGKILL, power loss): bring the journal and the app level on a re-run.

``migrate --switch`` writes the app's new mem0 config, then puts the journal in phase
``switched``, then starts the app (``start_command``). Killed between two of these steps, it
leaves the app stopped (``<state_dir>/window.json``), and maybe the config written while the
journal still says ``verified``. The next ``--switch`` first calls ``settle``: it completes the
journal when the config was written, then starts the app (``routes.recover_window``) on
whatever its config file names now, so the app runs on one store before anything else is done.
"""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import jobs, utc
from memsync.config import Config
from memsync.migrate import app_config, journal, source_record
from memsync.migrate.plan import side_of
from memsync.routes import recover_window
from memsync.state import window_left_open

logger = structlog.get_logger(__name__)
SWITCH_FIELDS = ("switched_at", "source_snapshot", "app_config", "app_config_backup")


def settle(config: Config, config_path: Path) -> None:
    """Finish what a killed switch left: the journal's phase, then the app's start.

    The journal is put back in phase ``verified`` (``migrate-source.json`` removed) when it
    says ``switched`` while memsync's config names the migration's source again.

    The journal is put in phase ``switched`` when it says ``verified`` while memsync's config
    (which reads the app's file, or is NEW.toml's text when the config is in code) names the
    migration's target, the switch's ``.bak`` is beside that file and ``migrate-source.json``
    is there (only a switch writes it, and removes it when it does not switch). Then the app
    is started when a memsync died inside a window, and when the journal says ``switched`` a
    running daemon gets SIGHUP (the killed switch never sent it). Idempotent; call it under
    ``operation.lock``.

    Raises:
        UnavailableError: (exit 11) the journal is damaged, or start_command failed.
    """
    recorded = journal.load(config.state_dir)
    completed = False
    if recorded is not None and _written_not_recorded(config, config_path, recorded):
        _complete(config, recorded)
        completed = True
    elif recorded is not None and _put_back_not_recorded(config, recorded):
        _undo(config, recorded)
    left_open = window_left_open(config.state_dir) is not None
    recover_window(config)
    switched = (journal.load(config.state_dir) or {}).get("phase") == "switched"
    if switched and (completed or left_open):
        reload_daemon(config)  # the killed switch never told it: it still works on the source


def _complete(config: Config, recorded: dict[str, Any]) -> None:
    """The journal in phase ``switched``, as the killed switch would have written it."""
    app_file = app_config.app_config_path(config)
    recorded["phase"] = "switched"
    recorded["switched_at"] = utc.iso(datetime.now(UTC))
    if app_file is not None:
        recorded["app_config"] = str(app_file)
        recorded["app_config_backup"] = str(app_config.backup_path(app_file))
    journal.save(config.state_dir, recorded)
    logger.warning("switch_completed", target=recorded["target"], app_config=str(app_file))


def _undo(config: Config, recorded: dict[str, Any]) -> None:
    """The journal back in phase ``verified``; the old config's record removed."""
    for key in SWITCH_FIELDS:
        recorded.pop(key, None)
    recorded["phase"] = "verified"
    journal.save(config.state_dir, recorded)
    source_record.path_of(config.state_dir).unlink(missing_ok=True)
    logger.warning("switch_undone", source=recorded["source"])


def _put_back_not_recorded(config: Config, recorded: dict[str, object]) -> bool:
    """The journal says ``switched`` but memsync's config names the source again. Reads only.

    A switch killed while it put the ``.bak`` back (the app did not start on the target), or
    the old config put back by hand: the app's store is the source.
    """
    return recorded.get("phase") == "switched" and recorded.get("source") == side_of(config).where


def _written_not_recorded(config: Config, config_path: Path, recorded: dict[str, object]) -> bool:
    """The switch wrote the new config and was killed before the journal said so. Reads only."""
    written = app_config.app_config_path(config) or config_path
    return (
        recorded.get("phase") == "verified"
        and recorded.get("target") == side_of(config).where
        and app_config.backup_path(written).is_file()
        and source_record.path_of(config.state_dir).is_file()
    )


def reload_daemon(config: Config) -> int | None:
    """SIGHUP the daemon holding ``daemon.lock`` (it reloads its config); its pid, or None."""
    pid = jobs.daemon_pid(config)
    if pid is None or pid <= 0:
        return None
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        return None
    logger.info("daemon_reloaded", pid=pid)
    return pid
