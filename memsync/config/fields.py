"""The value types of memsync's config keys: paths, durations, times of day, names, modes.

Pydantic ``BeforeValidator`` functions and the ``key`` declaration helper used by
``memsync.config.schema``. Problems are ``PydanticCustomError``s whose message names what is
wrong (the loader adds the dotted path).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from datetime import time, timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from memsync import notify

_DURATION = re.compile(r"(\d{1,12})(s|m|h|d)")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TIME_OF_DAY = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
_MODULE_NAME = re.compile(r"[A-Za-z_][\w.]*")
_COLLECTION_NAME = re.compile(r"(?!\.{1,2}$)[A-Za-z0-9_.-]{1,255}")
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_HTTP_URL = re.compile(r"^https?://")
_FILE_MODE = re.compile(r"0?[0-7]{3}")


def _problem(text: str) -> PydanticCustomError:
    return PydanticCustomError("memsync", text)


def parse_duration(text: str) -> timedelta:
    """Parse ``"15m"``-style durations (units s, m, h, d; at most a year). Pure.

    Raises:
        ValueError: not a positive duration with a unit, or longer than 366 days.
    """
    match = _DURATION.fullmatch(text)
    if not match or int(match.group(1)) <= 0:
        raise ValueError(
            f"expected a positive duration like '30s', '15m', '6h', '1d' (got {text!r})"
        )
    seconds = int(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if seconds > 366 * 86400:
        raise ValueError(f"a duration must be at most a year (got {text!r})")
    return timedelta(seconds=seconds)


def home_dir(environ: Mapping[str, str]) -> Path:
    """The home directory ``~`` stands for: ``$HOME``, else the user's. Reads only.

    Raises:
        ValueError: ``$HOME`` is unset and the user has no entry in the password database.
    """
    try:
        return Path(environ.get("HOME") or Path.home())
    except RuntimeError:
        raise ValueError("HOME is not set and the user has no home directory") from None


def absolute(value: str, base_dir: Path, home: Path) -> Path:
    """``value`` as an absolute path: ``~`` under ``home``, relative under ``base_dir``.

    ``~user/...`` reads the password database; otherwise pure.

    Raises:
        ValueError: ``~user`` names a user this system does not know.
    """
    path = Path(value)
    if value == "~" or value.startswith("~/"):
        path = home / value[2:]
    elif value.startswith("~"):
        try:
            path = path.expanduser()
        except RuntimeError:
            user = value[1:].split("/", 1)[0]
            raise ValueError(f"names an unknown user (~{user})") from None
    return path if path.is_absolute() else (base_dir / path).absolute()


def _config_path(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, Path):
        return value
    if not isinstance(value, str) or not value or "\x00" in value:
        raise _problem("must be a non-empty path string")
    context = info.context or {}
    if "base_dir" not in context:
        return Path(value)
    try:
        return absolute(value, context["base_dir"], context["home"])
    except ValueError as error:
        raise _problem(str(error)) from None


def _mem0_path(value: Any) -> Any:
    if isinstance(value, Path):
        return value
    if not isinstance(value, str) or not value or "\x00" in value:
        raise _problem("must be an absolute path string")
    if not Path(value).is_absolute():
        raise _problem(
            "must be absolute; mem0 resolves a relative path against the app's working "
            "directory, which memsync cannot know"
        )
    return Path(value)


def _time_of_day(value: Any) -> Any:
    match = _TIME_OF_DAY.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise _problem("must be a time 'HH:MM'")
    return time(int(match.group(1)), int(match.group(2)))


def _duration(value: Any) -> Any:
    try:
        return parse_duration(str(value))
    except ValueError as error:
        raise _problem(str(error).rsplit(" (got ", 1)[0]) from None  # describe() adds the value


def _matching(pattern: re.Pattern[str], text: str) -> Any:
    def check(value: Any) -> Any:
        if isinstance(value, str) and not pattern.fullmatch(value):
            raise _problem(text)
        return value

    return BeforeValidator(check)


def _time_zone(value: Any) -> Any:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise _problem("unknown time zone") from None
    return value


def _plugins(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        bad = [item for item in value if not _MODULE_NAME.fullmatch(item)]
        if bad:
            raise _problem(f"not importable module names: {bad}")
    return value


def _http_url(value: Any) -> Any:
    if isinstance(value, str) and not _HTTP_URL.match(value):
        raise _problem("must start with http:// or https://")
    return value


def _apprise_url(value: Any) -> Any:
    if isinstance(value, str):
        problem = notify.find_url_problem(value) if value else "must be a non-empty URL"
        if problem is not None:
            raise _problem(problem)
    return value


def _file_mode(value: Any) -> Any:
    if isinstance(value, str):
        if not _FILE_MODE.fullmatch(value):
            raise _problem("must be an octal file mode string like '0644'")
        if int(value, 8) & 0o002:
            raise _problem("must not let every user write the file (o+w)")
        if not int(value, 8) & 0o400:
            raise _problem("must let its owner read the file (u+r)")
    return value


def _none_is_empty(value: Any) -> Any:
    return {} if value is None else value  # a mem0 JSON file may say "config": null


ConfigPath = Annotated[Path, BeforeValidator(_config_path)]
Mem0Path = Annotated[Path, BeforeValidator(_mem0_path)]
TimeOfDay = Annotated[time, BeforeValidator(_time_of_day)]
Duration = Annotated[timedelta, BeforeValidator(_duration)]
HttpUrl = Annotated[str, BeforeValidator(_http_url)]
AppriseUrl = Annotated[str, BeforeValidator(_apprise_url)]
_OrEmpty = BeforeValidator(_none_is_empty)


def key(
    default: Any,
    description: str,
    *,
    toml: str | None = None,
    shown: str | None = None,
    secret: bool = False,
    **constraints: Any,
) -> Any:
    """Declare one key: its default, one-line description and constraints.

    Args:
        default: the value when the key is absent (``...`` for required).
        description: one line for the reference page and ``config show``.
        toml: the type as the reference shows it, when the annotation does not say it well.
        shown: the default as the reference shows it, when it is computed at load time.
        secret: ``config show`` prints a placeholder instead of the value.
        constraints: pydantic ``Field`` constraints (``ge``, ``gt``, ...).
    """
    extra: JsonDict = {name: value for name, value in (("toml", toml), ("shown", shown)) if value}
    if secret:
        extra["secret"] = True
    return Field(
        default,
        description=description,
        json_schema_extra=extra or None,
        repr=not secret,
        **constraints,
    )
