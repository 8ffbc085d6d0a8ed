"""The embedder a snapshot's vectors were made by: recorded in its manifest, checked at restore.

After ``memsync migrate`` changed the embedder, the snapshots taken before the switch hold
vectors of the old embedder: restored under the new config, search would compare vectors of
two models (or of two sizes). A manifest records ``embedder: {"provider", "dims", "model"}``
(docs/reference/snapshot-manifest.md); manifests without it (older memsync) are judged by
their collections' vector size only, as before.
"""

from __future__ import annotations

from typing import Any

from memsync.config import Config
from memsync.stores.backends import backend_of_mode
from memsync.stores.manifest import Manifest

DEFAULT_PROVIDER = "openai"  # mem0ai 2.2.1's default embedder


def embedder_of(config: Config) -> dict[str, Any]:
    """``{"provider", "dims", "model"}`` of the config's embedder. Pure.

    ``provider``: ``[mem0.embedder] provider`` (mem0's default ``openai`` when absent);
    ``dims``: the vector size (``embedding_model_dims``); ``model``: ``[mem0.embedder.config]
    model`` when it is a plain string, else None (never a secret: a reference is left out).
    """
    embedder = config.mem0.get("embedder") or {}
    settings = embedder.get("config") or {}
    model = settings.get("model") if isinstance(settings, dict) else None
    return {
        "provider": str(embedder.get("provider") or DEFAULT_PROVIDER),
        "dims": config.expected_dims[0][1],
        "model": model if isinstance(model, str) else None,
    }


def find_mismatch(manifest: Manifest, config: Config) -> str | None:
    """How the snapshot's recorded embedder differs from the config's, or None. Pure.

    None when the manifest records no embedder (older snapshots), or when provider, dims and
    (both given) model agree. The answer names both sides, e.g. ``embedder memsync_minilm
    (384 dims) in the snapshot, memsync_hash256 (256 dims) in the config``.
    """
    recorded = manifest.embedder
    if recorded is None:
        return None
    current = embedder_of(config)
    models = (recorded.get("model"), current["model"])
    same = (
        recorded.get("provider") == current["provider"]
        and recorded.get("dims") == current["dims"]
        and (None in models or models[0] == models[1])
    )
    if same:
        return None
    return f"embedder {_describe(recorded)} in the snapshot, {_describe(current)} in the config"


def _describe(embedder: dict[str, Any]) -> str:
    model = f" model {embedder['model']}" if embedder.get("model") else ""
    return f"{embedder.get('provider')}{model} ({embedder.get('dims')} dims)"


def hint(config: Config) -> str:
    """What to do with a snapshot of another embedder. Pure."""
    return (
        "the snapshot was taken before memsync migrate changed the embedder: copy it with the "
        "old config into a new directory (memsync --config OLD.toml restore ID --to DIR; "
        "OLD.toml: memsync.toml.bak, or your config with mem0_config_file naming the app's "
        ".bak), or choose a snapshot taken after the switch (memsync snapshot list)"
    )


def restorable_here(manifest: Manifest | None, config: Config, mode: str) -> bool:
    """Whether a snapshot with this manifest can be restored to this deployment. Pure.

    False for an incomplete snapshot (no manifest), one of the other backend (``mode``: the
    deployment's manifest mode), or one whose vectors another embedder made (taken before a
    migration changed it): ``restore latest`` never chooses those, so they are not backups of
    this deployment.
    """
    return (
        manifest is not None
        and backend_of_mode(manifest.mode).mode == mode
        and find_mismatch(manifest, config) is None
    )
