"""The old deployment, kept after a switch: ``<state_dir>/migrate-source.json``.

When ``migrate --switch`` moves the app to the target, the config that named the source
(memsync's ``--config`` as it was, with its ``mem0_config_file`` inlined as ``[mem0]``, the
way the daemon keeps the config it accepted: ``memsync.config.accepted``) is written here,
mode 0600 (it may hold the old store's connection string). ``migrate --cleanup`` and
``forget --erase`` load it to reach the old store, which is kept until the cleanup; relative
paths in it resolve against the directory of the config file it came from (``from``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsync.config import Config, parse
from memsync.config.accepted import jsonable, load_self_contained, read_accepted
from memsync.errors import ConfigError
from memsync.state import write_json_atomic

SOURCE_RECORD = "migrate-source.json"


def path_of(state_dir: Path) -> Path:
    """The record's path in ``state_dir``. Pure."""
    return state_dir / SOURCE_RECORD


def record_source(config_path: Path, environ: Mapping[str, str], state_dir: Path) -> Path:
    """Keep the config at ``config_path`` (the source's) self-contained in ``state_dir``.

    Reads the config and its mem0 file; writes ``migrate-source.json`` atomically, mode 0600,
    as ``{"from": <config_path, resolved>, "document": <the document>}``. Idempotent.

    Raises:
        ConfigError: (exit 10) the config no longer loads.
        OSError: the state directory cannot be written.
    """
    document, _config = load_self_contained(config_path, environ)
    record = {"from": str(config_path.resolve()), "document": jsonable(document)}
    path = path_of(state_dir)
    write_json_atomic(path, record)
    os.chmod(path, 0o600)
    return path


def load_source(state_dir: Path, environ: Mapping[str, str]) -> Config | None:
    """The source's config as it was at the switch, or None when no record is there. Reads only.

    Raises:
        ConfigError: (exit 10) the record is unreadable, damaged, or no longer validates.
    """
    path = path_of(state_dir)
    if not path.exists():
        return None
    record: dict[str, Any] = read_accepted(path, str(path))
    origin = record.get("from")
    document = record.get("document")
    if not isinstance(origin, str) or not isinstance(document, dict):
        raise ConfigError(str(path), ["not a migrate source record (keys from, document)"])
    return parse(document, source=str(path), base_dir=Path(origin).parent, environ=environ)
