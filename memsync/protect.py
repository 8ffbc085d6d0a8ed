"""``protect``: switch the SQLite files to WAL, then write Litestream's configuration for them.

The configuration is ``memsync.protection``'s; the switch is ``tune``'s route.

Litestream replicates WAL-mode files only, and switches a file itself when it opens one in
another mode, without a route: memsync switches them first, through ``tune.apply_tune`` (direct
when nobody holds the store, else the app's agent pauses its writes; exit 12 without a route),
and the configuration lists only files in WAL mode. Re-running picks up collections created
since; the daemon (``memsync.daemon.protect``) restarts Litestream when the file changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memsync import protection, tune
from memsync.deployment import Deployment
from memsync.errors import ConfigError
from memsync.model import CheckReport, Finding, Severity
from memsync.restore import at
from memsync.stores import journal_mode


@dataclass(frozen=True, slots=True, kw_only=True)
class Protected:
    """What ``protect`` did (or, on a dry run, would do).

    Attributes:
        dry_run: nothing was written.
        tuned: the WAL switch (``tune``'s result: route, files, pause).
        config_file: where the Litestream configuration is (or would be) written.
        litestream: the configuration itself.
        changed: the file was (would be) written: it was missing or differed.
        binary: the Litestream binary the daemon runs, and its version.
        replicas: each file's replica, by live path.
    """

    dry_run: bool
    tuned: tune.Tuned
    config_file: Path
    litestream: dict[str, Any]
    changed: bool
    replicas: dict[str, str]
    binary: str

    def to_json(self) -> dict[str, Any]:
        """``protect --json`` (docs/reference/json-output.md)."""
        return {
            "command": "protect",
            "dry_run": self.dry_run,
            "route": self.tuned.route,
            "blocked": self.tuned.blocked,
            "switched": [str(entry.path) for entry in self.tuned.changed],
            "config_file": str(self.config_file),
            "litestream_binary": self.binary,
            "changed": self.changed,
            "litestream": self.litestream,
            "replicas": self.replicas,
        }


def apply_protect(deployment: Deployment, *, dry_run: bool = False) -> Protected:
    """Switch every live SQLite file to WAL, then write Litestream's configuration for them.

    The caller holds the operation lock (not on a dry run). On a dry run the configuration is
    the one the files would have once switched.

    Raises:
        ConfigError: no ``[protect]`` section.
        UnavailableError, LockedError, TryLaterError: as ``tune.apply_tune``.
    """
    config = deployment.config
    if config.protect is None:
        raise ConfigError(
            config.source, ["protect: no [protect] section: name a directory or s3 = true"]
        )
    litestream = protection.require_litestream(config)  # before any file changes
    tuned = tune.apply_tune(deployment, tune.WAL, dry_run=dry_run)
    files = journal_mode.live_files(deployment.vector_store, config.history_db_path)
    if dry_run:  # the configuration as it will be once the files are switched
        files = [
            journal_mode.LiveFile(
                path=f.path, label=f.label, mode=tune.WAL if f.mode else None,
                size_bytes=f.size_bytes,
            )
            for f in files
        ]  # fmt: skip
    document = protection.litestream_config(config.protect, config, files)
    text = protection.render(document)
    path = protection.config_file(config)
    if dry_run:
        changed = not path.exists() or path.read_text(encoding="utf-8") != text
    else:
        changed = protection.write_config(path, text)
    replicas = {
        str(f.path): protection.replica_where(config.protect, config, protection.replica_name(f))
        for f in files
        if f.mode == tune.WAL
    }
    return Protected(
        dry_run=dry_run,
        tuned=tuned,
        config_file=path,
        litestream=document,
        changed=changed,
        replicas=replicas,
        binary=litestream,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicasVerified:
    """``protect --verify``: every replica restored to its last shipment and the pair checked.

    Attributes:
        at: what was restored (``restore --at``'s ``at``: each file's position, the seam).
        check: the check of the restored pair (in ``work_dir``, removed since), the seam's
            writes in flight (changed within the shipping gap) as ``in-flight`` findings.
    """

    at: at.At
    check: CheckReport

    @property
    def ok(self) -> bool:
        """The restored pair checked without an error finding."""
        return self.check.count(Severity.ERROR) == 0

    def to_json(self) -> dict[str, Any]:
        """``protect --verify --json`` (docs/reference/json-output.md)."""
        return {
            "command": "protect",
            "verify": True,
            "ok": self.ok,
            "at": self.at.to_json(),
            "check_after": self.check.counts(),
            "findings": [f.to_json() for f in self.check.findings if f.severity == Severity.ERROR],
            "in_flight": [f.to_json() for f in self.in_flight],
        }

    @property
    def in_flight(self) -> list[Finding]:
        """The seam's writes in flight: memories changed within the shipping gap, one store only."""
        return [f for f in self.check.findings if f.code == "in-flight"]


def verify_replicas(deployment: Deployment, now: datetime) -> ReplicasVerified:
    """Restore every replica to its last shipment in ``work_dir``, check the pair, keep nothing.

    Raises:
        UsageError: (exit 2) a server store (pgvector).
        ConfigError, UnavailableError: as ``restore --at`` (no ``[protect]``, no replica,
            Litestream fails).
    """
    restored, report = at.check_replicas(deployment, now)
    return ReplicasVerified(at=restored, check=report)
