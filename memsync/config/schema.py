"""The one declaration of memsync's configuration: every key, its type, default and meaning.

Each key is declared once, as a pydantic v2 field with a one-line ``description`` and its
constraints; validation (``memsync.config.load``), the reference page
(``memsync.config.reference``) and the example file's test all read these models. Validation
is strict (TOML types, no coercion: ``"3"`` is not an integer, ``true`` is not a number).
Relative paths resolve against the config file's directory and ``~`` against ``$HOME``, both
given in the validation context (``{"base_dir": Path, "home": Path}``).

The ``[mem0]`` models (``memsync.config.mem0_settings``) declare only the keys memsync reads
from mem0's own dict (mem0ai 2.2.1 ``mem0/configs``); every other key there is mem0's and
passes through unchecked.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import time, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
)

from memsync.config.fields import (
    _BUCKET_NAME,
    AppriseUrl,
    ConfigPath,
    Duration,
    HttpUrl,
    TimeOfDay,
    _file_mode,
    _matching,
    _plugins,
    _problem,
    _time_zone,
    key,
    parse_duration,
)
from memsync.config.mem0_settings import (
    MEM0_DEFAULT_COLLECTION,
    MEM0_DEFAULT_DIMS,
    MEM0_DEFAULT_QDRANT_PATH,
    EmbedderConfigSettings,
    EmbedderSettings,
    Mem0Settings,
    PGVectorSettings,
    QdrantSettings,
    VectorStoreConfig,
    VectorStoreSettings,
    pgvector_problems,
)

__all__ = [
    "MEM0_DEFAULT_COLLECTION", "MEM0_DEFAULT_DIMS", "MEM0_DEFAULT_QDRANT_PATH", "AppConfig",
    "CheckConfig", "ConfigFile", "DaemonConfig", "EmbedderConfigSettings", "EmbedderSettings", "JobSchedule",
    "Mem0Settings", "MigrateConfig", "PGVectorSettings", "ProtectConfig", "QdrantSettings", "S3Config", "VectorStoreConfig", "SnapshotConfig",
    "VectorStoreSettings", "find_cross_field_problems",
]  # fmt: skip

JOB_NAMES = ("check", "prune", "snapshot", "retention", "verify", "replica")


class _Section(BaseModel):
    """A memsync-owned table: strict TOML types, unknown keys refused, frozen."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SnapshotConfig(_Section):
    """``[snapshot]``: where snapshots live and how many to keep."""

    directory: ConfigPath | None = key(None, "where dated snapshot directories are written")
    keep_last: int = key(0, "retention: the newest N snapshots", ge=0)
    keep_hourly: int = key(
        0, "retention: the newest snapshot of each of the last N hours (UTC)", ge=0
    )
    keep_daily: int = key(
        0, "retention: the newest snapshot of each of the last N days (UTC)", ge=0
    )
    keep_weekly: int = key(0, "retention: ... of each of the last N ISO weeks", ge=0)
    keep_monthly: int = key(0, "retention: ... of each of the last N months", ge=0)
    keep_yearly: int = key(0, "retention: ... of each of the last N years", ge=0)
    keep_within: Duration | None = key(
        None,
        "retention: every snapshot younger than this, counted from the newest one",
        toml="duration '7d'/'12h'",
    )
    keep_safety_days: int = key(
        7,
        "retention: days a safety snapshot (taken by reconcile, forget or repair-meta before "
        "they change the stores) is kept, from its own time; the other keep_* rules do not "
        "count safety snapshots",
        ge=0,
        le=36500,  # a century; beyond timedelta's range the retention run itself failed
    )
    max_pending_uploads: int = key(
        3,
        "snapshots that failed to upload kept for the next run; with this many pending, "
        "no new snapshot is captured until they are uploaded",
        ge=1,
        le=1000,
    )
    tripwire_percent: int = key(
        20,
        "mass-deletion tripwire: a drop of at least this % of a scope's memories (or of all) "
        "since the previous snapshot, together with tripwire_memories, trips it; 0 disables",
        ge=0,
        le=100,
    )
    tripwire_memories: int = key(
        50,
        "mass-deletion tripwire: ... and of at least this many memories; 0 disables",
        ge=0,
    )
    encrypt_key_file: ConfigPath | None = key(None, "client-side encryption key file (optional)")
    signing_key_file: ConfigPath | None = key(
        None, "HMAC-SHA256 key file signing the manifest (optional)"
    )
    verify_cycle: Duration = key(
        timedelta(days=30),
        "scheduled verification (`snapshot verify --scheduled`, the `verify` job) re-reads "
        "every stored byte at least once per this period",
        toml="duration '30s'/'15m'/'6h'/'1d'",
        shown='`"30d"`',
        gt=timedelta(0),
    )


def _strip_slashes(value: Any) -> Any:
    return value.strip("/") if isinstance(value, str) else value


class S3Config(_Section):
    """``[s3]``: the bucket snapshots are uploaded to (credentials: boto3's own chain only)."""

    bucket: Annotated[str, _matching(_BUCKET_NAME, "must be a valid bucket name")] = key(
        ..., "the bucket (required when [s3] is present)"
    )
    prefix: Annotated[str, BeforeValidator(_strip_slashes)] = key(
        "", "objects go under `s3://<bucket>/<prefix>/<snapshot id>/`"
    )
    region: str | None = key(None, "the bucket's region (default: boto3's)")
    endpoint_url: HttpUrl | None = key(None, "S3-compatible services: their endpoint")
    storage_class: str | None = key(None, "e.g. STANDARD_IA (default: the bucket's)")
    sse: Literal["AES256", "aws:kms"] | None = key(None, "server-side encryption")
    sse_kms_key_id: str | None = key(None, "the KMS key; required when sse is 'aws:kms'")
    checksums: Literal["when_supported", "when_required"] = key(
        "when_supported",
        "boto3's CRC checksums on uploads; 'when_required' for services that "
        "reject them (Cloudflare R2, some MinIO)",
    )
    timeout_s: float | None = key(
        None,
        "seconds to wait to connect and for each read before a retry (default: 10 to "
        "connect, 60 to read); a request that keeps timing out exits 11",
        gt=0,
        lt=3600,
        allow_inf_nan=False,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSchedule:
    """When a daemon job runs: at a time of day, or every interval (seconds)."""

    at: time | None = None
    every: timedelta | None = None


_AT = "string 'HH:MM'"
_EVERY = "duration '30s'/'15m'/'6h'/'1d'"
_EVERY_SHORT = "duration '1s'/'15m'/'24h'"


class DaemonConfig(_Section):
    """``[daemon]``: the schedule of the daemon's jobs; each job takes ``*_at`` or ``*_every``."""

    timezone: Annotated[str, BeforeValidator(_time_zone)] = key(
        "UTC", "time zone of the `*_at` times"
    )
    check_at: TimeOfDay | None = key(None, "run check daily at this time", toml=_AT)
    check_every: Duration | None = key(None, "run check at this interval", toml=_EVERY)
    prune_at: TimeOfDay | None = key(None, "run prune daily at this time", toml=_AT)
    prune_every: Duration | None = key(None, "run prune at this interval", toml=_EVERY)
    snapshot_at: TimeOfDay | None = key(None, "run snapshot create daily at this time", toml=_AT)
    snapshot_every: Duration | None = key(None, "run snapshot create at this interval", toml=_EVERY)
    retention_at: TimeOfDay | None = key(None, "run snapshot prune daily at this time", toml=_AT)
    retention_every: Duration | None = key(None, "run snapshot prune at this interval", toml=_EVERY)
    verify_at: TimeOfDay | None = key(
        None, "run snapshot verify --scheduled daily at this time", toml=_AT
    )
    verify_every: Duration | None = key(
        None, "run snapshot verify --scheduled at this interval", toml=_EVERY
    )
    replica_at: TimeOfDay | None = key(
        None, "run protect --verify (restore the replicas into scratch, check) daily", toml=_AT
    )
    replica_every: Duration | None = key(
        None,
        "run protect --verify (restore the replicas into scratch, check) at this interval",
        toml=_EVERY,
    )
    upload: bool = key(True, "upload each scheduled snapshot to [s3]")
    stop_timeout_s: float = key(
        120.0,
        "on SIGTERM, how long the current job may take to finish (seconds)",
        gt=0,
        lt=86400,
        allow_inf_nan=False,
    )
    textfile_path: ConfigPath | None = key(None, "Prometheus textfile collector file")
    textfile_mode: Annotated[str, BeforeValidator(_file_mode)] = key(
        "0644",
        "permissions of the textfile, whatever the umask (node_exporter must read it)",
        toml="octal string like '0640'",
    )
    ping_url: HttpUrl | None = key(
        None, "healthchecks-style URL; `/start` and `/fail` appended, `{job}` replaced", secret=True
    )
    notify: list[AppriseUrl] = key(
        [],
        "Apprise URLs (ntfy://, mailto://, json://, ...) told when a job fails, finds problems, "
        "trips the mass-deletion tripwire or recovers",
        toml="array of strings",
        secret=True,
    )

    @property
    def textfile_permissions(self) -> int:
        """``textfile_mode`` as a number for ``os.chmod`` (``"0644"`` -> ``0o644``)."""
        return int(self.textfile_mode, 8)

    @property
    def jobs(self) -> Mapping[str, JobSchedule]:
        """The scheduled jobs by name, in ``JOB_NAMES`` order (``*_at`` wins when both are set)."""
        found: dict[str, JobSchedule] = {}
        for name in JOB_NAMES:
            at, every = getattr(self, f"{name}_at"), getattr(self, f"{name}_every")
            if at is not None or every is not None:
                found[name] = JobSchedule(at=at, every=None if at is not None else every)
        return found


def _argv(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        if not value:
            raise _problem("must name a program: a non-empty list of strings")
        if any(not item or "\x00" in item for item in value):
            raise _problem("every item must be a non-empty string")
    return value


Argv = Annotated[list[str], BeforeValidator(_argv)]
_ARGV = "array of strings (argv)"


class AppConfig(_Section):
    """``[app]``: how memsync writes while the app holds the store (agent, window, queue)."""

    python: ConfigPath | None = key(
        None,
        "the app's interpreter (a venv's bin/python): every write through mem0 runs with it, "
        "so with the app's own mem0ai and qdrant-client",
        shown="learned from the app's agent or from the process holding the store; "
        "else writes are refused",
    )
    python_path: list[ConfigPath] = key(
        [],
        "directories put first on the app interpreter's import path for memsync's writes: "
        "where the app's own modules and plugins live when they are not installed in its "
        "environment (its PYTHONPATH or working directory)",
        toml="array of strings",
    )
    agent_socket: ConfigPath | None = key(
        None,
        "the Unix socket of memsync.agent inside the app",
        shown="the `memsync-agent.sock` the store's holder listens on",
    )
    stop_command: Argv | None = key(
        None,
        'stops the app for a maintenance window, e.g. `["systemctl", "stop", '
        '"agent.service"]` (with start_command)',
        toml=_ARGV,
    )
    start_command: Argv | None = key(
        None,
        "starts the app again after a window, always (also on failure, timeout, SIGTERM)",
        toml=_ARGV,
    )
    max_downtime_s: float = key(
        60.0,
        "bound on a maintenance window, from the stop issued to the start returned (seconds)",
        gt=0,
        lt=86400,
        allow_inf_nan=False,
    )
    max_pending: Duration = key(
        timedelta(hours=24),
        "a queued erasure older than this is an error in doctor",
        toml=_EVERY,
        shown='`"24h"`',
    )
    pause_lease_s: float = key(
        30.0,
        "how long a quiesced capture may hold the app's writes (seconds; the app resumes "
        "on its own after it)",
        gt=0,
        lt=3600,
        allow_inf_nan=False,
    )

    @property
    def window(self) -> bool:
        """Whether a maintenance window is configured (both commands)."""
        return self.stop_command is not None and self.start_command is not None


class CheckConfig(_Section):
    """``[check]``: how a capture tells a write in flight from a failed one."""

    in_flight_margin_s: float = key(
        2.0,
        "how long before a capture a write may have started and still be in flight (seconds): "
        "a disagreement whose memory changed within it is `in-flight`, and check waits it out "
        "and captures once more before calling it an error; raise it for an embedder slower "
        "than this",
        ge=0,
        le=300,
        allow_inf_nan=False,
    )


class MigrateConfig(_Section):
    """``[migrate]``: what ``memsync migrate`` keeps after a switch."""

    keep_source_days: int = key(
        7,
        "days the old store is kept after `migrate --switch` before `migrate --cleanup` "
        "may remove it",
        ge=0,
    )


class RestoreConfig(_Section):
    """``[restore]``: what ``memsync restore`` keeps of the stores it replaced."""

    keep_pre_restore: int | None = key(
        None,
        "pre-restore copies (`<path>.pre-restore-<id>`, the files each restore moved aside) "
        "kept per store, newest first by when they were moved aside; a restore removes older "
        "ones after its swap, only those a restore made (listed in "
        "`<state_dir>/pre-restore.json`). Unset: every one is kept",
        ge=1,
        shown="unset: all kept",
    )


class ProtectConfig(_Section):
    """``[protect]``: continuous protection of the SQLite files by Litestream, run by the daemon."""

    litestream: str = key(
        "litestream",
        "the Litestream 0.3 binary: a path, or a name looked up on PATH",
    )
    directory: ConfigPath | None = key(
        None,
        "replicate to this directory: one replica per SQLite file under it (not with s3)",
    )
    s3: bool = key(
        False,
        "replicate to the [s3] bucket, under `<[s3] prefix>/<prefix>/` (not with directory)",
    )
    prefix: Annotated[str, BeforeValidator(_strip_slashes)] = key(
        "litestream", "with s3: the replicas go under this prefix inside [s3] prefix"
    )
    sync_interval: Duration = key(
        timedelta(seconds=1),
        "how often Litestream ships each file's new WAL frames (its sync-interval)",
        toml=_EVERY_SHORT,
        shown='`"1s"`',
        gt=timedelta(0),
    )
    retention: Duration = key(
        timedelta(hours=24),
        "how long Litestream keeps older generations and WAL (its retention); restore points "
        "go back this far; never longer than the [snapshot] keep_* rules keep snapshots (the "
        "default is capped to that, a longer value is refused)",
        toml=_EVERY_SHORT,
        shown='`"24h"`',
        gt=timedelta(0),
    )
    max_lag_s: float = key(
        60.0,
        "doctor's protection check fails when a file's replica is behind its writes by more "
        "than this (seconds), or is missing",
        gt=0,
        lt=86400,
        allow_inf_nan=False,
    )


class ConfigFile(_Section):
    """The whole TOML document, validated but not yet resolved (see ``memsync.config.Config``)."""

    mem0_dir: ConfigPath | None = key(
        None,
        "the app's MEM0_DIR (mem0 keeps config.json and, with "
        "telemetry on, migrations_qdrant/ there)",
        shown="`$MEM0_DIR`, else `~/.mem0`",
    )
    mem0_config_file: ConfigPath | None = key(
        None,
        "JSON, or YAML by a .yaml/.yml suffix (also before .bak), file holding the mem0 dict, "
        "instead of [mem0] (not both)",
    )
    plugins: Annotated[list[str], BeforeValidator(_plugins)] = key(
        [],
        "modules imported before mem0.Memory is built (custom providers)",
        toml="array of strings",
    )
    state_dir: ConfigPath | None = key(
        None,
        "memsync's state (locks, journals, job times)",
        shown="`$STATE_DIRECTORY`, else `~/.local/state/memsync`",
    )
    work_dir: ConfigPath | None = key(
        None,
        "temporary copies: the stores for check and doctor, the snapshot files reconcile and "
        "the tripwire read (removed after)",
        shown="`<state_dir>/tmp`",
    )
    app_python: ConfigPath | None = key(None, "older spelling of [app] python (not both)")
    mem0: Mem0Settings = Field(default_factory=Mem0Settings, description="mem0's own dict")
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig, description="snapshots")
    s3: S3Config | None = Field(None, description="the upload target (absent: no uploads)")
    daemon: DaemonConfig = Field(default_factory=DaemonConfig, description="the daemon's schedule")
    app: AppConfig = Field(default_factory=AppConfig, description="writing while the app runs")
    check: CheckConfig = Field(
        default_factory=CheckConfig, description="how check tells writes in flight"
    )
    migrate: MigrateConfig = Field(
        default_factory=MigrateConfig, description="after a migration's switch"
    )
    restore: RestoreConfig = Field(
        default_factory=RestoreConfig, description="what a restore keeps aside"
    )
    protect: ProtectConfig | None = Field(
        None, description="continuous protection by Litestream (absent: none)"
    )


# The keys of mem0's QdrantConfig and PGVectorConfig in every mem0ai release memsync is tested
# with (0.1.118 to 2.2.1; ``https`` since 2.1.0): mem0 refuses any other ("Extra fields not
# allowed") when the app starts.
MEM0_STORE_KEYS = {
    "qdrant": frozenset({
        "collection_name", "embedding_model_dims", "client", "host", "port", "path", "url",
        "api_key", "https", "on_disk",
    }),
    "pgvector": frozenset({
        "dbname", "collection_name", "embedding_model_dims", "user", "password", "host", "port",
        "diskann", "hnsw", "minconn", "maxconn", "sslmode", "connection_string",
        "connection_pool",
    }),
}  # fmt: skip


def _mistyped_store_keys(provider: str, store_config: Mapping[str, Any]) -> list[str]:
    """A key of ``[mem0.vector_store.config]`` close to one of mem0's, and not one of them.

    A typo (``colection_name``) that mem0 refuses at the app's start, while memsync would read
    the default in its place. A key near none of mem0's passes (a newer mem0's own).
    """
    known = MEM0_STORE_KEYS.get(provider)
    if known is None:
        return []
    problems = []
    for name in sorted(str(k) for k in store_config if k not in known):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.7)
        if close:
            problems.append(
                f"mem0.vector_store.config.{name}: not a key of mem0's {provider} config (did "
                f"you mean {close[0]}?); mem0 refuses it when the app starts"
            )
    return problems


def _other_providers_keys(
    provider: str, store: Mapping[str, Any] | None, store_config: Mapping[str, Any]
) -> list[str]:
    """Keys of ``[mem0.vector_store.config]`` that only another provider's config has.

    A pgvector connection under the default provider (``provider`` missing or misspelt) would
    make memsync read an embedded Qdrant at /tmp/qdrant; mem0 refuses the key at the app's start.
    """
    known = MEM0_STORE_KEYS.get(provider)
    if known is None:
        return []
    problems = []
    for other, keys in sorted(MEM0_STORE_KEYS.items()):
        foreign = sorted(str(k) for k in store_config if k in keys and k not in known)
        if other != provider and foreign:
            given = store is not None and "provider" in store
            problems.append(
                f"mem0.vector_store.config.{foreign[0]}: a key of mem0's {other} config, but "
                f"the provider is {provider}"
                + ("" if given else " (mem0.vector_store.provider is not set)")
                + f': set provider = "{other}" in [mem0.vector_store]'
            )
    return problems


def find_cross_field_problems(raw: Mapping[str, Any], mem0: Any) -> list[str]:
    """Rules that tie several keys together, on the raw document (after per-field checks). Pure.

    Args:
        raw: the TOML document as read.
        mem0: the mem0 dict, whichever way it was given (``[mem0]`` or ``mem0_config_file``).
    """
    problems: list[str] = []
    if raw.get("mem0_config_file") is not None and raw.get("mem0") is not None:
        problems.append(
            "mem0_config_file: give either mem0_config_file or a [mem0] table, not both"
        )
    store = mem0.get("vector_store") if isinstance(mem0, Mapping) else None
    store_config = store.get("config") if isinstance(store, Mapping) else None
    provider = store.get("provider", "qdrant") if isinstance(store, Mapping) else "qdrant"
    if (
        provider == "qdrant"
        and isinstance(store_config, Mapping)
        and any(store_config.get(k) for k in ("url", "host", "client"))
    ):
        problems.append(
            "mem0.vector_store.config: Qdrant server mode (host/url) is not supported "
            "yet; memsync works on embedded Qdrant (path) and pgvector"
        )
    if provider == "pgvector" and isinstance(store_config, Mapping):
        problems += pgvector_problems(store_config)
    if isinstance(store_config, Mapping):
        problems += _mistyped_store_keys(provider, store_config)
        problems += _other_providers_keys(provider, store, store_config)
    if isinstance(store, Mapping):
        for name in sorted(str(k) for k in store if k not in ("provider", "config")):
            close = difflib.get_close_matches(name, ["config", "provider"], n=1, cutoff=0.7)
            if close:
                problems.append(
                    f"mem0.vector_store.{name}: not a key of mem0's vector store (did you mean "
                    f"{close[0]}?); without it mem0 and memsync use "
                    + ("embedded Qdrant at /tmp/qdrant" if close[0] == "provider" else "defaults")
                )
    s3 = raw.get("s3")
    if isinstance(s3, Mapping) and s3.get("sse") == "aws:kms" and not s3.get("sse_kms_key_id"):
        problems.append("s3.sse_kms_key_id: required when s3.sse is 'aws:kms'")
    daemon = raw.get("daemon")
    daemon = daemon if isinstance(daemon, Mapping) else {}
    for name in JOB_NAMES:
        if daemon.get(f"{name}_at") is not None and daemon.get(f"{name}_every") is not None:
            problems.append(f"daemon.{name}_at: give {name}_at or {name}_every, not both")
    app = raw.get("app")
    app = app if isinstance(app, Mapping) else {}
    if raw.get("app_python") is not None and app.get("python") is not None:
        problems.append("app_python: give [app] python or app_python, not both")
    problems += _protect_problems(raw)
    given = [name for name in ("stop_command", "start_command") if app.get(name) is not None]
    if len(given) == 1:
        other = "start_command" if given == ["stop_command"] else "stop_command"
        problems.append(f"app.{other}: required with app.{given[0]} (a window needs both)")
    return problems


# restic's calendar rules, each as the age of the oldest snapshot it keeps
_HORIZON_RULES = (
    ("keep_hourly", timedelta(hours=1)),
    ("keep_daily", timedelta(days=1)),
    ("keep_weekly", timedelta(weeks=1)),
    ("keep_monthly", timedelta(days=31)),
    ("keep_yearly", timedelta(days=366)),
)


def retention_horizon(snapshot: Mapping[str, Any]) -> timedelta | None:
    """How far back the ``[snapshot]`` keep_* rules keep restore points, or None. Pure.

    The longest of ``keep_within`` and N hours, days, weeks, months (31 days) or years (366
    days) of ``keep_hourly`` ... ``keep_yearly``; None when no time rule is set (``keep_last``
    counts snapshots, whose age depends on how often they are taken). Takes the raw table or
    the section's fields (``SnapshotConfig.model_dump()``); values that do not parse count
    as unset (their own check reports them).
    """
    found = []
    within = snapshot.get("keep_within")
    if isinstance(within, timedelta):
        found.append(within)
    elif within is not None:
        with contextlib.suppress(ValueError):
            found.append(parse_duration(str(within)))
    for name, unit in _HORIZON_RULES:
        count = snapshot.get(name)
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            found.append(count * unit)
    return max(found, default=None)


def _go(span: timedelta) -> str:
    """``span`` in the largest whole unit (``"36h"``, ``"7d"``), as the config spells it. Pure."""
    seconds = int(span.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _protect_problems(raw: Mapping[str, Any]) -> list[str]:
    """``[protect]``: one replica destination, s3 with ``[s3]``, retention within the snapshots'.

    An explicit ``retention`` longer than ``retention_horizon`` is refused. Pure.
    """
    protect = raw.get("protect")
    if not isinstance(protect, Mapping):
        return []
    if protect.get("directory") is not None and protect.get("s3") is True:
        return ["protect.directory: give directory or s3 = true, not both"]
    if protect.get("directory") is None and protect.get("s3") is not True:
        return ['protect: name the replica: directory = "PATH", or s3 = true with an [s3] table']
    if protect.get("s3") is True and not isinstance(raw.get("s3"), Mapping):
        return ["protect.s3: needs an [s3] table (the bucket the replicas go to)"]
    snapshot = raw.get("snapshot")
    horizon = retention_horizon(snapshot) if isinstance(snapshot, Mapping) else None
    try:
        kept = parse_duration(str(protect["retention"])) if "retention" in protect else None
    except ValueError:
        kept = None  # the field's own check reports it
    if kept is not None and horizon is not None and kept > horizon:
        return [
            f"protect.retention: {protect['retention']} keeps replica restore points older than "
            f"the oldest snapshot [snapshot] keep_* keeps ({_go(horizon)}): what the app deleted "
            f"would outlive the snapshots in the replicas; set at most {_go(horizon)}, or keep "
            "snapshots longer"
        ]
    return []
