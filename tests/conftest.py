"""Shared fixtures: real mem0 deployments in temporary directories, and the CLI in process.

mem0 reads ``MEM0_DIR`` and ``MEM0_TELEMETRY`` when it is first imported, so both are set
here, before any test imports it.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog

# One temporary directory per xdist worker, for everything that uses tempfile in this process and
# in the processes it starts (TMPDIR): workers never see each other's scratch. (pytest's own
# tmp_path comes from the controller, under /tmp/pytest-of-<user>: socket paths stay short.)
if "PYTEST_XDIST_WORKER" in os.environ:
    _WORKER_TMP = tempfile.mkdtemp(prefix=f"msync-{os.environ['PYTEST_XDIST_WORKER']}-")
    os.chmod(_WORKER_TMP, 0o1777)  # as /tmp: tests that drop to nobody create files there
    os.environ["TMPDIR"] = tempfile.tempdir = _WORKER_TMP
    atexit.register(shutil.rmtree, _WORKER_TMP, ignore_errors=True)
_SESSION_MEM0_DIR = tempfile.mkdtemp(prefix="memsync-tests-mem0-")
atexit.register(shutil.rmtree, _SESSION_MEM0_DIR, ignore_errors=True)
os.environ["MEM0_DIR"] = _SESSION_MEM0_DIR
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ.pop("MEMSYNC_CONFIG", None)

from memsync.cli import main  # noqa: E402
from memsync.demo import deployment as build  # noqa: E402

HASH = "memsync_hash"
# check's in-flight margin in the deployments the fixtures build ([check] in_flight_margin_s):
# a write this old is settled, so a test waits this long, not the 2 s default, before its check
# calls a fresh disagreement an error. Tests that build their own config keep the default.
IN_FLIGHT_MARGIN_S = 0.5

pytest_plugins = ["tests.tiers", "pytester"]


@dataclass
class Deployment:
    """A real mem0 deployment under a temporary directory, with memsync's config beside it."""

    paths: build.Paths
    config: Path
    memory: Any
    seeded: build.Seeded | None

    def close(self) -> None:
        if self.memory is not None:
            build.close_memory(self.memory)
            self.memory = None

    def reopen(self) -> Any:
        self.close()
        self.memory = build.open_memory(self.paths, embedder=HASH)
        return self.memory


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A PostgreSQL 16 with pgvector for the session (``pgserver``), or ``$MEMSYNC_TEST_PG_URL``."""
    from memsync.demo import postgres

    directory = Path(tempfile.mkdtemp(prefix="msync-pg-"))  # short: the socket lives there
    url, server = postgres.start(directory / "data")
    yield url
    postgres.stop(server)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str, request: pytest.FixtureRequest) -> str:
    """A fresh database with the vector extension for this test; its conninfo."""
    import hashlib

    from memsync.demo import postgres

    name = "t_" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:20]
    return postgres.fresh_database(pg_server, name)


@pytest.fixture
def make_deployment(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Build deployments: ``make_deployment(count=40, name="dep")``; ``pg=True``: on pgvector."""
    made: list[Deployment] = []

    def factory(
        count: int = 40,
        name: str = "dep",
        extra_config: str = "",
        pg: bool = False,
        in_flight_margin_s: float | None = IN_FLIGHT_MARGIN_S,
    ) -> Deployment:
        pg_url = None
        if pg:
            import hashlib

            from memsync.demo import postgres

            server = request.getfixturevalue("pg_server")
            digest = hashlib.sha256(f"{request.node.nodeid}/{name}".encode()).hexdigest()[:20]
            pg_url = postgres.fresh_database(server, "d_" + digest)
        paths = build.Paths(tmp_path / name, pg_url=pg_url)
        config = build.write_memsync_config(
            paths, embedder=HASH, extra=extra_config, in_flight_margin_s=in_flight_margin_s
        )
        memory = build.open_memory(paths, embedder=HASH)
        seeded = build.seed(memory, count, batch=5) if count else None
        deployment = Deployment(paths=paths, config=config, memory=memory, seeded=seeded)
        made.append(deployment)
        return deployment

    yield factory
    for deployment in made:
        deployment.close()


@pytest.fixture
def deployment(make_deployment: Any) -> Deployment:
    """A seeded deployment of 40 memories (hash embedder), its Memory open."""
    return make_deployment()  # type: ignore[no-any-return]


@pytest.fixture
def pg_deployment(make_deployment: Any) -> Deployment:
    """A seeded deployment of 40 memories on pgvector (mem0's REST server layout), its Memory open."""
    return make_deployment(pg=True)  # type: ignore[no-any-return]


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """Run ``memsync`` in process: ``cli("check", "--json", config=path)``."""

    def run(*argv: str, config: Path | None = None) -> CliResult:
        capsys.readouterr()
        args = [*argv, "--config", str(config)] if config else list(argv)
        try:
            code = main(args)
        finally:
            # main() sent structlog and logging to this test's captured stderr, which pytest
            # closes after the test: in-process code of a later test would log into it
            structlog.reset_defaults()
            root = logging.getLogger()
            for handler in root.handlers[:]:  # basicConfig's, not pytest's own (subclasses)
                if type(handler) is logging.StreamHandler:
                    root.removeHandler(handler)
        captured = capsys.readouterr()
        return CliResult(code=code, out=captured.out, err=captured.err)

    return run


def error_findings(report: dict[str, Any]) -> dict[str, set[str]]:
    """``{code: {memory_id or collection}}`` of a check report's error findings."""
    found: dict[str, set[str]] = {}
    for finding in report["findings"]:
        if finding["severity"] == "error":
            found.setdefault(finding["code"], set()).add(
                finding["memory_id"] or finding["collection"]
            )
    return found


def findings_of(report: dict[str, Any], severity: str) -> dict[str, set[str | None]]:
    """``{code: {memory_id}}`` of a check report's findings of one severity."""
    found: dict[str, set[str | None]] = {}
    for finding in report["findings"]:
        if finding["severity"] == severity:
            found.setdefault(finding["code"], set()).add(finding["memory_id"])
    return found


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 protocol server (moto's) on 127.0.0.1, for the whole session."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "memsync-test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "memsync-test-secret")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """boto3 finds no credentials: none in the environment, no shared files, no instance role."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def bucket(s3_endpoint: str, request: pytest.FixtureRequest) -> str:
    """A fresh bucket on the session's S3 server."""
    import re
    import uuid

    import boto3

    name = (
        re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
        + "-"
        + uuid.uuid4().hex[:8]
    )
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=name)
    return name


def s3_section(endpoint: str, bucket_name: str, prefix: str = "memsync/test") -> str:
    """The ``[s3]`` TOML section for a test bucket."""
    return f'\n[s3]\nbucket = "{bucket_name}"\nprefix = "{prefix}"\nregion = "us-east-1"\nendpoint_url = "{endpoint}"\n'
