"""The configuration a daemon accepted, kept as one self-contained JSON document.

The daemon validates a TOML document, then keeps exactly that document (with the content of
``mem0_config_file`` inlined as ``[mem0]``) in its state directory; its jobs read that copy, so
a broken edit followed by SIGHUP never reaches them. No TOML text is ever rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date, time
from pathlib import Path
from typing import Any

from memsync.config import TOO_DEEP, Config, parse, read_document
from memsync.config.fields import absolute, home_dir
from memsync.config.mem0_file import read_mem0_file
from memsync.errors import ConfigError


def load_self_contained(path: Path, environ: Mapping[str, str]) -> tuple[dict[str, Any], Config]:
    """Read ``path``, inline its ``mem0_config_file``, validate; return the document and config.

    Reads the config file and the mem0 file. The document is what ``accept`` keeps.

    Raises:
        ConfigError: as ``memsync.config.load``.
    """
    document = read_document(path)
    try:
        document = inline_mem0_file(document, path.parent, home_dir(environ))
    except ValueError:
        pass  # no home directory: parse reports it
    try:
        return document, parse(document, source=str(path), base_dir=path.parent, environ=environ)
    except RecursionError:
        raise ConfigError(str(path), [TOO_DEEP]) from None


def inline_mem0_file(raw: Mapping[str, Any], base_dir: Path, home: Path) -> dict[str, Any]:
    """``raw`` with a readable ``mem0_config_file`` replaced by its mapping as ``mem0``.

    Reads that file. Left as it is when the file is absent, unreadable or not a mapping, or
    when ``[mem0]`` is given too, so that validation reports the problem. The mapping is kept
    as read (dates and all); ``jsonable`` makes it JSON.
    """
    document = dict(raw)
    named = document.get("mem0_config_file")
    if not isinstance(named, str) or not named or "\x00" in named or "mem0" in document:
        return document
    errors: list[str] = []
    try:
        mem0 = read_mem0_file(absolute(named, base_dir, home), errors)
    except ValueError:  # ~user of an unknown user
        return document
    if errors:
        return document
    del document["mem0_config_file"]
    document["mem0"] = mem0
    return document


def jsonable(value: Any) -> Any:
    """``value`` with TOML's dates and times as ISO text (anything else odd as text), for JSON. Pure."""
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if value is None or isinstance(value, str | int | float):
        return value
    return str(value)  # what YAML alone can hold (sets, bytes): mem0's dict never needs them


def read_accepted(path: Path, source: str) -> dict[str, Any]:
    """The accepted document at ``path``. Reads only.

    Raises:
        ConfigError: it is missing, unreadable or not a JSON object.
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(
            source, [f"the daemon's accepted copy {path} is unreadable: {error}"]
        ) from error
    if not isinstance(document, dict):
        raise ConfigError(source, [f"the daemon's accepted copy {path} is not a JSON object"])
    return document
