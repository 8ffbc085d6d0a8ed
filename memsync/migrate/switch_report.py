"""What ``migrate --switch`` did, for its JSON and text reports (docs/reference/commands/migrate.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync.config import Config
from memsync.errors import ExitCode
from memsync.migrate import app_config
from memsync.migrate.run import Migrated
from memsync.model import CheckReport


@dataclass(slots=True, kw_only=True)
class Switched:
    """What the switch did (or, dry, would do); ``migrated`` is its final catch-up and verify.

    Attributes:
        switched: the new config was written (and the app, if stopped, started on it).
        snapshot: the source snapshot's id (None on a dry run).
        app_config, app_config_backup: the app's mem0 config file written and its ``.bak``.
        memsync_config_backup: config in code: the ``.bak`` of memsync's own config.
        printed_config: config in code: the new mem0 dict, secrets as references.
        route: ``"window"`` when the app was stopped and started, else None.
        downtime_s: seconds from the stop issued to the start returned (window route).
        daemon_reloaded: the daemon's pid that was sent SIGHUP, or None.
        check_after: ``check`` on memsync's config after the switch.
        steps: a dry run's steps, in order.
    """

    migrated: Migrated
    switched: bool = False
    snapshot: str | None = None
    app_config: str | None = None
    app_config_backup: str | None = None
    memsync_config_backup: str | None = None
    printed_config: dict[str, Any] | None = None
    route: str | None = None
    downtime_s: float | None = None
    daemon_reloaded: int | None = None
    check_after: CheckReport | None = None
    steps: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        """3 (PROBLEMS_FOUND) when the final verification found a difference, else 0."""
        return self.migrated.exit_code

    def to_json(self) -> dict[str, Any]:
        """The migrate report plus ``switch`` (docs/reference/commands/migrate.md)."""
        return {
            **self.migrated.to_json(),
            "switch": {
                "switched": self.switched,
                "snapshot": self.snapshot,
                "app_config": self.app_config,
                "app_config_backup": self.app_config_backup,
                "memsync_config_backup": self.memsync_config_backup,
                "printed_config": self.printed_config,
                "route": self.route,
                "downtime_s": self.downtime_s,
                "daemon_reloaded": self.daemon_reloaded,
                "check_after": self.check_after.counts() if self.check_after else None,
                "steps": list(self.steps),
            },
        }


def planned(
    migrated: Migrated,
    app_file: Path | None,
    route: str | None,
    config_path: Path,
    new_config: Config,
) -> Switched:
    """The dry run's report: what the switch would do, in order. Pure.

    ``app_file`` is the app's mem0 config (None: in code), ``route`` ``"window"`` or None.
    """
    writes = app_file or config_path
    steps = [
        "take a snapshot of the source (snapshot create; local, not uploaded)",
        "keep the old config in migrate-source.json",
        "stop the app ([app] stop_command)" if route else "the app is not running",
        "catch the target up and verify it (migrate again)",
        f"write {writes} (old content kept in {app_config.backup_path(writes)})",
    ]
    if route:
        steps.append("start the app on the new store ([app] start_command)")
    return Switched(
        migrated=migrated,
        app_config=str(app_file) if app_file else None,
        app_config_backup=str(app_config.backup_path(app_file)) if app_file else None,
        memsync_config_backup=None if app_file else str(app_config.backup_path(config_path)),
        printed_config=None if app_file else app_config.printed_config(new_config),
        route=route,
        steps=steps,
    )


def text_lines(done: Switched) -> list[str]:
    """The switch's lines for the text report (after the migrate report's)."""
    if done.migrated.dry_run:
        return ["switch --dry-run would:", *(f"  {step}" for step in done.steps)]
    lines = [f"snapshot of the source: {done.snapshot}"]
    if done.route:
        lines.append(f"the app was stopped and started again ({done.downtime_s} s of downtime)")
    else:
        lines.append("the app was not running: nothing was stopped, and nothing is started")
    if not done.switched:
        lines.append("switch: not done (the target differs); the app runs on the old store")
        return lines
    if done.app_config:
        lines.append(f"wrote {done.app_config} (the old one: {done.app_config_backup})")
    if done.printed_config is not None:
        lines.append(
            f"wrote memsync's config (the old one: {done.memsync_config_backup}); put this mem0 "
            "config in the app's code, then start it:"
        )
        lines += ["  " + line for line in _pretty(done.printed_config)]
    if done.check_after is not None:
        counts = done.check_after.counts()
        lines.append(
            f"check after the switch: {counts['errors']} errors, {counts['warnings']} warnings"
        )
    if done.daemon_reloaded is not None:
        lines.append(f"daemon {done.daemon_reloaded} told to reload its config (SIGHUP)")
    lines.append(
        "switch: done; the old store is kept until memsync migrate --cleanup"
        + ("" if done.route else "; start the app: it runs on the new store now")
    )
    return lines


def _pretty(mapping: Mapping[str, Any]) -> list[str]:
    return json.dumps(mapping, indent=2).splitlines()
