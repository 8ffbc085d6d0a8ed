"""The compatibility tier's app: a deployment built and read by one mem0ai version's own app.

Used by tests/compat (embedded Qdrant) and tests/pg (pgvector). The app runs in its own
environment (``app_envs``) as ``compat_app.py``; memsync's config for the same deployment is
written beside it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from memsync.demo import deployment as build
from tests.helpers import app_envs

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "tests" / "helpers" / "compat_app.py"
VERSIONS = list(app_envs.APP_ENVS)


def ensure_built() -> None:
    """Every app environment, built once (``make test`` builds them before pytest starts)."""
    lock = app_envs.APPS / ".build.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # xdist workers: one builds, the others wait
        for version in VERSIONS:
            if not app_envs.ready(version):
                app_envs.build(version)


class App:
    """One deployment of the app on one mem0ai version, and memsync's config for it."""

    def __init__(
        self, root: Path, version: str, app_python: bool = True, pg_url: str | None = None
    ) -> None:
        self.root = root
        self.pg_url = pg_url
        self.version = version
        self.python = app_envs.python_of(version)
        self.qdrant = root / "qdrant"
        self.history = root / "history.db"
        self.state = root / "state"
        self.mem0_dir = root / "mem0"
        self.mem0_dir.mkdir(parents=True)
        self.mem0_config = root / "mem0.json"
        self.write_mem0_config(self.mem0_config, self.qdrant)
        self.config = root / "memsync.toml"
        app = f'[app]\npython = "{self.python}"\n' if app_python else ""
        self.config.write_text(
            f'mem0_dir = "{self.mem0_dir}"\nstate_dir = "{self.state}"\n'
            f'plugins = ["{app_envs.PLUGIN}"]\n\n'
            f"{self.mem0_toml(self.qdrant)}\n"
            f'[snapshot]\ndirectory = "{root / "snapshots"}"\nkeep_last = 5\n\n'
            f"[check]\nin_flight_margin_s = 0.5\n\n{app}",
            encoding="utf-8",
        )

    def mem0_dict(self, qdrant: Path) -> dict[str, Any]:
        store: dict[str, Any] = {
            "provider": "pgvector",
            "config": {
                "connection_string": self.pg_url, "collection_name": "mem0",
                "embedding_model_dims": 384,
            },
        }  # fmt: skip
        return {
            "vector_store": store
            if self.pg_url
            else {
                "provider": "qdrant",
                "config": {
                    "path": str(qdrant),
                    "collection_name": "mem0",
                    "embedding_model_dims": 384,
                    "on_disk": True,
                },
            },  # fmt: skip
            "embedder": {"provider": "memsync_hash"},
            "llm": {"provider": "memsync_echo"},
            "history_db_path": str(self.history),
        }

    def write_mem0_config(self, path: Path, qdrant: Path) -> None:
        path.write_text(json.dumps(self.mem0_dict(qdrant)), encoding="utf-8")

    def mem0_toml(self, qdrant: Path) -> str:
        store = build.vector_store_toml(self.root, qdrant, self.pg_url, 384)
        return (
            f'[mem0]\nhistory_db_path = "{self.history}"\n\n{store}\n\n'
            '[mem0.embedder]\nprovider = "memsync_hash"\n\n[mem0.llm]\nprovider = "memsync_echo"\n'
        )

    def environ(self, mem0_config: Path | None = None) -> dict[str, str]:
        environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        environ.update(
            MEM0_DIR=str(self.mem0_dir), MEM0_TELEMETRY="False",
            COMPAT_MEM0_CONFIG=str(mem0_config or self.mem0_config),
        )  # fmt: skip
        return environ

    def run(self, *commands: tuple[str, ...], mem0_config: Path | None = None) -> list[Any]:
        """Run the app's own version once, each command on one open Memory; their results.

        Fails the test if the app fails (it cannot start, or a command raises).
        """
        argv = [word for command in commands for word in ("--", *command)][1:]
        done = subprocess.run(
            [str(self.python), str(APP), *argv], env=self.environ(mem0_config),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (
            f"mem0ai {self.version}: the app failed at {argv}: {done.stderr[-2000:]}"
        )
        return list(json.loads(done.stdout.strip().splitlines()[-1]))

    def read(
        self, *then: tuple[str, ...], mem0_config: Path | None = None, search: bool = True
    ) -> dict[str, dict[str, Any]]:
        """Every memory the app's own version reads, each also found by its search.

        ``then``: commands the same app run makes after reading (the next damage).
        ``search`` False: the app's search is not asked to find them (a version whose search
        cannot, before memsync touches anything).
        """
        found = self.run(("read",), *then, mem0_config=mem0_config)[0]
        missed = [i for i, hit in found["found_by_search"].items() if not hit]
        assert not (search and missed), f"mem0ai {self.version}: search misses {missed}"
        return dict(found["memories"])


def files_of(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (the deployment's bytes)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def assert_reads(
    app: App,
    expected: dict[str, dict[str, Any]],
    gone: set[str],
    *then: tuple[str, ...],
    search: bool = True,
) -> None:
    """The app reads every expected memory but ``gone``, text and metadata intact; then ``then``."""
    memories = app.read(*then, search=search)
    assert set(memories) == set(expected) - gone, f"mem0ai {app.version}"
    for memory_id, memory in memories.items():
        assert memory["memory"] == expected[memory_id]["memory"], memory_id
        assert (memory.get("metadata") or {}).get("topic") == (
            expected[memory_id].get("metadata") or {}
        ).get("topic"), f"mem0ai {app.version}: {memory_id} lost its metadata"
