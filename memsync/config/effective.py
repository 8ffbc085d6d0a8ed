"""The effective configuration as a plain document, for ``memsync config show``; secrets redacted.

Never shows a secret's value: ``{env}``/``{file}`` references stay references (never resolved),
keys the schema marks ``secret`` (``daemon.ping_url``, each of ``daemon.notify``) and every mem0 value under a secret-like
name (``memsync.config.redact``: ``api_key``, ``X-Api-Key``, ``private_key``, ``pw``, ``token``...,
whatever its type) become ``"<redacted>"``, and a URL's credentials (``https://user:pass@host``)
become ``https://<redacted>@host`` wherever they appear.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, time, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memsync.config import Config, Secret
from memsync.config.redact import REDACTED, is_secret_name, scrub_url

__all__ = ["REDACTED", "effective_document", "flatten", "format_duration", "writable_paths"]


def effective_document(config: Config) -> dict[str, Any]:
    """Every key with its value or default, resolved (paths absolute), secrets redacted. Pure."""
    settings = config.settings
    document = _model(settings, skip=("mem0", "snapshot", "s3", "daemon", "app"))
    document.update(
        mem0_dir=str(config.mem0_dir),
        state_dir=str(config.state_dir),
        work_dir=str(config.work_dir),
    )
    declared = _model(settings.mem0)
    declared["history_db_path"] = str(config.history_db_path)
    document["mem0"] = _merge(_redact_mem0(config.mem0), declared)
    document["snapshot"] = _model(settings.snapshot)
    document["s3"] = _model(settings.s3) if settings.s3 is not None else None
    document["daemon"] = _model(settings.daemon)
    document["app"] = _model(settings.app)
    if config.app_python is not None:  # the older top-level app_python is [app] python's value
        document["app"]["python"] = str(config.app_python)
    if document.get("app_python") is None:  # its older spelling, shown only when the file has it
        document.pop("app_python", None)
    return document


def validated_json(config: Config) -> dict[str, Any]:
    """``config validate --json``: the file named and valid (an invalid one is exit 10)."""
    return {"command": "config validate", "ok": True, "source": config.source}


def shown_json(config: Config) -> dict[str, Any]:
    """``config show --json``: every key's effective value, secrets redacted."""
    return {
        "command": "config show",
        "ok": True,
        "source": config.source,
        "config": effective_document(config),
        "writable_paths": [str(path) for path in writable_paths(config)],
    }


def writable_paths(config: Config) -> list[Path]:
    """Directories memsync may write, for a service's ``ReadWritePaths=``; sorted, none inside another. Pure.

    The parents of the Qdrant directory and of history.db (restore moves both aside beside
    themselves; SQLite writes its journal beside history.db), ``mem0_dir`` (mem0ai 2.2.1 writes
    ``config.json`` and ``migrations_qdrant`` there), ``state_dir``, ``work_dir``,
    ``snapshot.directory``, the parent of ``daemon.textfile_path`` (written atomically
    through a temporary file beside it) and ``[protect] directory`` (the replica Litestream,
    run by the daemon, writes).
    """
    wanted = {
        config.qdrant_path.parent,
        config.history_db_path.parent,
        config.mem0_dir,
        config.state_dir,
        config.work_dir,
    }
    if config.snapshot.directory is not None:
        wanted.add(config.snapshot.directory)
    if config.daemon.textfile_path is not None:
        wanted.add(config.daemon.textfile_path.parent)
    if config.protect is not None and config.protect.directory is not None:
        wanted.add(config.protect.directory)  # Litestream, run by the daemon, writes the replica
    return sorted(
        path
        for path in wanted
        if not any(path != other and path.is_relative_to(other) for other in wanted)
    )


def flatten(document: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted.key, value)`` pairs of a nested document, tables first-come. Pure."""
    pairs: list[tuple[str, Any]] = []
    for key, value in document.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and not _is_reference(value):
            pairs += flatten(value, dotted + ".")
        else:
            pairs.append((dotted, value))
    return pairs


def format_duration(span: timedelta) -> str:
    """``span`` in the largest unit that divides it (``"15m"``, ``"1d"``, ``"90s"``). Pure."""
    seconds = int(span.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _model(model: BaseModel, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        if name in skip:
            continue
        value = getattr(model, name)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("secret") and isinstance(value, list):
            found[name] = [REDACTED] * len(value)  # how many, never which
        elif extra.get("secret") and value is not None:
            found[name] = REDACTED
        elif isinstance(value, BaseModel):
            found[name] = _model(value)
        else:
            found[name] = _plain(value)
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, str):
        return scrub_url(value)
    if isinstance(value, Path):
        return scrub_url(str(value))
    if isinstance(value, date):  # the mem0 dict holds ISO text already; kept for safety
        return value.isoformat()
    if isinstance(value, time):
        return value.strftime("%H:%M")
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _redact_mem0(value: Any, name: str = "") -> Any:
    if isinstance(value, Secret):
        return {"env": value.env} if value.env is not None else {"file": value.file}
    if value is not None and is_secret_name(name, value):
        return REDACTED
    if isinstance(value, Mapping):
        return {key: _redact_mem0(item, str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_mem0(item, name) for item in value]
    return _plain(value)


def _merge(given: Any, declared: Mapping[str, Any]) -> Any:
    """``given`` (mem0's dict as written) with memsync's declared keys and defaults over it."""
    merged = dict(given) if isinstance(given, Mapping) else {}
    for key, value in declared.items():
        if isinstance(value, Mapping):
            merged[key] = _merge(merged.get(key), value)
        elif value is not None:
            merged[key] = value
    return merged


def _is_reference(value: Mapping[str, Any]) -> bool:
    return set(value) in ({"env"}, {"file"})
