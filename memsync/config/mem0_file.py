"""``mem0_config_file``: the mem0 dict kept in a JSON or YAML file instead of ``[mem0]``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memsync.config.files import read_text


def read_mem0_file(path: Path, errors: list[str]) -> dict[str, Any]:
    """Return the mapping in ``path`` (YAML when ``is_yaml``, else JSON). Reads only.

    YAML aliases (``*name``) are refused: mem0's dict never needs them, and they let a small
    file expand exponentially. A problem is appended to ``errors`` (as
    ``mem0_config_file: ...``) and ``{}`` returned.
    """
    try:
        text = read_text(path)
    except OSError as error:
        errors.append(f"mem0_config_file: cannot read {path}: {error.strerror}")
        return {}
    except ValueError as error:
        errors.append(f"mem0_config_file: {error}")
        return {}
    try:
        data = _load_yaml(text) if is_yaml(path) else json.loads(text)
    except Exception as error:  # noqa: BLE001 - json's ValueError and yaml's own hierarchy
        errors.append(f"mem0_config_file: {path} is not valid: {error}")
        return {}
    if not isinstance(data, dict):
        errors.append(f"mem0_config_file: {path} must hold a mapping")
        return {}
    return data


def is_yaml(path: Path) -> bool:
    """Whether ``path`` is YAML: a ``.yaml``/``.yml`` suffix, also before ``.bak``. Pure.

    ``migrate --switch`` keeps the app's old config as ``<file>.bak``; the how-tos point
    ``mem0_config_file`` at it to reach the old store.
    """
    return Path(path.name.removesuffix(".bak")).suffix in (".yaml", ".yml")


def _load_yaml(text: str) -> Any:
    """``yaml.safe_load`` without aliases (PyYAML 6)."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
                raise ValueError(f"line {line}: YAML aliases (*name) are not supported")
            return super().compose_node(parent, index)

    loader = NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
