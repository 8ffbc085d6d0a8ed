"""``mem0_config_file``: the mem0 dict kept in a JSON or YAML file instead of ``[mem0]``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_mem0_file(path: Path, errors: list[str]) -> dict[str, Any]:
    """Return the mapping in ``path`` (YAML by a .yaml/.yml suffix, else JSON). Reads only.

    A problem is appended to ``errors`` (as ``mem0_config_file: ...``) and ``{}`` returned.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        errors.append(f"mem0_config_file: cannot read {path}: {error.strerror}")
        return {}
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as error:  # noqa: BLE001 - json's ValueError and yaml's own hierarchy
        errors.append(f"mem0_config_file: {path} is not valid: {error}")
        return {}
    if not isinstance(data, dict):
        errors.append(f"mem0_config_file: {path} must hold a mapping")
        return {}
    return data
