"""mem0's dict as memsync keeps it: JSON-like values, and ``Secret`` references in place.

mem0 takes a JSON-like dict (mem0ai 2.2.1 ``MemoryConfig``; its own ``config.json`` is JSON),
so the values memsync keeps are strings, finite numbers, booleans, null, tables with string
keys and lists, at most ``MAX_DEPTH`` levels deep. TOML (and YAML) dates and times become
their ISO text; anything else is a problem with its dotted path. ``{env = "NAME"}`` and
``{file = "PATH"}`` tables become ``Secret`` references, resolved only by ``resolve_secrets``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, time
from pathlib import Path
from typing import Any

from memsync.config.files import read_text
from memsync.errors import ConfigError

MAX_DEPTH = 32  # mem0ai 2.2.1's deepest key (llm.config.azure_kwargs.default_headers.X) is 5


@dataclass(frozen=True, slots=True, kw_only=True)
class Secret:
    """A reference to a secret value: an environment variable or a file (never inline).

    Attributes:
        env: the environment variable holding the value.
        file: the file holding the value (stripped of surrounding whitespace).
        key: the dotted path of the key it stands for, for messages.
        source: the configuration file it was written in, for messages.
    """

    env: str | None = None
    file: str | None = None
    key: str = field(default="", compare=False)
    source: str = field(default="", compare=False)


def with_secrets(value: Any, dotted: str, source: str, errors: list[str], depth: int = 0) -> Any:
    """``value`` made JSON-like, with ``Secret`` references; problems appended to ``errors``. Pure.

    Each problem is ``dotted.path: what is wrong``; a refused value is returned as ``None``.
    """
    if depth > MAX_DEPTH:
        errors.append(f"{dotted}: nested too deeply (more than {MAX_DEPTH} levels)")
        return None
    if isinstance(value, Mapping):
        keys = set(value)
        if keys and keys <= {"env", "file"}:
            if len(keys) != 1 or not all(isinstance(v, str) and v for v in value.values()):
                errors.append(f'{dotted}: a secret is {{env = "NAME"}} or {{file = "PATH"}}')
                return Secret(key=dotted, source=source)
            return Secret(env=value.get("env"), file=value.get("file"), key=dotted, source=source)
        found: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(f"{dotted}: keys must be strings (got {key!r})")
                continue
            found[key] = with_secrets(item, f"{dotted}.{key}", source, errors, depth + 1)
        return found
    if isinstance(value, list):
        return [
            with_secrets(item, f"{dotted}[{i}]", source, errors, depth + 1)
            for i, item in enumerate(value)
        ]
    return _scalar(value, dotted, errors)


def _scalar(value: Any, dotted: str, errors: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        errors.append(f"{dotted}: must be a finite number (got {value!r})")
        return None
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, date | time):  # datetime is a date
        return value.isoformat()
    errors.append(
        f"{dotted}: must be a string, number, boolean, table or list (got {type(value).__name__})"
    )
    return None


def resolve_secrets(value: Any, environ: Mapping[str, str]) -> Any:
    """Return ``value`` with every ``Secret`` replaced by its value. Reads secret files.

    Raises:
        ConfigError: an environment variable is unset or a secret file is unreadable, too
            large or not UTF-8; every such key is listed by its dotted path, never its value.
    """
    problems: list[str] = []
    sources: list[str] = []
    resolved = _resolve(value, environ, problems, sources)
    if problems:
        raise ConfigError(next((s for s in sources if s), "secrets"), problems)
    return resolved


def _resolve(
    value: Any, environ: Mapping[str, str], problems: list[str], sources: list[str]
) -> Any:
    if isinstance(value, Secret):
        try:
            return _secret_value(value, environ)
        except ValueError as error:
            problems.append(f"{value.key or 'secret'}: {error}")
            sources.append(value.source)
            return None
    if isinstance(value, Mapping):
        return {key: _resolve(item, environ, problems, sources) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolve(item, environ, problems, sources) for item in value]
    return value


def _secret_value(secret: Secret, environ: Mapping[str, str]) -> str:
    if secret.env is not None:
        if secret.env not in environ:
            raise ValueError(f"environment variable {secret.env} is not set")
        return environ[secret.env]
    if secret.file is None:
        raise ValueError('a secret is {env = "NAME"} or {file = "PATH"}')
    try:
        return read_text(Path(secret.file)).strip()
    except OSError as error:
        raise ValueError(
            f"secret file {secret.file} is unreadable: {error.strerror or error}"
        ) from None
    except ValueError as error:
        raise ValueError(f"secret file {error}") from None
