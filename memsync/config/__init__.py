"""memsync's configuration: TOML in, validated frozen objects out; the only reader of config and env.

Lookup order: ``--config PATH``, else ``$MEMSYNC_CONFIG``, else ``/etc/memsync/memsync.toml``.
Every key is declared once in ``memsync.config.schema``; ``parse`` checks each key there (per
field), then the rules tying keys together (``find_cross_field_problems``), and raises one
``ConfigError`` listing every problem as ``dotted.path: what is wrong (got VALUE)``.
Secrets (``{env = "NAME"}`` / ``{file = "PATH"}`` values in the mem0 dict) are validated for
form at load time and resolved only by ``resolve_secrets``, so read-only commands work
without them; no message echoes a secret's value (``memsync.config.messages``). The mem0 dict
is made JSON-like at load (``memsync.config.mem0_dict``). Bad input of any kind (unreadable,
non-UTF-8 or oversized files, absurd nesting, ``~unknownuser``) is a ``ConfigError``.
Defaults follow mem0ai 2.2.1 (``mem0/configs``): Qdrant at ``/tmp/qdrant``, collection
``mem0``, 1536 dimensions, ``$MEM0_DIR/history.db``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync.config.fields import absolute, home_dir, parse_duration
from memsync.config.files import read_key_file, read_text
from memsync.config.mem0_dict import Secret, resolve_secrets, with_secrets
from memsync.config.mem0_file import read_mem0_file
from memsync.config.messages import describe_errors
from memsync.config.schema import (
    MEM0_DEFAULT_COLLECTION,
    MEM0_DEFAULT_DIMS,
    MEM0_DEFAULT_QDRANT_PATH,
    AppConfig,
    CheckConfig,
    ConfigFile,
    DaemonConfig,
    JobSchedule,
    MigrateConfig,
    PGVectorSettings,
    ProtectConfig,
    QdrantSettings,
    S3Config,
    SnapshotConfig,
    VectorStoreConfig,
    find_cross_field_problems,
)
from memsync.errors import ConfigError

__all__ = [
    "AppConfig", "DEFAULT_CONFIG_PATH", "MEM0_DEFAULT_COLLECTION", "MEM0_DEFAULT_DIMS", "MEM0_DEFAULT_QDRANT_PATH",
    "CheckConfig", "Config", "PGVectorSettings", "QdrantSettings", "VectorStoreConfig", "DaemonConfig", "JobSchedule", "MigrateConfig", "ProtectConfig", "S3Config", "Secret", "SnapshotConfig", "config_path",
    "load", "parse", "parse_duration", "read_document", "read_key_file", "resolve_secrets",
]  # fmt: skip

DEFAULT_CONFIG_PATH = Path("/etc/memsync/memsync.toml")
TOO_DEEP = "nested too deeply to be a memsync configuration"


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """The whole configuration, validated and resolved; paths are absolute.

    Attributes:
        source: where it was read from (a path), for messages.
        mem0: the dict the app passes to ``mem0.Memory.from_config``, with ``Secret``
            objects where the file had ``{env=...}``/``{file=...}``.
        vector_store: ``[mem0.vector_store.config]`` as its provider's model (``provider``
            tells which: ``QdrantSettings`` or ``PGVectorSettings``, secrets still references);
            ``memsync.stores.backends.backend_for`` builds the store from it.
        collection: the memory collection's name.
        expected_dims: ``(key, size)`` pairs every collection's vector size must match.
        history_db_path: mem0's history.db.
        settings: the validated document with every default filled in (``config show``).
    """

    source: str
    mem0_dir: Path
    mem0: Mapping[str, Any] = field(repr=False)
    plugins: tuple[str, ...]
    state_dir: Path
    work_dir: Path
    app_python: Path | None
    vector_store: VectorStoreConfig
    collection: str
    expected_dims: tuple[tuple[str, int], ...]
    history_db_path: Path
    snapshot: SnapshotConfig
    s3: S3Config | None
    daemon: DaemonConfig
    app: AppConfig
    migrate: MigrateConfig
    check: CheckConfig
    protect: ProtectConfig | None = None
    settings: ConfigFile = field(repr=False, compare=False)

    @property
    def qdrant_path(self) -> Path:
        """The embedded Qdrant directory (mem0's default one when the store is another)."""
        store = self.vector_store
        return store.path if isinstance(store, QdrantSettings) else Path(MEM0_DEFAULT_QDRANT_PATH)

    @property
    def migrations_qdrant_path(self) -> Path:
        """The second embedded Qdrant mem0 opens when telemetry is on (mem0ai 2.2.1)."""
        return self.mem0_dir / "migrations_qdrant"

    @property
    def entities_collection(self) -> str:
        """mem0's entity collection for the memory collection (mem0ai 2.2.1)."""
        return f"{self.collection}_entities"


def config_path(cli_path: str | None, environ: Mapping[str, str]) -> Path:
    """Return the config file to read: ``--config``, ``$MEMSYNC_CONFIG`` or the default."""
    if cli_path:
        return Path(cli_path)
    if environ.get("MEMSYNC_CONFIG"):
        return Path(environ["MEMSYNC_CONFIG"])
    return DEFAULT_CONFIG_PATH


def read_document(path: Path) -> dict[str, Any]:
    """Read the TOML document at ``path`` without validating it. Reads only.

    Raises:
        ConfigError: the file is missing, unreadable, too large, not UTF-8, not TOML, or
            nested too deeply for the TOML parser.
    """
    source = str(path)
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise ConfigError(
            source,
            ["file not found"],
            "create it (every key is in docs/reference/config.md and ops/memsync.example.toml), "
            "or pass --config PATH / set MEMSYNC_CONFIG",
        ) from None
    except OSError as error:
        raise ConfigError(
            source,
            [f"cannot read: {error.strerror or error}"],
            "--config names memsync's TOML file (e.g. /etc/memsync/memsync.toml), readable by "
            "this user",
        ) from error
    except ValueError as error:
        raise ConfigError(source, [f"cannot read: {error}"]) from None
    try:
        return tomllib.loads(text)
    except ValueError as error:  # TOMLDecodeError, or an integer of over 4300 digits
        raise ConfigError(
            source,
            [f"not valid TOML: {error}"],
            "fix the TOML syntax at that line (ops/memsync.example.toml shows every section)",
        ) from None
    except RecursionError:
        raise ConfigError(source, [TOO_DEEP]) from None


def load(path: Path, environ: Mapping[str, str], text_from: Path | None = None) -> Config:
    """Read and validate the configuration at ``path``. Reads only.

    Args:
        path: the TOML file.
        environ: the environment (``MEM0_DIR``, ``STATE_DIRECTORY``, ``HOME`` are read).
        text_from: read the document from this file instead (the daemon's last accepted copy,
            TOML or JSON by its suffix); relative paths still resolve against ``path``'s directory.

    Raises:
        ConfigError: the file is missing, unreadable, not TOML, or any key is invalid; every
            problem is listed with its dotted path.
    """
    source = str(path)
    try:
        if text_from is not None and text_from.suffix == ".json":
            from memsync.config.accepted import read_accepted

            raw = read_accepted(text_from, source)
        else:
            raw = read_document(text_from or path)
        return parse(raw, source=source, base_dir=path.parent, environ=environ)
    except RecursionError:
        raise ConfigError(source, [TOO_DEEP]) from None


def parse(
    raw: Mapping[str, Any], *, source: str, base_dir: Path, environ: Mapping[str, str]
) -> Config:
    """Validate an already-parsed TOML document. Pure apart from reading ``mem0_config_file``.

    Per-field checks (``schema.ConfigFile``) first, then the cross-field rules; every problem
    of both is reported.

    Raises:
        ConfigError: every invalid key, with its dotted path.
    """
    from pydantic import ValidationError

    try:
        home = home_dir(environ)
    except ValueError as error:
        raise ConfigError(source, [f"HOME: {error}"]) from None
    errors: list[str] = []
    mem0 = _mem0_dict(raw, errors, base_dir, home, source)
    document = {**raw, "mem0": mem0}
    settings: ConfigFile | None = None
    try:
        settings = ConfigFile.model_validate(document, context={"base_dir": base_dir, "home": home})
    except ValidationError as error:
        errors += describe_errors(error)
    errors += find_cross_field_problems(raw, mem0)
    if errors or settings is None:
        raise ConfigError(source, errors)
    return _resolve(settings, mem0, source, environ, home)


def _resolve(
    settings: ConfigFile, mem0: dict[str, Any], source: str, environ: Mapping[str, str], home: Path
) -> Config:
    """The defaults computed from the environment, and the values derived from the mem0 dict."""
    state_default = environ.get("STATE_DIRECTORY", "").split(":")[0] or str(
        home / ".local/state/memsync"
    )
    mem0_dir = settings.mem0_dir or Path(environ.get("MEM0_DIR") or home / ".mem0")
    state_dir = settings.state_dir or Path(state_default)
    store = settings.mem0.vector_store.config
    dims = [("mem0.vector_store.config.embedding_model_dims", store.embedding_model_dims)]
    embedder_dims = settings.mem0.embedder.config.embedding_dims
    if embedder_dims is not None:
        dims.append(("mem0.embedder.config.embedding_dims", embedder_dims))
    return Config(
        source=source,
        mem0_dir=mem0_dir,
        mem0=mem0,
        plugins=tuple(settings.plugins),
        state_dir=state_dir,
        work_dir=settings.work_dir or state_dir / "tmp",
        app_python=settings.app.python or settings.app_python,
        vector_store=store,
        collection=store.collection_name,
        expected_dims=tuple(dims),
        history_db_path=settings.mem0.history_db_path or mem0_dir / "history.db",
        snapshot=settings.snapshot,
        s3=settings.s3,
        daemon=settings.daemon,
        app=settings.app,
        migrate=settings.migrate,
        check=settings.check,
        protect=settings.protect,
        settings=settings,
    )


def _mem0_dict(
    raw: Mapping[str, Any], errors: list[str], base_dir: Path, home: Path, source: str
) -> Any:
    """The mem0 dict from ``[mem0]`` or ``mem0_config_file``: JSON-like, ``Secret`` references.

    A value of the wrong type is returned as is, for the per-field checks to report. With both
    given (a cross-field problem), ``[mem0]`` is returned and the file's own problems are added
    as ``mem0_config_file.<key>: ...``.
    """
    inline, named = raw.get("mem0"), raw.get("mem0_config_file")
    from_file: Any = None
    if isinstance(named, str) and named and "\x00" not in named:
        try:
            path = absolute(named, base_dir, home)
        except ValueError:
            pass  # the per-field check of mem0_config_file reports it
        else:
            prefix = "mem0" if inline is None else "mem0_config_file"
            from_file = with_secrets(read_mem0_file(path, errors), prefix, source, errors)
    if inline is None:
        return from_file if from_file is not None else {}
    if from_file is not None:
        errors += _file_problems(from_file)
    return with_secrets(inline, "mem0", source, errors) if isinstance(inline, Mapping) else inline


def _file_problems(mem0: dict[str, Any]) -> list[str]:
    """The per-field problems of a ``mem0_config_file`` given beside ``[mem0]``, by its keys."""
    from pydantic import ValidationError

    try:
        ConfigFile.model_validate({"mem0": mem0})
    except ValidationError as error:
        return ["mem0_config_file" + line.removeprefix("mem0") for line in describe_errors(error)]
    return []
