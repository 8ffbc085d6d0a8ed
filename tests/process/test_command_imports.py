"""A command imports what it needs and no more (issue 26, start-up): asserted on sys.modules.

Each probe runs memsync's ``main`` in a fresh interpreter and reports the modules loaded when
the command has finished: behaviour, not timing (the times are bench/bench_startup.py's).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Libraries and memsync packages a read-only command on an embedded store, with no [s3], needs
# none of: boto3/botocore only for an S3 repository, psycopg only on pgvector, the agent's
# modules only to reach the app, doctor's probes only for doctor, and the pydantic models of
# the pending queue and the manifest only where those are read.
NOT_FOR_CHECK = (
    "boto3",
    "botocore",
    "s3transfer",
    "psycopg",
    "cryptography",
    "apprise",
    "memsync.s3",
    "memsync.doctor",
    "memsync.agent",
    "memsync.routes",
    "memsync.stores.manifest_schema",
)


def loaded_after(*argv: str, tmp_path: Path) -> tuple[int, set[str]]:
    """Run ``memsync *argv`` in a fresh interpreter; its exit status and every module loaded."""
    out = tmp_path / "modules.json"
    probe = (
        "import json, sys; from memsync.cli import main; code = main(sys.argv[2:]); "
        "open(sys.argv[1], 'w').write(json.dumps([code, sorted(sys.modules)]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(out), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.exists(), result.stderr
    code, modules = json.loads(out.read_text())
    return code, set(modules)


def test_check_on_an_embedded_store_loads_no_s3_pgvector_agent_or_doctor_module(
    deployment, tmp_path
):
    deployment.close()
    code, modules = loaded_after(
        "check", "--json", "--config", str(deployment.config), tmp_path=tmp_path
    )
    assert code == 0
    assert "memsync.check" in modules and "memsync.stores.qdrant_embedded" in modules
    assert unneeded(modules, NOT_FOR_CHECK) == []


def unneeded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The ``modules`` that are one of ``packages`` or inside one."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


# and cryptography only where a snapshot is encrypted
S3_LIBRARIES = ("boto3", "botocore", "s3transfer", "memsync.s3.store", "memsync.s3.bucket")
UNENCRYPTED = (*S3_LIBRARIES, "cryptography")


def test_snapshot_create_and_doctor_without_s3_or_encryption_load_neither(deployment, tmp_path):
    deployment.close()
    config = str(deployment.config)
    code, modules = loaded_after(
        "snapshot", "create", "--json", "--config", config, tmp_path=tmp_path
    )
    assert code == 0 and "memsync.snapshot.create" in modules
    assert unneeded(modules, UNENCRYPTED) == []
    code, modules = loaded_after("doctor", "--json", "--config", config, tmp_path=tmp_path)
    assert code in (0, 3) and "memsync.doctor.s3" in modules
    assert unneeded(modules, UNENCRYPTED) == []


# An embedded restore (its fast path: the snapshot create verified, hashed while it is staged)
# needs none of the server restore's modules (restore.pgvector and the routes it reaches), no
# backend package but its own, and no S3 or sealing library. (The agent's client comes with
# memsync.snapshot, whose choice and verification restore uses.)
NOT_FOR_EMBEDDED_RESTORE = (
    *UNENCRYPTED,
    "psycopg",
    "memsync.stores.pgvector",
    "memsync.restore.pgvector",
    "memsync.restore.pg_agent",
    "memsync.routes",
    "memsync.doctor",
)


def test_an_embedded_restore_loads_no_pgvector_route_or_agent_module(deployment, cli, tmp_path):
    deployment.close()
    created = cli("snapshot", "create", "--json", config=deployment.config)
    assert created.code == 0
    code, modules = loaded_after(
        "restore",
        created.json()["id"],
        "--force",
        "--json",
        "--config",
        str(deployment.config),
        tmp_path=tmp_path,
    )
    assert code == 0 and "memsync.restore" in modules
    assert unneeded(modules, NOT_FOR_EMBEDDED_RESTORE) == []


def test_the_process_command_freezes_what_its_imports_built_and_a_caller_s_does_not():
    """Later collections, and the last one at exit, skip the modules and models (gc.freeze)."""
    probe = (
        "import gc, sys; from memsync.cli import main; main(['--help']); "
        "given = gc.get_freeze_count(); sys.argv = ['memsync', '--help']; main(); "
        "print(given, gc.get_freeze_count())"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    given, own = map(int, result.stdout.split()[-2:])
    assert given == 0  # main(argv): the caller's objects stay collectable
    assert own > 10_000  # main() reading sys.argv: the parser's and memsync's modules, at least
