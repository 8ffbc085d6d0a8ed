"""memsync's configuration: TOML in, frozen dataclasses out; the only reader of config and env.

Lookup order: ``--config PATH``, else ``$MEMSYNC_CONFIG``, else ``/etc/memsync/memsync.toml``.
``load`` collects every problem, each with its dotted path, before raising ``ConfigError``.
Secrets (``{env = "NAME"}`` / ``{file = "PATH"}`` values in the mem0 dict) are validated for
form at load time and resolved only by ``resolve_secrets``, so read-only commands work
without them. Defaults follow mem0ai 2.2.1 (``mem0/configs``): Qdrant at ``/tmp/qdrant``,
collection ``mem0``, 1536 dimensions, ``$MEM0_DIR/history.db``.
"""

from __future__ import annotations

import json
import re
import tomllib
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import time, timedelta
from pathlib import Path
from typing import Any

from memsync.errors import ConfigError

DEFAULT_CONFIG_PATH = Path("/etc/memsync/memsync.toml")
MEM0_DEFAULT_QDRANT_PATH = "/tmp/qdrant"  # noqa: S108 - mem0ai 2.2.1 QdrantConfig.path
MEM0_DEFAULT_COLLECTION = "mem0"
MEM0_DEFAULT_DIMS = 1536

_DURATION = re.compile(r"(\d{1,12})(s|m|h|d)")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TIME_OF_DAY = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_JOBS = ("check", "prune", "snapshot", "retention")


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotConfig:
    """``[snapshot]``: where snapshots live and how many to keep."""

    directory: Path | None = None
    keep_last: int = 0
    keep_daily: int = 0
    keep_weekly: int = 0
    keep_monthly: int = 0
    encrypt_key_file: Path | None = field(default=None, repr=False)
    signing_key_file: Path | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class S3Config:
    """``[s3]``: the bucket snapshots are uploaded to (credentials: boto3's own chain)."""

    bucket: str
    prefix: str = ""
    region: str | None = None
    endpoint_url: str | None = None
    storage_class: str | None = None
    sse: str | None = None
    sse_kms_key_id: str | None = None
    checksums: str = "when_supported"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSchedule:
    """When a daemon job runs: at a time of day, or every interval (seconds)."""

    at: time | None = None
    every: timedelta | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig:
    """``[daemon]``: the schedule of the daemon's jobs."""

    timezone: str = "UTC"
    jobs: Mapping[str, JobSchedule] = field(default_factory=dict)
    upload: bool = True
    stop_timeout_s: float = 120.0
    textfile_path: Path | None = None
    ping_url: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Secret:
    """A reference to a secret value: an environment variable or a file (never inline)."""

    env: str | None = None
    file: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """The whole configuration, validated; paths are absolute.

    Attributes:
        source: where it was read from (a path), for messages.
        mem0: the dict the app passes to ``mem0.Memory.from_config``, with ``Secret``
            objects where the file had ``{env=...}``/``{file=...}``.
        qdrant_path: the embedded Qdrant directory.
        collection: the memory collection's name.
        expected_dims: ``(key, size)`` pairs every collection's vector size must match.
        history_db_path: mem0's history.db.
    """

    source: str
    mem0_dir: Path
    mem0: Mapping[str, Any] = field(repr=False)
    plugins: tuple[str, ...]
    state_dir: Path
    work_dir: Path
    app_python: Path | None
    qdrant_path: Path
    collection: str
    expected_dims: tuple[tuple[str, int], ...]
    history_db_path: Path
    snapshot: SnapshotConfig
    s3: S3Config | None
    daemon: DaemonConfig

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


def load(path: Path, environ: Mapping[str, str], text_from: Path | None = None) -> Config:
    """Read and validate the configuration at ``path``. Reads only.

    Args:
        path: the TOML file.
        environ: the environment (``MEM0_DIR``, ``STATE_DIRECTORY``, ``HOME`` are read).
        text_from: read the text from this file instead (the daemon's last accepted copy);
            relative paths still resolve against ``path``'s directory.

    Raises:
        ConfigError: the file is missing, unreadable, not TOML, or any key is invalid; every
            problem is listed with its dotted path.
    """
    source = str(path)
    try:
        raw = tomllib.loads((text_from or path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            source,
            ["file not found"],
            "create it (every key is in docs/reference/config.md and ops/memsync.example.toml), "
            "or pass --config PATH / set MEMSYNC_CONFIG",
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(source, [f"cannot read: {error}"]) from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(source, [f"not valid TOML: {error}"]) from error
    try:
        return parse(raw, source=source, base_dir=path.parent, environ=environ)
    except RecursionError:
        raise ConfigError(source, ["nested too deeply to be a memsync configuration"]) from None


def parse(
    raw: Mapping[str, Any], *, source: str, base_dir: Path, environ: Mapping[str, str]
) -> Config:
    """Validate an already-parsed TOML document. Pure apart from reading ``mem0_config_file``.

    Raises:
        ConfigError: every invalid key, with its dotted path.
    """
    errors: list[str] = []
    known = {
        "mem0_dir", "mem0_config_file", "plugins", "state_dir", "work_dir", "app_python",
        "mem0", "snapshot", "s3", "daemon",
    }  # fmt: skip
    _unknown_keys(raw, known, "", errors)
    home = Path(environ.get("HOME") or Path.home())

    mem0_dir = _path(raw, "mem0_dir", errors, base_dir, home) or Path(
        environ.get("MEM0_DIR") or home / ".mem0"
    )
    state_default = environ.get("STATE_DIRECTORY", "").split(":")[0] or str(
        home / ".local/state/memsync"
    )
    state_dir = _path(raw, "state_dir", errors, base_dir, home) or Path(state_default)
    work_dir = _path(raw, "work_dir", errors, base_dir, home) or state_dir / "tmp"
    app_python = _path(raw, "app_python", errors, base_dir, home)
    plugins = _plugins(raw.get("plugins", []), errors)

    mem0 = _mem0_dict(raw, errors, base_dir, home)
    checked = _check_mem0(mem0, errors)
    qdrant_path, collection, dims = checked
    history = mem0.get("history_db_path")
    valid_history = isinstance(history, str) and "\x00" not in history and Path(history).is_absolute()
    history_db_path = Path(str(history)) if valid_history else mem0_dir / "history.db"
    if "history_db_path" in mem0 and not valid_history:
        errors.append(f"mem0.history_db_path: must be an absolute path string (got {history!r})")

    snapshot = _snapshot(raw.get("snapshot", {}), errors, base_dir, home)
    s3 = _s3(raw.get("s3"), errors)
    daemon = _daemon(raw.get("daemon", {}), errors, base_dir, home)
    if errors:
        raise ConfigError(source, errors)
    return Config(
        source=source,
        mem0_dir=mem0_dir,
        mem0=mem0,
        plugins=plugins,
        state_dir=state_dir,
        work_dir=work_dir,
        app_python=app_python,
        qdrant_path=qdrant_path,
        collection=collection,
        expected_dims=dims,
        history_db_path=history_db_path,
        snapshot=snapshot,
        s3=s3,
        daemon=daemon,
    )


def resolve_secrets(value: Any, environ: Mapping[str, str]) -> Any:
    """Return ``value`` with every ``Secret`` replaced by its value. Reads secret files.

    Raises:
        ConfigError: an environment variable is unset or a secret file is unreadable.
    """
    if isinstance(value, Secret):
        if value.env is not None:
            if value.env not in environ:
                raise ConfigError("environment", [f"{value.env}: environment variable is not set"])
            return environ[value.env]
        assert value.file is not None
        try:
            return Path(value.file).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ConfigError(value.file, [f"secret file unreadable: {error.strerror}"]) from error
    if isinstance(value, Mapping):
        return {key: resolve_secrets(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_secrets(item, environ) for item in value]
    return value


def parse_duration(text: str) -> timedelta:
    """Parse ``"15m"``-style durations (units s, m, h, d). Raises ValueError."""
    match = _DURATION.fullmatch(text)
    if not match or int(match.group(1)) <= 0:
        raise ValueError(f"expected a positive duration like '30s', '15m', '6h', '1d' (got {text!r})")
    seconds = int(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if seconds > 366 * 86400:
        raise ValueError(f"a duration must be at most a year (got {text!r})")
    return timedelta(seconds=seconds)


# --- helpers -------------------------------------------------------------------------------


def _unknown_keys(table: Mapping[str, Any], known: set[str], prefix: str, errors: list[str]) -> None:
    for key in table:
        if key not in known:
            errors.append(f"{prefix}{key}: unknown key (known: {', '.join(sorted(known))})")


def _absolute(value: str, base_dir: Path, home: Path) -> Path:
    path = Path(value)
    if value.startswith("~"):
        path = home / value[2:] if value.startswith("~/") else Path(value).expanduser()
    return path if path.is_absolute() else (base_dir / path).absolute()


def _path(
    table: Mapping[str, Any], key: str, errors: list[str], base: Path, home: Path, prefix: str = ""
) -> Path | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\x00" in value:
        errors.append(f"{prefix}{key}: must be a non-empty path string (got {value!r})")
        return None
    return _absolute(value, base, home)


def _plugins(value: Any, errors: list[str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        errors.append(f"plugins: must be a list of module names (got {value!r})")
        return ()
    bad = [item for item in value if not re.fullmatch(r"[A-Za-z_][\w.]*", item)]
    if bad:
        errors.append(f"plugins: not importable module names: {bad}")
    return tuple(value)


def _mem0_dict(
    raw: Mapping[str, Any], errors: list[str], base_dir: Path, home: Path
) -> dict[str, Any]:
    inline = raw.get("mem0")
    file_key = raw.get("mem0_config_file")
    if inline is not None and file_key is not None:
        errors.append("mem0_config_file: give either mem0_config_file or a [mem0] table, not both")
        return {}
    if file_key is not None:
        path = _path(raw, "mem0_config_file", errors, base_dir, home)
        return _read_mem0_file(path, errors) if path else {}
    if inline is None:
        return {}
    if not isinstance(inline, Mapping):
        errors.append("mem0: must be a table")
        return {}
    resolved: dict[str, Any] = _with_secrets(dict(inline), "mem0", errors)
    return resolved


def _read_mem0_file(path: Path, errors: list[str]) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        errors.append(f"mem0_config_file: cannot read {path}: {error.strerror}")
        return {}
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except ValueError as error:  # json.JSONDecodeError and yaml.YAMLError's common ground
        errors.append(f"mem0_config_file: {path} is not valid: {error}")
        return {}
    except Exception as error:  # noqa: BLE001 - yaml raises its own hierarchy
        errors.append(f"mem0_config_file: {path} is not valid: {error}")
        return {}
    if not isinstance(data, dict):
        errors.append(f"mem0_config_file: {path} must hold a mapping")
        return {}
    resolved: dict[str, Any] = _with_secrets(data, "mem0", errors)
    return resolved


def _with_secrets(value: Any, dotted: str, errors: list[str]) -> Any:
    if isinstance(value, Mapping):
        keys = set(value)
        if keys and keys <= {"env", "file"}:
            if len(keys) != 1 or not all(isinstance(v, str) and v for v in value.values()):
                errors.append(f"{dotted}: a secret is {{env = \"NAME\"}} or {{file = \"PATH\"}}")
                return Secret()
            return Secret(env=value.get("env"), file=value.get("file"))
        return {key: _with_secrets(item, f"{dotted}.{key}", errors) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_secrets(item, f"{dotted}[{i}]", errors) for i, item in enumerate(value)]
    return value


def _positive_int(value: Any, dotted: str, errors: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        errors.append(f"{dotted}: must be a positive integer (got {value!r})")
        return None
    return value


def _check_mem0(
    mem0: Mapping[str, Any], errors: list[str]
) -> tuple[Path, str, tuple[tuple[str, int], ...]]:
    if not isinstance(mem0, Mapping):
        errors.append("mem0: must be a table")
        mem0 = {}
    vector_store = mem0.get("vector_store") or {}
    if not isinstance(vector_store, Mapping):
        errors.append("mem0.vector_store: must be a table")
        vector_store = {}
    provider = vector_store.get("provider", "qdrant")
    if provider != "qdrant":
        errors.append(
            f"mem0.vector_store.provider: memsync supports 'qdrant' only (got {provider!r})"
        )
    vs_config = vector_store.get("config") or {}
    if not isinstance(vs_config, Mapping):
        errors.append("mem0.vector_store.config: must be a table")
        vs_config = {}
    if vs_config.get("url") or vs_config.get("host") or vs_config.get("client"):
        errors.append(
            "mem0.vector_store.config: Qdrant server mode (host/url) is not supported yet; "
            "memsync works on embedded Qdrant (path)"
        )
    path_value = vs_config.get("path", MEM0_DEFAULT_QDRANT_PATH)
    if not isinstance(path_value, str) or not path_value or "\x00" in path_value:
        errors.append(f"mem0.vector_store.config.path: must be a path string (got {path_value!r})")
        path_value = MEM0_DEFAULT_QDRANT_PATH
    collection = vs_config.get("collection_name", MEM0_DEFAULT_COLLECTION)
    if not isinstance(collection, str) or not re.fullmatch(r"(?!\.{1,2}$)[A-Za-z0-9_.-]{1,255}", collection):
        errors.append(f"mem0.vector_store.config.collection_name: invalid name {collection!r}")
        collection = MEM0_DEFAULT_COLLECTION
    dims: list[tuple[str, int]] = []
    model_dims = vs_config.get("embedding_model_dims", MEM0_DEFAULT_DIMS)
    key = "mem0.vector_store.config.embedding_model_dims"
    if (checked := _positive_int(model_dims, key, errors)) is not None:
        dims.append((key, checked))
    embedder = mem0.get("embedder") or {}
    if not isinstance(embedder, Mapping):
        errors.append("mem0.embedder: must be a table")
        embedder = {}
    embedder_config = embedder.get("config")
    if isinstance(embedder_config, Mapping) and embedder_config.get("embedding_dims") is not None:
        key = "mem0.embedder.config.embedding_dims"
        if (checked := _positive_int(embedder_config["embedding_dims"], key, errors)) is not None:
            dims.append((key, checked))
    if not Path(path_value).is_absolute():
        errors.append(
            f"mem0.vector_store.config.path: must be absolute (got {path_value!r}); mem0 resolves "
            "a relative path against the app's working directory, which memsync cannot know"
        )
    return Path(path_value), collection, tuple(dims)


def _snapshot(value: Any, errors: list[str], base: Path, home: Path) -> SnapshotConfig:
    if not isinstance(value, Mapping):
        errors.append("snapshot: must be a table")
        return SnapshotConfig()
    keeps = ("keep_last", "keep_daily", "keep_weekly", "keep_monthly")
    files = ("directory", "encrypt_key_file", "signing_key_file")
    _unknown_keys(value, set(keeps) | set(files), "snapshot.", errors)
    counts: dict[str, int] = {}
    for key in keeps:
        number = value.get(key, 0)
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            errors.append(f"snapshot.{key}: must be an integer >= 0 (got {number!r})")
            number = 0
        counts[key] = number
    directory, encrypt, signing = (_path(value, key, errors, base, home, "snapshot.") for key in files)
    return SnapshotConfig(
        directory=directory,
        keep_last=counts["keep_last"],
        keep_daily=counts["keep_daily"],
        keep_weekly=counts["keep_weekly"],
        keep_monthly=counts["keep_monthly"],
        encrypt_key_file=encrypt,
        signing_key_file=signing,
    )


def _s3(value: Any, errors: list[str]) -> S3Config | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        errors.append("s3: must be a table")
        return None
    keys = ("bucket", "prefix", "region", "endpoint_url", "storage_class", "sse", "sse_kms_key_id",
            "checksums")
    _unknown_keys(value, set(keys), "s3.", errors)
    for key in keys:
        if key in value and not isinstance(value[key], str):
            errors.append(f"s3.{key}: must be a string (got {value[key]!r})")
    bucket = value.get("bucket")
    if not isinstance(bucket, str) or not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
        errors.append(f"s3.bucket: must be a valid bucket name (got {bucket!r})")
    endpoint = value.get("endpoint_url")
    if isinstance(endpoint, str) and not re.match(r"^https?://", endpoint):
        errors.append(f"s3.endpoint_url: must start with http:// or https:// (got {endpoint!r})")
    sse = value.get("sse")
    if sse is not None and sse not in ("AES256", "aws:kms"):
        errors.append(f"s3.sse: must be 'AES256' or 'aws:kms' (got {sse!r})")
    if value.get("checksums", "when_supported") not in ("when_supported", "when_required"):
        errors.append(f"s3.checksums: must be 'when_supported' or 'when_required' (got {value.get('checksums')!r})")
    if sse == "aws:kms" and not value.get("sse_kms_key_id"):
        errors.append("s3.sse_kms_key_id: required when s3.sse is 'aws:kms'")
    strings = {key: value[key] for key in keys if isinstance(value.get(key), str)}
    strings.setdefault("bucket", "invalid")
    strings["prefix"] = strings.get("prefix", "").strip("/")
    return S3Config(**strings)


def _daemon(value: Any, errors: list[str], base: Path, home: Path) -> DaemonConfig:
    if not isinstance(value, Mapping):
        errors.append("daemon: must be a table")
        return DaemonConfig()
    job_keys = {f"{job}_{kind}" for job in _JOBS for kind in ("at", "every")}
    known = job_keys | {"timezone", "upload", "stop_timeout_s", "textfile_path", "ping_url"}
    _unknown_keys(value, known, "daemon.", errors)
    timezone = value.get("timezone", "UTC")
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        errors.append(f"daemon.timezone: unknown time zone {timezone!r}")
        timezone = "UTC"
    jobs = {job: _job(value, job, errors) for job in _JOBS}
    upload = value.get("upload", True)
    if not isinstance(upload, bool):
        errors.append(f"daemon.upload: must be true or false (got {upload!r})")
        upload = True
    stop = value.get("stop_timeout_s", 120)
    if isinstance(stop, bool) or not isinstance(stop, int | float) or not 0 < stop < 86400:
        errors.append(f"daemon.stop_timeout_s: must be a positive number of seconds (got {stop!r})")
        stop = 120
    ping = value.get("ping_url")
    if ping is not None and (not isinstance(ping, str) or not re.match(r"^https?://", ping)):
        errors.append("daemon.ping_url: must be an http(s) URL")
        ping = None
    return DaemonConfig(
        timezone=timezone,
        jobs={job: schedule for job, schedule in jobs.items() if schedule is not None},
        upload=upload,
        stop_timeout_s=float(stop),
        textfile_path=_path(value, "textfile_path", errors, base, home, "daemon."),
        ping_url=ping,
    )


def _job(value: Mapping[str, Any], job: str, errors: list[str]) -> JobSchedule | None:
    at, every = value.get(f"{job}_at"), value.get(f"{job}_every")
    if at is not None and every is not None:
        errors.append(f"daemon.{job}_at: give {job}_at or {job}_every, not both")
        return None
    if at is not None:
        match = _TIME_OF_DAY.fullmatch(at) if isinstance(at, str) else None
        if not match:
            errors.append(f"daemon.{job}_at: must be a time 'HH:MM' (got {at!r})")
            return None
        return JobSchedule(at=time(int(match.group(1)), int(match.group(2))))
    if every is not None:
        try:
            return JobSchedule(every=parse_duration(str(every)))
        except ValueError as error:
            errors.append(f"daemon.{job}_every: {error}")
    return None
