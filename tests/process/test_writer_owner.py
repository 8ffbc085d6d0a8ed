"""A root memsync never runs the app's code as root: the one-shot writer runs as the store's owner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from memsync.demo import deployment as build
from tests.helpers import app_envs

NOBODY = 65534
COMPAT_APP = Path(__file__).resolve().parents[1] / "helpers" / "compat_app.py"


def test_a_root_memsync_writes_as_the_stores_owner(cli):
    assert os.getuid() == 0, "this test needs root (it owns a deployment to uid 65534)"
    root = Path(f"/tmp/memsync-owner-{uuid.uuid4().hex[:8]}")  # reachable by uid 65534
    root.mkdir(mode=0o755)
    try:
        paths = build.Paths(root)
        app_python = app_envs.python_of(app_envs.ON_SYSTEM_PYTHON)  # reachable by uid 65534
        assert app_envs.ready(app_envs.ON_SYSTEM_PYTHON), "make app-envs builds it"
        config = build.write_memsync_config(paths, "memsync_hash", app_python=str(app_python))
        config.write_text(
            config.read_text().replace(
                'plugins = ["memsync.demo.providers"]', f'plugins = ["{app_envs.PLUGIN}"]'
            )
        )
        mem0_config = root / "mem0.json"  # the app builds its store with its own version
        mem0_config.write_text(json.dumps(build.mem0_config(paths, "memsync_hash", 384)))
        paths.mem0_dir.mkdir(parents=True, exist_ok=True)
        seeded = subprocess.run(
            [str(app_python), str(COMPAT_APP), "seed", "3"], capture_output=True, text=True,
            env={**os.environ, "COMPAT_MEM0_CONFIG": str(mem0_config),
                 "MEM0_DIR": str(paths.mem0_dir)},
            timeout=120, check=True,
        )  # fmt: skip
        ids = json.loads(seeded.stdout.strip().splitlines()[-1])[0]["ids"]
        for directory, _, files in os.walk(root):
            os.chown(directory, NOBODY, NOBODY)
            for name in files:
                os.chown(Path(directory) / name, NOBODY, NOBODY)

        result = cli(
            "forget", ids[0], "--yes", "--no-snapshot", "--json", "--log-level", "info",
            "--log-format", "json", config=config,
        )  # fmt: skip
        assert result.code == 0, result.err
        started = [
            json.loads(line)
            for line in result.err.splitlines()
            if line.startswith("{") and '"writer_started"' in line
        ]
        assert started and started[0]["uid"] == NOBODY
        assert cli("check", config=config).code == 0
        storage = next(paths.qdrant.glob("collection/*/storage.sqlite"))
        assert storage.stat().st_uid == NOBODY and paths.history_db.stat().st_uid == NOBODY
    finally:
        shutil.rmtree(root, ignore_errors=True)
