"""A deployment whose app reads its mem0 config from a file, and memsync run as a process.

The app is ``tests/helpers/window_app.py`` (``memsync.demo.app --mem0-config FILE``): a real
process holding one mem0 ``Memory`` built from the file, stopped and started by memsync's
``[app] stop_command``/``start_command``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsync import config as memsync_config
from memsync.demo import deployment as build
from memsync.stores.backends import vector_store_for
from tests.helpers import window_app

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class FileApp:
    """The deployment's paths, memsync's config and the app's mem0 config file."""

    paths: build.Paths
    config: Path
    app_file: Path


def file_deployment(make_deployment: Any, *, window: bool = True, suffix: str = ".json") -> FileApp:
    """A seeded deployment (hash embedder, 30 memories) whose mem0 dict is in a file.

    memsync's config names the file (``mem0_config_file``), a snapshot directory and, with
    ``window``, the window app's commands. The seeding Memory is closed: nothing holds the store.
    """
    source = make_deployment(count=30)
    source.close()
    paths = source.paths
    app_file = paths.root / f"app-mem0{suffix}"
    settings = build.mem0_config(paths, "memsync_hash", 384)
    if suffix == ".json":
        app_file.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    else:
        import yaml

        app_file.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    app_file.chmod(0o640)
    text = f"""mem0_dir = "{paths.mem0_dir}"
state_dir = "{paths.state}"
plugins = ["memsync.demo.providers"]
mem0_config_file = "{app_file}"
app_python = "{sys.executable}"

[snapshot]
directory = "{paths.root / "snapshots"}"
keep_last = 3
"""
    if window:
        text += window_app.commands(paths.root, app_file)
    paths.config.write_text(text, encoding="utf-8")
    return FileApp(paths=paths, config=paths.config, app_file=app_file)


def start_app(app: FileApp) -> int:
    """Start the window app on the app's mem0 config file; its pid."""
    assert window_app.start(app.paths.root, ["--mem0-config", str(app.app_file)]) == 0
    pid = window_app.pid_of(app.paths.root)
    assert pid is not None
    return pid


def memsync(
    *argv: str | Path, config: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m memsync ARGV --config CONFIG`` from the repository (its tests' plugins)."""
    return subprocess.run(
        [sys.executable, "-m", "memsync", *map(str, argv), "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )  # fmt: skip


def holder_pid(config: Path) -> int | None:
    """The pid holding the store ``config`` names (from /proc/locks), or None."""
    holder = vector_store_for(memsync_config.load(config, os.environ)).holder()
    return holder.pid if holder else None


def app_stats(root: Path) -> dict[str, Any]:
    """The stats the window app printed when it stopped (its last JSON line in ``app.log``)."""
    lines = (root / "app.log").read_text(encoding="utf-8").splitlines()
    return json.loads([line for line in lines if line.startswith("{")][-1])  # type: ignore[no-any-return]


def journal(paths: build.Paths) -> dict[str, Any]:
    """The migration journal."""
    return json.loads((paths.state / "migrate.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]
