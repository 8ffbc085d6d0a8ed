"""The app environments of the compatibility tier: one virtual environment per mem0ai version.

Each holds one mem0ai release with a qdrant-client of its time (what pip gave users then), and
the offline providers (``memsync_app_providers``, a copy of ``memsync/demo/providers.py`` on a
``.pth`` path), never memsync. Built under ``build/apps/mem0ai-<version>/`` by
``python -m tests.helpers.app_envs`` (``make app-envs``, run by ``make test``), and rebuilt only
when its pins change (the stamp holds them). First run: about 16 s per environment from a warm
pip cache, two at a time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "build" / "apps"
PROVIDERS = ROOT / "memsync" / "demo" / "providers.py"
PLUGIN = "memsync_app_providers"

# The distribution's own Python, as many apps run: reachable by every user (the tests that run
# the writer as the store's owner need that; pyenv's Python lives under /root).
SYSTEM_PYTHON = "/usr/bin/python3.11"
# Which app environment is built on SYSTEM_PYTHON when it exists (the others: memsync's base).
ON_SYSTEM_PYTHON = "2.2.1"

# mem0ai release -> the qdrant-client pip installed beside it in its time (FIELD_NOTES, measured).
# Each also gets psycopg 3 with its pool, which every one of these mem0ai releases' pgvector
# provider prefers (tests/pg/test_app_versions_pgvector.py).
PGVECTOR = ("psycopg[binary]==3.3.9", "psycopg-pool==3.3.3")
APP_ENVS: dict[str, tuple[str, ...]] = {
    "0.1.118": ("mem0ai==0.1.118", "qdrant-client==1.15.1", *PGVECTOR),
    "1.0.11": ("mem0ai==1.0.11", "qdrant-client==1.16.1", *PGVECTOR),
    "2.0.0": ("mem0ai==2.0.0", "qdrant-client==1.17.1", *PGVECTOR),
    "2.1.0": ("mem0ai==2.1.0", "qdrant-client==1.19.1", *PGVECTOR),
    "2.2.1": ("mem0ai==2.2.1", "qdrant-client==1.19.1", *PGVECTOR),
}


def env_dir(version: str) -> Path:
    """Where the app environment of mem0ai ``version`` lives."""
    return APPS / f"mem0ai-{version}"


def python_of(version: str) -> Path:
    """The interpreter of the app environment of mem0ai ``version``."""
    return env_dir(version) / "bin" / "python"


def base_python(version: str) -> str:
    """The interpreter the environment of mem0ai ``version`` is made from."""
    if version == ON_SYSTEM_PYTHON and Path(SYSTEM_PYTHON).exists():
        return SYSTEM_PYTHON
    return str(getattr(sys, "_base_executable", sys.executable))


def _stamp(version: str) -> str:
    return json.dumps({"pins": list(APP_ENVS[version]), "python": base_python(version)})


def ready(version: str) -> bool:
    """Whether the environment exists with its current pins and plugin."""
    stamp = env_dir(version) / ".memsync-app-env"
    return stamp.is_file() and stamp.read_text() == _stamp(version)


def build(version: str) -> str:
    """Build (or rebuild) one environment; returns a line saying what was done."""
    where = env_dir(version)
    if ready(version):
        _plugin(where)
        return f"mem0ai {version}: ready ({where})"
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run([base_python(version), "-m", "venv", str(where)], check=True)
    subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "-qq",
         "--disable-pip-version-check", *APP_ENVS[version]],
        check=True,
    )  # fmt: skip
    _plugin(where)
    (where / ".memsync-app-env").write_text(_stamp(version))
    return f"mem0ai {version}: built ({where})"


def _plugin(where: Path) -> None:
    """Put the offline providers beside the environment, on its path by a ``.pth`` file."""
    site = where / "app-site"
    site.mkdir(exist_ok=True)
    shutil.copyfile(PROVIDERS, site / f"{PLUGIN}.py")
    for purelib in where.glob("lib/python*/site-packages"):
        (purelib / "memsync-app-site.pth").write_text(str(site) + "\n")


def main() -> int:
    """Build every missing environment, two at a time; print one line each."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        for line in pool.map(build, APP_ENVS):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
