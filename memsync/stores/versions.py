"""Installed package versions, read from metadata (never by importing the package)."""

from __future__ import annotations

import importlib.metadata

TRACKED = ("mem0ai", "qdrant-client")


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None. Reads only."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def tracked_versions() -> dict[str, str | None]:
    """mem0ai's and qdrant-client's installed versions, by distribution name."""
    return {name: installed_version(name) for name in TRACKED}
