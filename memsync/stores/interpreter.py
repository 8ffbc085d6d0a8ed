"""The app's interpreter: the Python whose mem0ai and qdrant-client every memsync write uses.

memsync never writes a deployment with another mem0ai or qdrant-client than the app's
(docs/reference/compatibility.md). The interpreter is, in order:

1. ``[app] python`` in memsync's config (the older top-level ``app_python`` too);
2. the one recorded in the state directory (``app-interpreter.json``), learned from the app's
   agent (its ``hello`` names its ``executable``) or from the process holding the store
   (``/proc/<pid>/cmdline``, else ``/proc/<pid>/exe``) while the app ran;
3. learned now from the process holding the store.

Whichever it is, its versions are measured by running it (``probe``), never assumed; memsync's
own interpreter counts only when one of these names it. Each measurement with mem0ai is recorded
in ``app-interpreter.json`` (a configured one too, ``source`` ``config``, which counts only while
the config names it), so ``status`` and snapshot manifests show the app's versions without
running it. None known: writes are refused (``require``, exit 10) before anything is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import structlog

from memsync.config import Config
from memsync.errors import ConfigError
from memsync.stores.vector_store import VectorStore
from memsync.utc import iso

logger = structlog.get_logger(__name__)

STATE_FILE = "app-interpreter.json"
PROBE_TIMEOUT_S = 20.0
UNKNOWN_HINT = (
    'set [app] python = "/path/to/the/app/venv/bin/python" in memsync\'s config, or attach '
    "memsync.agent in the app (docs/how-to/install-on-a-vps.md#the-apps-interpreter)"
)

_PROBE = (
    "import importlib.metadata as m, json, sys\n"
    "def v(n):\n"
    "    try: return m.version(n)\n"
    "    except m.PackageNotFoundError: return None\n"
    "print(json.dumps({'mem0ai': v('mem0ai'), 'qdrant-client': v('qdrant-client'),"
    " 'python_version': sys.version.split()[0], 'executable': sys.executable}))\n"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AppInterpreter:
    """The app's interpreter and what it reported when run.

    Attributes:
        python: the interpreter's path, as configured or learned (a venv's ``bin/python``).
        source: where it came from: ``config``, ``agent``, ``holder`` (see the module).
        mem0ai, qdrant_client: the versions it reported (None: not installed).
        python_version: its Python version.
        learned_at: when it was first recorded with these versions, ISO 8601 UTC.
    """

    python: str
    source: str
    mem0ai: str | None
    qdrant_client: str | None
    python_version: str | None
    learned_at: str | None = None

    def describe(self) -> str:
        """``/srv/app/.venv/bin/python (mem0ai 2.1.0, qdrant-client 1.19.1; from [app] python)``."""
        origin = {
            "config": "from [app] python",
            "agent": "learned from the app's agent",
            "holder": "learned from the process holding the store",
        }.get(self.source, self.source)
        return (
            f"{self.python} (mem0ai {self.mem0ai or 'not installed'}, qdrant-client "
            f"{self.qdrant_client or 'not installed'}; {origin})"
        )


def store_owner(store: VectorStore, config: Config) -> tuple[int, int] | None:
    """The (uid, gid) the app's interpreter runs as: the store's owner, when memsync is root.

    A root memsync never runs the app's code (its mem0, its plugins, a ``.pth`` in its
    environment) as root: the version probe and the one-shot writer take the owner of the
    embedded store's directory (else of history.db), unless that is root. None: memsync is
    not root, or the store is root's. Reads only.
    """
    if os.getuid() != 0:
        return None
    for path in (store.location, config.history_db_path):
        if path is not None and path.exists():
            found = path.stat()
            return None if found.st_uid == 0 else (found.st_uid, found.st_gid)
    return None


def probe(python: str | Path, owner: tuple[int, int] | None = None) -> dict[str, str | None] | None:
    """Run ``python`` once (as ``owner``) and return its versions, or None. Reads only.

    ``-I``: the interpreter's own site-packages only (no user site, no PYTHON* variables),
    what the app imports. None when it does not run, or answers nothing in 20 s.
    """
    try:
        completed = subprocess.run(  # noqa: S603 - the app's interpreter, a fixed script
            [str(python), "-I", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=True,
            cwd="/",
            user=None if owner is None else owner[0],
            group=None if owner is None else owner[1],
            extra_groups=None if owner is None else [],
        )
        reported = json.loads(completed.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if not isinstance(reported, dict):
        return None
    return {k: v if isinstance(v, str) else None for k, v in reported.items()}


def _measured(
    python: str, source: str, learned_at: str | None = None, owner: tuple[int, int] | None = None
) -> AppInterpreter | None:
    found = probe(python, owner)
    if found is None:
        return None
    return AppInterpreter(
        python=python,
        source=source,
        mem0ai=found.get("mem0ai"),
        qdrant_client=found.get("qdrant-client"),
        python_version=found.get("python_version"),
        learned_at=learned_at,
    )


def recorded(state_dir: Path) -> AppInterpreter | None:
    """The interpreter last learned from the app (``app-interpreter.json``), or None. Reads only."""
    try:
        document = json.loads((state_dir / STATE_FILE).read_text(encoding="utf-8"))
        return AppInterpreter(**{k: document.get(k) for k in AppInterpreter.__dataclass_fields__})
    except (OSError, ValueError, TypeError):
        return None


def _safe(path: Path) -> bool:
    """Owned by root or by memsync's user, and writable by no one else. Reads only."""
    try:
        found = path.stat()
    except OSError:
        return False
    return found.st_uid in (0, os.getuid()) and not found.st_mode & 0o022


def trusted(python: str) -> bool:
    """Whether memsync may run a ``python`` it learned (not configured). Reads only.

    An agent's ``hello`` or a process's command line is what another process says: memsync
    runs only an interpreter nobody else could have put there or changed. The file, every
    directory above it (as named, and as its links resolve), and, for a virtual environment,
    its ``pyvenv.cfg`` and ``site-packages`` (whose ``.pth`` files run at start) must each be
    owned by root or by memsync's own user and writable by no one else.
    """
    named = Path(python)
    if not named.is_absolute():
        return False
    real = Path(os.path.realpath(named))
    checked = [named, *named.parents, real, *real.parents]
    venv = named.parent.parent
    if (venv / "pyvenv.cfg").exists():
        checked += [venv / "pyvenv.cfg", *venv.glob("lib*/python*/site-packages")]
    return all(_safe(path) for path in checked)


def record(
    state_dir: Path, python: str, source: str, owner: tuple[int, int] | None = None
) -> AppInterpreter | None:
    """Measure ``python`` and record it as the app's when it has mem0ai; return it, or None.

    Learned interpreters that are not ``trusted`` are neither run nor recorded.
    """
    if not trusted(python):
        logger.warning("app_interpreter_not_trusted", python=python, source=source)
        return None
    found = _measured(python, source, iso(datetime.now(UTC)), owner)
    if found is None or found.mem0ai is None:
        return None
    _remember(state_dir, found)
    return found


def _remember(state_dir: Path, found: AppInterpreter) -> None:
    """Write ``found`` to ``app-interpreter.json`` when it says something new (not its time)."""
    last = recorded(state_dir)
    if last is not None and replace(last, learned_at=None) == replace(found, learned_at=None):
        return
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_atomic(state_dir / STATE_FILE, asdict(found))
    except OSError as error:
        logger.warning("app_interpreter_not_recorded", error=str(error))
    logger.info(
        "app_interpreter_learned", python=found.python, source=found.source, mem0ai=found.mem0ai
    )


def _write_atomic(path: Path, document: dict[str, Any]) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)


def learn_from_hello(
    store: VectorStore, config: Config, hello: dict[str, Any]
) -> AppInterpreter | None:
    """Record the interpreter an agent's ``hello`` names (``executable``), when it runs here."""
    executable = hello.get("executable")
    if not isinstance(executable, str) or not executable:
        return None
    return record(config.state_dir, executable, "agent", store_owner(store, config))


def holder_candidates(pid: int) -> list[str]:
    """The interpreters process ``pid`` may run: its ``argv[0]`` (a venv's python), then its exe.

    ``/proc/<pid>/exe`` names the base interpreter a venv's ``python`` links to, whose
    site-packages are not the app's; ``argv[0]`` keeps the venv's path. Reads /proc only.
    """
    try:
        process = psutil.Process(pid)
        argv = process.cmdline()
        exe = process.exe()
        environ_path = process.environ().get("PATH")
        cwd = process.cwd()
    except (psutil.Error, OSError):
        return []
    found: list[str] = []
    first = argv[0] if argv else ""
    if "python" in Path(first).name:
        if os.sep in first:
            found.append(str(Path(cwd) / first) if not os.path.isabs(first) else first)
        else:
            located = shutil.which(first, path=environ_path)
            if located:
                found.append(located)
    if exe and exe not in found:
        found.append(exe)
    return found


def learn_from_holder(store: VectorStore, config: Config, pid: int) -> AppInterpreter | None:
    """Record the interpreter of the process holding the store, when one with mem0ai is found."""
    for python in holder_candidates(pid):
        found = record(config.state_dir, python, "holder", store_owner(store, config))
        if found is not None:
            return found
    return None


def known(
    store: VectorStore, config: Config, holder_pid: int | None = None
) -> AppInterpreter | None:
    """The app's interpreter, measured now, or None when none is known (see the module)."""
    owner = store_owner(store, config)
    if config.app_python is not None:
        measured = _measured(str(config.app_python), "config", iso(datetime.now(UTC)), owner)
        if measured is not None and measured.mem0ai is not None:
            _remember(config.state_dir, measured)  # for status and snapshot manifests
        return measured or AppInterpreter(
            python=str(config.app_python), source="config", mem0ai=None, qdrant_client=None,
            python_version=None,
        )  # fmt: skip
    last = recorded(config.state_dir)
    # one [app] python named and measured once is not learned: it counts while it is configured
    if last is not None and last.source != "config" and trusted(last.python):
        found = _measured(last.python, last.source, last.learned_at, owner)
        if found is not None and found.mem0ai is not None:
            _remember(config.state_dir, found)  # its versions as they are now
            return found
    if holder_pid is not None:
        return learn_from_holder(store, config, holder_pid)
    return None


def shown(config: Config) -> dict[str, Any] | None:
    """The interpreter writes would use, as configured or last recorded, without running it.

    For ``status`` (cheap: reads the state file only); ``known`` measures it.
    """
    last = recorded(config.state_dir)
    if config.app_python is not None:
        same = last is not None and last.python == str(config.app_python)
        return {
            "python": str(config.app_python), "source": "config",
            "mem0ai": last.mem0ai if same and last else None,
            "qdrant_client": last.qdrant_client if same and last else None,
            "learned_at": last.learned_at if same and last else None,
        }  # fmt: skip
    if last is None or last.source == "config":
        return None
    return {
        "python": last.python, "source": last.source, "mem0ai": last.mem0ai,
        "qdrant_client": last.qdrant_client, "learned_at": last.learned_at,
    }  # fmt: skip


def require(store: VectorStore, config: Config, holder_pid: int | None = None) -> AppInterpreter:
    """The app's interpreter for a write; refuse (exit 10) before anything is touched.

    Raises:
        ConfigError: no interpreter is known, it cannot run, or it has no mem0ai.
    """
    found = known(store, config, holder_pid)
    if found is None:
        raise ConfigError(
            config.source,
            [
                "app.python: the app's interpreter is unknown, and memsync writes a deployment "
                "only with the app's own mem0ai and qdrant-client"
            ],
            UNKNOWN_HINT,
        )
    if found.python_version is None:
        raise ConfigError(
            config.source,
            [
                f"app.python: {found.python} does not run as a Python interpreter here (or "
                f"gave no answer in {PROBE_TIMEOUT_S:g} s)"
            ],
            "set [app] python to the interpreter the app runs with",
        )
    if found.mem0ai is None:
        raise ConfigError(
            config.source,
            [f"app.python: {found.python} has no mem0ai installed: it is not the app's"],
            "set [app] python to the interpreter the app runs with",
        )
    return found
