"""The deployment's mem0, reached only through the app's own interpreter (the one-shot writer).

memsync never writes a deployment with another mem0ai or qdrant-client than the app's: a
library of another version that opens the store may rewrite its files in a format the app
cannot read. When no agent serves the running app (the direct and window routes, and a
migration's target), ``open_memory`` starts ``memsync.agent.writer`` with the app's
interpreter (``memsync.stores.interpreter``) from a copy of the standard-library-only
``memsync.agent`` package, sends it the deployment's mem0 dict (secrets resolved here, passed on
its standard input, never on a command line) and yields a ``Writer`` that asks it for each
write: the same operations the agent runs inside the app. memsync's own process never imports
mem0. Only commands that write come here; check, doctor and snapshots never do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import structlog

from memsync import agent as agent_package
from memsync.config import Config, resolve_secrets
from memsync.errors import ConfigError, LockedError, UnavailableError
from memsync.stores import interpreter
from memsync.stores.agent_client import AgentClient, AgentWriter
from memsync.stores.interpreter import AppInterpreter
from memsync.stores.sqlite_files import roll_back_hot_journal
from memsync.stores.vector_store import vector_store_for
from memsync.stores.writer import Route

logger = structlog.get_logger(__name__)

PROBE_TEXT = "memsync embedder probe"
# The copy of memsync.agent the writer imports, under a name no app installs.
OPS_PACKAGE = "memsync_ops"
BOOT = f"from {OPS_PACKAGE}.writer import main; raise SystemExit(main())"
START_TIMEOUT_S = 120.0
EXIT_TIMEOUT_S = 30.0
# memsync's own environment must not leak into the app's interpreter.
DROPPED_ENVIRONMENT = ("PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "VIRTUAL_ENV")


def prepare_for_writing(config: Config) -> None:
    """Roll back hot journals a crashed writer (the app or memsync) left, before capturing.

    history.db first, then the vector store's (``VectorStore.prepare_for_writing``). Only
    commands that write call this: read-only copies cannot roll a journal back. Idempotent.

    Raises:
        TryLaterError: a file is busy; UnavailableError: a file is unreadable.
    """
    if config.history_db_path.is_file():
        roll_back_hot_journal(config.history_db_path)
    vector_store_for(config).prepare_for_writing()


def require_store_free(config: Config, what: str) -> None:
    """Raise LockedError (exit 12) when another process holds the vector store.

    Reads /proc/locks and open files; never takes the lock itself (``VectorStore.require_free``).
    """
    vector_store_for(config).require_free(what)


class WriterClient(AgentClient):
    """The connection to one writer process: the agent protocol on its stdin and stdout."""

    def __init__(self, process: subprocess.Popen[bytes], python: str, stderr: IO[bytes]) -> None:
        self.path = Path(python)
        self.where = f"memsync's writer in the app's interpreter {python}"
        self.process = process
        self._stderr = stderr
        self._socket = None  # type: ignore[assignment]
        assert process.stdout is not None
        self._reader = process.stdout
        self._next_id = 0
        self.hello = {}
        self.aborted = False

    def _write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def start(self, document: dict[str, Any]) -> dict[str, Any]:
        """Send the start document; return the writer's ``hello``. Raises as ``open_memory``."""
        try:
            self._write(json.dumps(document).encode() + b"\n")
            line = self._reader.readline()
        except OSError:
            line = b""
        try:
            reply = json.loads(line)
            ok = bool(reply["ok"])
        except (ValueError, KeyError, TypeError):
            raise UnavailableError(
                f"{self.where} did not start: {self.stderr_tail() or 'it exited'}",
                "run that interpreter by hand to see why; memsync's writes need it",
            ) from None
        if not ok:
            problem = reply.get("error") or {}
            raise StartRefused(str(problem.get("type")), str(problem.get("message")))
        self.hello = dict(reply.get("result") or {})
        return self.hello

    def stderr_tail(self, lines: int = 3) -> str:
        """The last lines the writer printed on stderr (mem0's own messages), one line."""
        with suppress(OSError, ValueError):
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace").strip().splitlines()
            return " | ".join(text[-lines:])
        return ""

    def abort(self) -> None:
        """Kill the writer at once (its write may be cut: the caller's journal resumes it)."""
        self.aborted = True
        with suppress(OSError):
            self.process.kill()
        logger.info("writer_aborted", python=str(self.path))

    def close(self) -> None:
        """End the writer: its stdin closes, it closes the Memory and exits (killed after 30 s)."""
        with suppress(OSError, ValueError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            status = self.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
            logger.warning("writer_killed", python=str(self.path))
        with suppress(OSError, ValueError):
            if self.process.stdout is not None:
                self.process.stdout.close()
        if status not in (0, 2) and not self.aborted:
            logger.warning("writer_exit", python=str(self.path), status=status,
                           stderr=self.stderr_tail())  # fmt: skip


class StartRefused(Exception):
    """The writer answered its start with an error (``kind``: config, locked, ...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class AppWriter(AgentWriter):
    """The ``Writer`` of the direct and window routes: the one-shot writer does each write."""

    def __init__(self, client: WriterClient, config: Config, route: Route, app: AppInterpreter):
        super().__init__(client, config, route)
        self.app = app

    def probe_embedder(self) -> None:
        """Embed one probe text with the app's embedder before any action that needs it.

        Raises:
            ConfigError: (exit 10, naming the embedder) it fails or returns the wrong size.
        """
        config = self._config
        provider = (config.mem0.get("embedder") or {}).get("provider", "openai")
        try:
            vector = self.embed(PROBE_TEXT)
        except (UnavailableError, ValueError) as error:
            raise ConfigError(
                config.source, [f"mem0.embedder ({provider}): probe embedding failed: {error}"]
            ) from error
        expected = config.expected_dims[0][1] if config.expected_dims else None
        if expected is not None and len(vector) != expected:
            raise ConfigError(
                config.source,
                [
                    f"mem0.embedder ({provider}): probe embedding has {len(vector)} dimensions, "
                    f"the collection expects {expected}"
                ],
            )


@contextmanager
def _ops_copy() -> Iterator[Path]:
    """A private directory holding a copy of ``memsync.agent`` as ``memsync_ops`` (stdlib only)."""
    source = Path(agent_package.__file__).parent
    with tempfile.TemporaryDirectory(prefix="memsync-writer-") as scratch:
        target = Path(scratch) / OPS_PACKAGE
        target.mkdir()
        for module in source.glob("*.py"):
            shutil.copyfile(module, target / module.name)
        yield Path(scratch)


def _environment(mem0_dir: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in DROPPED_ENVIRONMENT}
    environ["MEM0_DIR"] = str(mem0_dir)
    environ["MEM0_TELEMETRY"] = "False"
    environ["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing left in the private copy's directory
    return environ


def _raise_refused(config: Config, app: AppInterpreter, refused: StartRefused) -> None:
    where = vector_store_for(config).where
    kind, message = refused.kind, str(refused)
    if kind == "locked":
        raise LockedError(
            f"the embedded Qdrant store {where} was taken by another process just now",
            "another memsync command or the app started; try again when it is done",
        )
    if kind == "inhomogeneous":
        raise UnavailableError(
            f"the collection in {where} holds vectors of different sizes: qdrant-client "
            "cannot open it, so nothing can be written through mem0",
            "memsync check names the points (dimension-mismatch); restore a snapshot",
        )
    if kind == "unopenable":
        raise UnavailableError(
            f"the app's qdrant-client {app.qdrant_client} could not open the embedded Qdrant "
            f"store {where}: a stored point does not load ({message}; written by another "
            "qdrant-client or pydantic version than the app's), so the app cannot open it either",
            "memsync check and doctor read the store without qdrant-client and name the rows; "
            "restore a snapshot",
        )
    if kind == "refused":
        raise ConfigError(
            config.source,
            [f"app.python: {app.python}: {message}; memsync will not write through it"],
            "upgrade the app's mem0ai (docs/reference/compatibility.md), or set "
            "vector_store.config.on_disk = true where the message says so",
        )
    raise ConfigError(config.source, [message])


@contextmanager
def _writer_process(
    config: Config, app: AppInterpreter, mode: str
) -> Iterator[tuple[WriterClient, dict[str, Any]]]:
    settings = dict(resolve_secrets(config.mem0, os.environ))
    # mem0's default history path is under MEM0_DIR, which the writer keeps private: explicit.
    settings.setdefault("history_db_path", str(config.history_db_path))
    with _ops_copy() as scratch, tempfile.TemporaryFile() as stderr:
        # mem0 writes $MEM0_DIR/config.json at import (and 0.1.x a telemetry store there): a
        # private directory, so the writer touches no file of the app's but the two stores.
        document = {
            "mem0": settings,
            "plugins": list(config.plugins),
            "mem0_dir": str(scratch / "mem0"),
            "mode": mode,
        }
        try:
            process = subprocess.Popen(  # noqa: S603 - the app's interpreter, a fixed boot line
                [app.python, "-c", BOOT],
                cwd=scratch,
                env=_environment(scratch / "mem0"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        except OSError as error:
            raise ConfigError(
                config.source, [f"app.python: {app.python} cannot be started: {error.strerror}"]
            ) from error
        client = WriterClient(process, app.python, stderr)
        try:
            hello = client.start(document)
        except StartRefused as refused:
            client.close()
            _raise_refused(config, app, refused)
            raise  # unreachable: _raise_refused always raises
        except BaseException:
            client.abort()  # interrupted while it starts (a window's deadline, SIGTERM)
            client.close()
            raise
        logger.info("writer_started", python=app.python, mem0ai=app.mem0ai, mode=mode)
        try:
            yield client, hello
        except BaseException:
            client.abort()  # interrupted (a window's deadline, SIGTERM): stop its work now
            raise
        finally:
            client.close()


@contextmanager
def open_memory(
    config: Config, route: Route = "direct", app: AppInterpreter | None = None
) -> Iterator[AppWriter]:
    """Start the one-shot writer on the deployment with the app's interpreter; yield its writer.

    ``app``: the interpreter to write with (default: ``interpreter.require(config)``; a
    migration passes the one that will run the app on its target). A pgvector store is reached
    once first (``VectorStore.read_collections``, a 10 s connect timeout).

    Raises:
        ConfigError: (exit 10) the app's interpreter is unknown, cannot run, has no mem0ai, or
            runs a mem0ai memsync will not write through; a plugin cannot be imported; mem0
            rejects the config.
        LockedError: the embedded store is held by another process.
        UnavailableError: the app's qdrant-client cannot open the store, or PostgreSQL cannot
            be reached.
    """
    require_store_free(config, "writing through mem0")
    app = app or interpreter.require(config)
    store = vector_store_for(config)
    if store.location is None:  # a server: reachable before mem0's pool waits on it
        store.read_collections()
    with _writer_process(config, app, "memory") as (client, _):
        yield AppWriter(client, config, route, app)


@contextmanager
def open_embedder(
    config: Config, app: AppInterpreter | None = None
) -> Iterator[Callable[[str], list[float]]]:
    """The config's embedder alone, as ``embed(text) -> vector``, opening no store.

    Built in the app's interpreter as ``mem0.Memory`` builds it, so a migration can ask its
    size before mem0 creates the target. A permanent embedder error raises ValueError; a
    transient one (network, rate limit) UnavailableError.

    Raises:
        ConfigError: as ``open_memory``, or mem0 cannot build the embedder.
    """
    app = app or interpreter.require(config)
    with _writer_process(config, app, "embedder") as (client, _):
        writer = AppWriter(client, config, "direct", app)
        yield writer.embed
