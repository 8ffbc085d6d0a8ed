"""memsync's operations run in the app's own interpreter: the one-shot writer's process.

``writer_process`` starts ``memsync.agent.writer`` with the app's interpreter from a private copy
of the standard-library-only ``memsync.agent`` package (named ``memsync_ops``, so it never
meets a memsync the app may have installed), sends it its start document on stdin and yields
a client speaking the agent's protocol on its pipes. ``stores.mem0`` builds the writes on it;
``app_meta`` asks the app's qdrant-client about the store's ``meta.json`` (doctor,
``repair-meta``). Nothing here imports mem0 or qdrant-client.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import structlog

from memsync import agent as agent_package
from memsync.config import Config, resolve_secrets
from memsync.errors import ConfigError, LockedError, UnavailableError
from memsync.stores import interpreter
from memsync.stores.agent_client import AgentClient
from memsync.stores.interpreter import AppInterpreter
from memsync.stores.vector_store import VectorStore

logger = structlog.get_logger(__name__)

# The copy of memsync.agent the writer imports, under a name no app installs.
OPS_PACKAGE = "memsync_ops"
# -I: the app's interpreter with its own site-packages only (no PYTHONPATH, no user site, no
# current directory); the private copy is put on the path by the boot line itself.
BOOT = (
    "import sys; sys.path.insert(0, {scratch!r}); from memsync_ops.writer import main; "
    "raise SystemExit(main())"
)
START_TIMEOUT_S = 120.0  # importing mem0 and the plugins, building the Memory
EXIT_TIMEOUT_S = 30.0
# memsync's own environment must not leak into the app's interpreter.
DROPPED_ENVIRONMENT = ("PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "VIRTUAL_ENV")


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
            ready, _, _ = select.select([self._reader], [], [], START_TIMEOUT_S)
            if not ready:
                self.abort()
                raise UnavailableError(
                    f"{self.where} did not start within {START_TIMEOUT_S:g} s: importing mem0 "
                    f"or the plugins, or building the Memory, hangs ({self.stderr_tail() or 'no output'})",
                    "run the app's interpreter by hand with the config's plugins to see where",
                )
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


@contextmanager
def _ops_copy(owner: tuple[int, int] | None) -> Iterator[Path]:
    """A directory holding a copy of ``memsync.agent`` as ``memsync_ops`` (stdlib only).

    With ``owner`` (uid, gid: the writer runs as the store's owner), the copy is readable by
    it and the private ``mem0`` directory (the writer's MEM0_DIR) is its own.
    """
    source = Path(agent_package.__file__).parent
    with tempfile.TemporaryDirectory(prefix="memsync-writer-") as scratch:
        target = Path(scratch) / OPS_PACKAGE
        target.mkdir()
        for module in source.glob("*.py"):
            shutil.copyfile(module, target / module.name)
        (Path(scratch) / "mem0").mkdir()
        if owner is not None:  # the directory and all in it become the owner's (still 0700)
            for path in (Path(scratch), target, *target.iterdir(), Path(scratch) / "mem0"):
                os.chown(path, *owner)
        yield Path(scratch)


def _writable_by(path: Path, uid: int, gid: int) -> bool:
    found = path.stat()
    if found.st_uid == uid:
        return bool(found.st_mode & 0o200)
    if found.st_gid == gid:
        return bool(found.st_mode & 0o020)
    return bool(found.st_mode & 0o002)


def _require_owner_writes(store: VectorStore, config: Config, owner: tuple[int, int]) -> None:
    """Refuse (exit 10) before anything is written when the store's owner cannot write both.

    The writer runs as the owner of the vector store (``interpreter.store_owner``); a
    history.db (or its directory, where SQLite keeps its journal) it cannot write would fail
    the history row after the point was written: a half-done write.
    """
    location = store.location
    paths = [config.history_db_path, config.history_db_path.parent]
    if location is not None:
        paths += [location, *location.glob("collection/*"), *location.glob("collection/*/*")]
    denied = [p for p in paths if p.exists() and not _writable_by(p, *owner)]
    if denied:
        raise ConfigError(
            config.source,
            [
                f"the store's owner (uid {owner[0]}), as whom memsync runs the app's code, "
                f"cannot write {', '.join(str(p) for p in denied[:3])}"
            ],
            "give the app's user both stores (chown -R), as the app itself needs them",
        )


def _environment(mem0_dir: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in DROPPED_ENVIRONMENT}
    environ["MEM0_DIR"] = str(mem0_dir)
    environ["MEM0_TELEMETRY"] = "False"
    environ["MEMSYNC_WRITER_PARENT"] = str(os.getpid())  # the writer dies with memsync
    environ["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing left in the private copy's directory
    return environ


def _raise_refused(where: str, config: Config, app: AppInterpreter, refused: StartRefused) -> None:
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
    if kind == "unopenable" and "CreateCollection" in message:
        raise UnavailableError(
            f"the app's qdrant-client {app.qdrant_client} cannot load {where}/meta.json: it "
            "holds keys that qdrant-client does not know (written by a newer one), so the app "
            "cannot open the store either",
            "stop the app, then memsync repair-meta (docs/reference/commands/repair-meta.md)",
        )
    if kind == "unopenable":
        raise UnavailableError(
            f"the app's qdrant-client {app.qdrant_client} could not open the embedded Qdrant "
            f"store {where}: a stored point does not load ({message}; written by another "
            "qdrant-client or pydantic version than the app's), so the app cannot open it either",
            "memsync doctor (store-decode) and memsync check --app name the rows it cannot "
            "load; run the app with the qdrant-client and pydantic that wrote them, or restore "
            "a snapshot from before",
        )
    if kind == "refused":
        raise ConfigError(
            config.source,
            [f"app.python: {app.python}: {message}; memsync will not write through it"],
            "docs/reference/compatibility.md lists the mem0ai releases memsync writes through"
            + (
                "; set vector_store.config.on_disk = true in the app's config and memsync's"
                if "on_disk" in message
                else ": a newer memsync for a newer mem0ai"
                if "newer than" in message
                else ": upgrade the app's mem0ai"
            ),
        )
    if kind == "failed":
        raise UnavailableError(
            f"the app's interpreter {app.python} could not read the store {where}: {message}",
            "memsync check reads the store without qdrant-client; restore a snapshot",
        )
    if kind == "config" and message.startswith("plugins:"):
        raise ConfigError(
            config.source,
            [f"{message} (in the app's interpreter {app.python}, run isolated: -I)"],
            "install the plugin in the app's environment, or name the directory holding it in "
            "[app] python_path (docs/how-to/install-on-a-vps.md#the-apps-interpreter)",
        )
    raise ConfigError(config.source, [message])


@contextmanager
def writer_process(
    store: VectorStore, config: Config, app: AppInterpreter, mode: str, path: Path | None = None
) -> Iterator[tuple[WriterClient, dict[str, Any]]]:
    """Start the writer on ``config`` and its ``store`` with ``app``'s interpreter; yield ``hello``.

    Yields the writer's client and its ``hello``.

    ``mode``: ``memory`` (the app's ``Memory``), ``embedder`` (its embedder alone),
    ``meta-inspect``/``meta-repair`` (``hello`` is ``agent.meta``'s answer on ``path``).
    The writer ends when the block does (killed at once when the block raises).

    Raises:
        ConfigError, LockedError, UnavailableError: as ``stores.mem0.open_memory``.
    """
    settings = dict(resolve_secrets(config.mem0, os.environ))
    # mem0's default history path is under MEM0_DIR, which the writer keeps private: explicit.
    settings.setdefault("history_db_path", str(config.history_db_path))
    owner = interpreter.store_owner(store, config)
    if owner is not None and mode != "meta-inspect":
        _require_owner_writes(store, config, owner)
    with _ops_copy(owner) as scratch, tempfile.TemporaryFile() as stderr:
        # mem0 writes $MEM0_DIR/config.json at import (and 0.1.x a telemetry store there): a
        # private directory, so the writer touches no file of the app's but the two stores.
        document = {
            "mem0": settings,
            "plugins": list(config.plugins),
            "mem0_dir": str(scratch / "mem0"),
            "mode": mode,
            "path": None if path is None else str(path),
            "python_path": [str(p) for p in config.app.python_path],
        }
        try:
            process = subprocess.Popen(  # noqa: S603 - the app's interpreter, a fixed boot line
                [app.python, "-I", "-c", BOOT.format(scratch=str(scratch))],
                cwd=scratch,
                env=_environment(scratch / "mem0"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                user=None if owner is None else owner[0],
                group=None if owner is None else owner[1],
                extra_groups=None if owner is None else [],
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
            _raise_refused(store.where, config, app, refused)
            raise  # unreachable: _raise_refused always raises
        except BaseException:
            client.abort()  # interrupted while it starts (a window's deadline, SIGTERM)
            client.close()
            raise
        logger.info(
            "writer_started", python=app.python, mem0ai=app.mem0ai, mode=mode,
            uid=hello.get("uid"),
        )  # fmt: skip
        try:
            yield client, hello
        except BaseException:
            client.abort()  # interrupted (a window's deadline, SIGTERM): stop its work now
            raise
        finally:
            client.close()


def require_loadable(store: VectorStore, config: Config, app: AppInterpreter) -> None:
    """Refuse now what would stop the writer's start: before a safety snapshot, not after it.

    One run of the app's interpreter, as doctor's (``app_doctor``): the mem0ai it refuses, its
    plugins, the store's owner, whether its qdrant-client loads ``meta.json`` and every stored
    point (one it cannot load stops its open of the store). Reads only.

    Raises:
        ConfigError: (exit 10) as ``app_doctor``.
        UnavailableError: (exit 11) its qdrant-client cannot load ``meta.json`` or a point.
    """
    found = app_doctor(store, config, app)
    where = store.where
    meta = found.get("meta")
    if meta is not None and not meta["loads"]:
        raise UnavailableError(
            f"the app's qdrant-client {app.qdrant_client} cannot load {where}/meta.json: it "
            "holds keys that qdrant-client does not know (written by a newer one), so the app "
            "cannot open the store either; memsync changed nothing",
            "stop the app, then memsync repair-meta (docs/reference/commands/repair-meta.md)",
        )
    bad = {name: c for name, c in (found.get("decode") or {}).items() if c.get("undecodable")}
    if bad:
        rows = "; ".join(
            f"collection {name}: {c['undecodable']} of {c['rows']} rows ("
            + ", ".join(str(row["id"]) for row in c["named"][:5])
            + (", ..." if c["undecodable"] > 5 else "")
            + ")"
            for name, c in sorted(bad.items())
        )
        raise UnavailableError(
            f"the app's qdrant-client {app.qdrant_client} cannot load stored points of {where} "
            f"({rows}): it could not open the store, so nothing can be written through mem0; "
            "memsync changed nothing",
            "memsync doctor (store-decode) and memsync check --app name every such row; run "
            "the app with the qdrant-client and pydantic that wrote them, or restore a snapshot "
            "from before",
        )


def app_meta(
    store: VectorStore, config: Config, app: AppInterpreter, *, repair: bool = False
) -> dict[str, Any]:
    """What the app's qdrant-client says of the embedded store's ``meta.json`` (``agent.meta``).

    ``repair``: rewrite it without the null keys that qdrant-client refuses, the old file kept
    beside it (the caller makes sure nobody holds the store). Opens no ``Memory``.

    Raises:
        UnavailableError: (exit 11) the file cannot be read, or the app's interpreter has no
            qdrant-client.
        ConfigError: (exit 10) the app's interpreter cannot be started.
    """
    location = store.location
    if location is None:
        raise ConfigError(config.source, ["mem0.vector_store: a server store has no meta.json"])
    mode = "meta-repair" if repair else "meta-inspect"
    with writer_process(store, config, app, mode, location) as (_, found):
        return found


def app_doctor(store: VectorStore, config: Config, app: AppInterpreter) -> dict[str, Any]:
    """Doctor's one run of the app's interpreter: its plugins, and its view of ``meta.json``.

    Imports the config's plugins as a write would, and asks the app's qdrant-client about the
    embedded store's ``meta.json`` (``meta``: as ``app_meta``; None for a server store or
    none yet). Builds no ``Memory``.

    Raises:
        ConfigError: (exit 10) a plugin does not import there (named, with the fix).
        UnavailableError: (exit 11) meta.json cannot be read there.
    """
    location = store.location
    path = location if location is not None and (location / "meta.json").is_file() else None
    with writer_process(store, config, app, "plugins", path) as (_, found):
        return found
