"""The configuration of a copy of the stores in a directory of its own (``restore --to DIR``).

``scratch_layout`` says where the copy's files go; ``scratch_documents`` gives the memsync
config text and the mem0 dict pointing there. The copy's config has the live one's mem0
settings (embedder, collection, plugins) with secrets kept as ``{env}``/``{file}``
references, and nothing that reaches the live deployment: no snapshot directory, no bucket,
no app to stop or start, no daemon settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsync.config import Config, Secret

CONFIG_NAME = "memsync.toml"
MEM0_CONFIG_NAME = "mem0-config.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScratchLayout:
    """Where the copy's files are, under ``root`` (the layout of the demo deployments)."""

    root: Path

    @property
    def vectors(self) -> Path:
        """The embedded Qdrant directory (``<root>/qdrant``)."""
        return self.root / "qdrant"

    @property
    def mem0_dir(self) -> Path:
        """MEM0_DIR of the copy (``<root>/mem0``)."""
        return self.root / "mem0"

    @property
    def history_db(self) -> Path:
        """history.db of the copy (``<root>/mem0/history.db``)."""
        return self.mem0_dir / "history.db"

    @property
    def state_dir(self) -> Path:
        """The state directory of memsync commands run on the copy."""
        return self.root / "memsync-state"

    @property
    def config(self) -> Path:
        """The memsync config file of the copy."""
        return self.root / CONFIG_NAME

    @property
    def mem0_config(self) -> Path:
        """The mem0 dict of the copy (JSON), what an app would pass to ``Memory.from_config``."""
        return self.root / MEM0_CONFIG_NAME


def _references(value: Any) -> Any:
    """``value`` with ``Secret`` objects written back as ``{"env": ...}``/``{"file": ...}``. Pure."""
    if isinstance(value, Secret):
        return {"env": value.env} if value.env is not None else {"file": value.file}
    if isinstance(value, Mapping):
        return {str(key): _references(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_references(item) for item in value]
    return value


def scratch_documents(
    config: Config, layout: ScratchLayout, snapshot_id: str
) -> tuple[str, dict[str, Any]]:
    """The copy's memsync config (TOML text) and mem0 dict, both pointing into ``layout``. Pure.

    The mem0 dict is the live one with ``vector_store.config.path`` and ``history_db_path``
    replaced; secrets stay references (never resolved, never written out).
    """
    mem0 = _references(config.mem0)
    vector_store = dict(mem0.get("vector_store") or {})
    store_config = dict(vector_store.get("config") or {})
    store_config["path"] = str(layout.vectors)
    store_config.setdefault("collection_name", config.collection)
    vector_store["config"] = store_config
    vector_store.setdefault("provider", "qdrant")
    mem0["vector_store"] = vector_store
    mem0["history_db_path"] = str(layout.history_db)
    quoted = json.dumps  # a JSON string is a valid TOML basic string
    lines = [
        f"# memsync config of a copy of snapshot {snapshot_id} (memsync restore --to), for",
        "# inspection. It names no snapshot directory, bucket, app or daemon settings: nothing",
        "# run with it reaches the live deployment.",
        f"mem0_dir = {quoted(str(layout.mem0_dir))}",
        f"state_dir = {quoted(str(layout.state_dir))}",
        f"plugins = [{', '.join(quoted(p) for p in config.plugins)}]",
        f"mem0_config_file = {quoted(str(layout.mem0_config))}",
        "",
    ]
    return "\n".join(lines), mem0
