"""Continuous protection: the Litestream configuration of a deployment, and what its replicas hold.

Litestream (0.3) streams each SQLite file's WAL to a replica; memsync writes its configuration
and reads its replicas, and leaves the shipping to it. ``litestream_config`` is pure: one
``dbs`` entry per live SQLite file in WAL mode (every collection's ``storage.sqlite``, then
history.db), each with one replica, a directory or the ``[s3]`` bucket (JSON, which is YAML).
``read_status`` reads the replicas' layout (Litestream 0.3's
``generations/<generation>/{snapshots,wal}/``): per file, the newest WAL segment shipped, when,
the lag behind the file's last write and the bytes shipped in the last hour. ``segment_salts``
reads a WAL segment's first 56 bytes (LZ4, decoded by ``lz4_prefix``: the WAL header's and the
first frame's salts), so a restore can refuse a segment SQLite would skip. The daemon runs
Litestream with the file ``config_file`` names and records its process in ``protect-state.json``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.config import Config, ProtectConfig
from memsync.config.schema import retention_horizon
from memsync.errors import ConfigError
from memsync.jobs.state import daemon_pid
from memsync.stores import journal_mode
from memsync.stores.journal_mode import WAL, LiveFile
from memsync.stores.vector_store import VectorStore

if TYPE_CHECKING:
    from memsync.s3.store import ObjectStore

CONFIG_FILE = "litestream.yml"
STATE_FILE = "protect-state.json"
HOLD_FILE = "protect-hold.json"  # a memsync process that needs Litestream stopped (an erasure)
ERASURE_FILE = "protect-erasure.json"  # the Litestream an erasure runs itself (no daemon)
ERASURE_ENV = "MEMSYNC_ERASURE_TOKEN"  # in that Litestream's environment: its record's token
HOUR = timedelta(hours=1)
# Litestream 0.3's replica layout: generations/<16 hex>/wal/<index>_<offset>.wal.lz4 (hex)
SEGMENT = re.compile(r"generations/([0-9a-f]{16})/(wal|snapshots)/([0-9a-f]{8})(?:_([0-9a-f]{8}))?")


def require_litestream(config: Config) -> str:
    """``[protect] litestream``'s path and version (``v0.3.x``); runs ``litestream version``.

    Raises:
        ConfigError: the binary is not found, does not run, or is not Litestream 0.3 (whose
            replica layout memsync reads).
    """
    protect = config.protect
    assert protect is not None
    found = shutil.which(protect.litestream)
    hint = "install Litestream 0.3 (docs/how-to/continuous-protection.md) or set its path"
    if found is None:
        raise ConfigError(
            config.source,
            [f"protect.litestream: {protect.litestream!r} is not an executable file or on PATH"],
            hint,
        )
    try:
        argv = [found, "version"]  # the configured binary, no shell
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)  # noqa: S603
        answer = done.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        answer = str(error)
    if not answer.startswith("v0.3."):
        raise ConfigError(
            config.source,
            [f"protect.litestream: {found} is not Litestream 0.3 (`version` said {answer!r})"],
            hint,
        )
    return f"{found} {answer}"


def config_file(config: Config) -> Path:
    """Where the Litestream configuration of the deployment is written (the state directory)."""
    return config.state_dir / CONFIG_FILE


def replica_name(live: LiveFile) -> str:
    """The file's replica under the destination: ``history.db``, ``collection/<name>``."""
    return live.label.replace("collection ", "collection/", 1)


def _go_duration(value: timedelta) -> str:
    return f"{value.total_seconds():g}s"


def replica_retention(protect: ProtectConfig, config: Config) -> timedelta:
    """Litestream's retention: ``[protect] retention``, capped to the snapshots' horizon. Pure.

    Replica restore points never reach further back than the oldest snapshot the ``[snapshot]``
    keep_* rules keep (``retention_horizon``): what the app deleted does not outlive the
    snapshots in the replicas. A longer explicit value is refused at load; the default (24h)
    is capped here.
    """
    horizon = retention_horizon(config.snapshot.model_dump())
    return protect.retention if horizon is None else min(protect.retention, horizon)


def replica_of(protect: ProtectConfig, config: Config, name: str) -> dict[str, Any]:
    """One file's Litestream replica entry (sync interval and retention included). Pure."""
    timing = {
        "sync-interval": _go_duration(protect.sync_interval),
        "retention": _go_duration(replica_retention(protect, config)),
    }
    if protect.directory is not None:
        return {"type": "file", "path": str(protect.directory / name), **timing}
    assert config.s3 is not None  # validated: [protect] s3 needs [s3]
    s3 = config.s3
    entry: dict[str, Any] = {
        "type": "s3",
        "bucket": s3.bucket,
        "path": "/".join(p for p in (s3.prefix, protect.prefix, name) if p),
    }
    if s3.region is not None:
        entry["region"] = s3.region
    if s3.endpoint_url is not None:
        entry.update({"endpoint": s3.endpoint_url, "force-path-style": True})
    return {**entry, **timing}


def replica_where(protect: ProtectConfig, config: Config, name: str) -> str:
    """The replica of ``name`` for messages: a directory, or ``s3://bucket/key``. Pure."""
    entry = replica_of(protect, config, name)
    if entry["type"] == "file":
        return str(entry["path"])
    return f"s3://{entry['bucket']}/{entry['path']}"


def litestream_config(
    protect: ProtectConfig, config: Config, files: Sequence[LiveFile]
) -> dict[str, Any]:
    """Litestream's configuration for ``files`` in WAL mode (the others wait for a switch). Pure."""
    return {
        "dbs": [
            {"path": str(live.path), "replicas": [replica_of(protect, config, replica_name(live))]}
            for live in files
            if live.mode == WAL
        ]
    }


def render(document: Mapping[str, Any]) -> str:
    """The configuration's text (JSON is YAML: Litestream reads it as is)."""
    return json.dumps(document, indent=2) + "\n"


def write_config(path: Path, text: str) -> bool:
    """Replace ``path`` with ``text`` atomically when it differs; True when it changed."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
    return True


def running_pid(config: Config) -> int | None:
    """The Litestream process the daemon recorded, when it still runs; else None. Reads only.

    Its command line must be ``replicate`` with this deployment's configuration file.
    """
    try:
        recorded = json.loads((config.state_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pid = recorded.get("pid") if isinstance(recorded, dict) else None
    if not isinstance(pid, int):
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
        with open(f"/proc/{pid}/stat", "rb") as handle:
            zombie = handle.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except OSError:
        return None
    ours = b"replicate" in argv and str(config_file(config)).encode() in argv
    return pid if ours and not zombie else None


def started_at(pid: int) -> int | None:
    """The process's start time (clock ticks after boot), None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None
    return None if fields[0] == b"Z" else int(fields[19])


def _erasure_litestream(config: Config, pid: int, record: dict[str, Any]) -> bool:
    """``pid`` is the Litestream ``record`` names: its command line, start time and token."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"replicate" not in argv or str(config_file(config)).encode() not in argv:
            return False
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    recorded = record.get("started")
    token = f"{ERASURE_ENV}={record.get('token')}".encode()
    return token in environ and (recorded is None or started_at(pid) == recorded)


def erasure_litestream(config: Config) -> tuple[int | None, int | None] | None:
    """The Litestream an erasure started itself (``protect-erasure.json``), and that erasure.

    ``(pid, by)``: the Litestream when it still runs, proven by its start time, command line
    and the record's token in its environment (None: gone); the memsync process that started
    it when that still runs (None: it was killed: the Litestream is an orphan). None when
    nothing is recorded. Reads only.
    """
    try:
        record = json.loads((config.state_dir / ERASURE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    by, pid = record.get("by"), record.get("pid")
    holder = by if isinstance(by, int) and started_at(by) == record.get("by_started") else None
    if isinstance(pid, int):  # recorded once started
        candidates = [pid]
    else:  # killed between its start and the record: look for its token
        candidates = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    found = next((c for c in candidates if _erasure_litestream(config, c, record)), None)
    return found, holder


def meta_dir(path: Path) -> Path:
    """Litestream 0.3's local state of ``path`` (its generation and shadow WAL), beside it."""
    return path.parent / f".{path.name}-litestream"


def held_by(config: Config) -> tuple[int, str] | None:
    """The live memsync process holding Litestream stopped, and its hold's token; or None.

    ``protect-hold.json`` = ``{"pid", "token"}``: each hold has a new token, which the daemon
    echoes in ``protect-state.json`` (``hold``) once Litestream is stopped for it. A hold whose
    process is gone is ignored: a killed memsync never leaves protection off.
    """
    try:
        recorded = json.loads((config.state_dir / HOLD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pid = recorded.get("pid") if isinstance(recorded, dict) else None
    if not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid, str(recorded.get("token"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaObject:
    """One object of a replica: its key below the replica, size in bytes, modification time."""

    key: str
    size: int
    modified: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class FileProtection:
    """One SQLite file's protection.

    Attributes:
        label: ``history.db`` or ``collection <name>``.
        path: the live file.
        replica: where its replica is (a directory or ``s3://bucket/key``).
        journal_mode: ``wal`` or ``rollback`` (Litestream replicates WAL-mode files only).
        replicated: the replica holds a generation of it.
        generation: Litestream's current generation (None: none yet).
        position: the newest WAL segment shipped, ``<generation>/<index>_<offset>`` (hex).
        shipped_at: when that segment (or snapshot) reached the replica.
        lag_s: seconds between the file's last write and the newest shipment when the file
            changed after it (0: nothing unshipped); None when not replicated.
        bytes_last_hour: bytes shipped to the replica in the last hour (snapshots and WAL).
        problem: why the file is not protected, or None.
        local_generation: the generation this host's Litestream ships (its ``generation``
            file beside the live file), None before it ran.
        generation_changed: the replica's generation is not that one, unexpectedly
            (``replica-generation-changed``: another Litestream, or the replica replaced).
    """

    label: str
    path: Path
    replica: str
    journal_mode: str | None
    replicated: bool
    generation: str | None
    position: str | None
    shipped_at: datetime | None
    lag_s: float | None
    bytes_last_hour: int
    problem: str | None
    local_generation: str | None = None
    generation_changed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The file's entry in ``protect --status --json``'s ``files``."""
        return {
            "label": self.label,
            "path": str(self.path),
            "replica": self.replica,
            "journal_mode": self.journal_mode,
            "replicated": self.replicated,
            "generation": self.generation,
            "position": self.position,
            "shipped_at": self.shipped_at.isoformat() if self.shipped_at else None,
            "lag_s": self.lag_s,
            "bytes_last_hour": self.bytes_last_hour,
            "problem": self.problem,
            "local_generation": self.local_generation,
        }


def judge_file(
    live: LiveFile,
    replica: str,
    objects: Iterable[ReplicaObject],
    changed_at: datetime,
    now: datetime,
    local: tuple[str, datetime] | None = None,
    settle_s: float = 60.0,
) -> FileProtection:
    """One file's protection from its replica's objects and its last write. Pure.

    ``local``: the generation this host's Litestream ships and when it started
    (``local_generation``). The replica's newest generation is pinned to it: another one there
    written after it started, or it still absent ``settle_s`` seconds after it started, is an
    unexpected change (``replica-generation-changed``). A new generation of this host's
    Litestream (an erasure's, or after a restore) changes ``local`` first: expected.
    """
    listed = [(found, o) for o in objects if (found := SEGMENT.search(o.key))]
    recent = sum(o.size for _, o in listed if o.modified >= now - HOUR)
    if live.mode != WAL:
        problem = f"{live.label} is in {live.mode or 'no'} journal mode: Litestream needs WAL"
    elif not listed:
        problem = f"its replica {replica} holds no generation yet"
    else:
        problem = None
    unreplicated = FileProtection(
        label=live.label,
        path=live.path,
        replica=replica,
        journal_mode=live.mode,
        replicated=False,
        generation=None,
        position=None,
        shipped_at=None,
        lag_s=None,
        bytes_last_hour=recent,
        problem=problem,
    )
    if problem is not None:
        return unreplicated
    newest = max(listed, key=lambda pair: pair[1].modified)
    generation = newest[0].group(1)
    segments = [
        m for m, _ in listed if m.group(1) == generation and m.group(2) == "wal" and m.group(4)
    ]
    last = max(segments, key=lambda m: (m.group(3), m.group(4)), default=None)
    shipped_at = max(o.modified for m, o in listed if m.group(1) == generation)
    ours = local[0] if local else None
    changed = (
        local is not None
        and generation != local[0]
        and (
            shipped_at > local[1]
            or (
                all(m.group(1) != local[0] for m, _ in listed)
                and (now - local[1]).total_seconds() > settle_s
            )
        )
    )
    return replace(
        unreplicated,
        local_generation=ours,
        generation_changed=changed,
        problem=f"its replica {replica} holds generation {generation}, written by another "
        f"Litestream than this host's (generation {ours}, since {local[1]:%Y-%m-%dT%H:%M:%SZ}): "
        "another host or unit replicates to the same replica, or it was replaced"
        if changed and local
        else None,
        replicated=True,
        generation=generation,
        position=f"{generation}/{last.group(3)}_{last.group(4)}" if last else None,
        shipped_at=shipped_at,
        lag_s=round(max((changed_at - shipped_at).total_seconds(), 0.0), 3),
    )


def local_generation(path: Path) -> tuple[str, datetime] | None:
    """The generation this host's Litestream ships for ``path``, and when it started; or None.

    Litestream 0.3.13 keeps it in ``.<name>-litestream/generation`` beside the file, written
    once when it starts a generation.
    """
    marker = meta_dir(path) / "generation"
    try:
        text = marker.read_text(encoding="utf-8").strip()
        started = datetime.fromtimestamp(marker.stat().st_mtime, UTC)
    except (OSError, UnicodeDecodeError):
        return None
    return (text, started) if re.fullmatch(r"[0-9a-f]{16}", text) else None


def last_write(path: Path) -> datetime:
    """The file's last change: the newer of its own and its WAL's modification times.

    An empty WAL holds no write: a reader opening the file creates one (doctor's look through
    the app's qdrant-client), and its time is not a write Litestream has to ship.
    """
    times = [
        found.st_mtime
        for p in (path, Path(f"{path}-wal"))
        if p.exists() and ((found := p.stat()).st_size > 0 or p == path)
    ]
    return datetime.fromtimestamp(max(times, default=0.0), UTC)


def generations(objects: Iterable[ReplicaObject]) -> dict[str, list[ReplicaObject]]:
    """The replica's objects by generation (Litestream's own files only). Pure."""
    found: dict[str, list[ReplicaObject]] = {}
    for item in objects:
        if matched := SEGMENT.search(item.key):
            found.setdefault(matched.group(1), []).append(item)
    return found


def _directory_objects(root: Path) -> list[ReplicaObject]:
    found = []
    for path in sorted((root / "generations").glob("*/*/*")):
        try:
            info = path.stat()
        except FileNotFoundError:  # Litestream's retention removed it meanwhile
            continue
        found.append(
            ReplicaObject(
                key=str(path.relative_to(root)),
                size=info.st_size,
                modified=datetime.fromtimestamp(info.st_mtime, UTC),
            )
        )
    return found


def _bucket(config: Config) -> ObjectStore:
    """The ``[s3]`` bucket, its keys read whole (the replicas' paths carry the prefix)."""
    from memsync.s3.store import ObjectStore  # boto3 loads only for an S3 replica

    assert config.s3 is not None
    return ObjectStore(config.s3.model_copy(update={"prefix": ""}))


def _s3_objects(config: Config, key: str) -> list[ReplicaObject]:
    store = _bucket(config)
    prefix = f"{key}/generations/"
    return [
        ReplicaObject(key=o.key[len(key) + 1 :], size=o.size, modified=o.modified)
        for o in store.iter_objects(prefix)
        if o.modified is not None
    ]


def replica_objects(protect: ProtectConfig, config: Config, name: str) -> list[ReplicaObject]:
    """The objects of ``name``'s replica (a directory's files, or the bucket's keys). Reads only.

    Raises:
        UnavailableError: the S3 bucket cannot be read.
    """
    if protect.directory is not None:
        return _directory_objects(protect.directory / name)
    return _s3_objects(config, replica_of(protect, config, name)["path"])


def replicated_collections(protect: ProtectConfig, config: Config) -> list[str]:
    """The collections whose replica is on the destination (``collection/<name>``). Reads only.

    What a lost state directory's Litestream configuration listed: each name under
    ``collection/`` holding a generation.

    Raises:
        UnavailableError: the S3 bucket cannot be read.
    """
    if protect.directory is not None:
        root = protect.directory / "collection"  # a generation with an object in it
        return sorted(
            {
                p.parent.parent.name
                for p in root.glob("*/generations/*")
                if p.is_dir() and any(p.iterdir())
            }
        )
    store = _bucket(config)
    base = replica_of(protect, config, "collection")["path"] + "/"
    names = set()
    for found in store.iter_objects(base):
        name, _, rest = found.key[len(base) :].partition("/")
        if rest.startswith("generations/"):
            names.add(name)
    return sorted(names)


LZ4_MAGIC = b"\x04\x22\x4d\x18"  # an LZ4 frame: every object Litestream 0.3 ships
WAL_MAGIC = (0x377F0682, 0x377F0683)  # SQLite's WAL header, big- or little-endian checksums
WAL_HEADER = 32
FRAME_HEADER = 24


def lz4_prefix(data: bytes, size: int) -> bytes:
    """The first ``size`` bytes (fewer when it is shorter) the LZ4 frame ``data`` holds. Pure.

    Decodes only as far as ``size`` (the ``lz4`` package's frame decompressor).

    Raises:
        ValueError: ``data`` is not an LZ4 frame, or is cut short or malformed before ``size``.
    """
    import lz4.frame

    if data[:4] != LZ4_MAGIC:
        raise ValueError("not an LZ4 frame")
    try:
        out = lz4.frame.LZ4FrameDecompressor().decompress(data, max_length=size)
    except RuntimeError as error:
        raise ValueError(f"a malformed LZ4 frame ({error})") from error
    return bytes(out[:size])


def segment_salts(data: bytes, offset: int) -> tuple[bytes | None, bytes | None]:
    """A WAL segment's header salts (offset 0 only) and its first frame's salts. Pure.

    ``data``: the segment as shipped (LZ4); ``offset``: its byte offset in its WAL file (its
    name's). A segment at offset 0 begins with the WAL header (magic, then the salts at bytes
    16-23), each frame with a 24-byte header (its salts at bytes 8-15). None: not there (at
    offset 0, a header None is a segment that does not begin with a WAL header).

    Raises:
        ValueError: not an LZ4 frame.
    """
    start = lz4_prefix(data, WAL_HEADER + FRAME_HEADER)
    header = None
    if offset == 0:
        if len(start) < WAL_HEADER or struct.unpack_from(">I", start)[0] not in WAL_MAGIC:
            return None, None
        header, start = start[16:24], start[WAL_HEADER:]
    return header, start[8:16] if len(start) >= FRAME_HEADER else None


def replica_reader(protect: ProtectConfig, config: Config, name: str) -> Callable[[str], bytes]:
    """A reader of ``name``'s replica: an object's key below it -> its bytes (a file, or S3's).

    The reader raises OSError (a file it cannot read) or UnavailableError (the bucket); on S3
    it is one client, safe to share between threads.
    """
    if protect.directory is not None:
        root = protect.directory / name
        return lambda key: (root / key).read_bytes()
    store = _bucket(config)
    path = replica_of(protect, config, name)["path"]
    return lambda key: store.get_bytes(f"{path}/{key}") or b""


def orphan_note(pid: int) -> tuple[str, str]:
    """What a Litestream a killed erasure left running means, and what clears it. Pure."""
    return (
        f"Litestream pid {pid} was left running by a memsync erasure that was killed: the older "
        "generations on the replica may still hold the erased text",
        "run the same memsync forget --erase again (it stops this Litestream and finishes the "
        "erasure)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtectionStatus:
    """``protect --status``: Litestream's process and every file's replica.

    Attributes:
        config_file: the Litestream configuration memsync wrote (None: not written yet).
        pid: the Litestream process the daemon runs, when it runs.
        max_lag_s: ``[protect] max_lag_s``.
        files: every live SQLite file, in capture order.
        orphan: a Litestream an erasure started itself and was killed before it stopped it
            (``protect-erasure.json``): the erasure is unfinished.
    """

    config_file: Path | None
    pid: int | None
    max_lag_s: float
    files: tuple[FileProtection, ...]
    daemon_pid: int | None = None  # the memsync daemon holding its lock (-1: no pid written)
    orphan: int | None = None
    stale: str | None = None  # why the running Litestream's configuration is not [protect]'s

    @property
    def problems(self) -> list[str]:
        """What makes the deployment unprotected now, one line each (empty: protected)."""
        found = [] if self.pid else [self.not_running]
        if self.pid and self.stale is not None:
            found.append(self.stale)
        if self.orphan is not None:
            found.append(" -> ".join(orphan_note(self.orphan)))
        for entry in self.files:
            if entry.problem is not None:
                found.append(f"{entry.path}: {entry.problem}")
            elif entry.lag_s is not None and entry.lag_s > self.max_lag_s:
                found.append(
                    f"{entry.path}: its replica is {entry.lag_s:.0f} s behind its last write "
                    f"(more than max_lag_s {self.max_lag_s:g})"
                )
        return found

    @property
    def not_running(self) -> str:
        """Why Litestream is not running: no daemon, or a daemon that does not run it."""
        if self.daemon_pid is None:
            return (
                "Litestream is not running: the daemon runs it, and no memsync daemon is "
                "running (start it: memsync daemon, or systemctl start memsync)"
            )
        return (
            "Litestream is not running, although the memsync daemon is"
            + (f" (pid {self.daemon_pid})" if self.daemon_pid > 0 else "")
            + ": see its log (journalctl -u memsync) for Litestream's exit"
        )

    def to_json(self) -> dict[str, Any]:
        """``protect --status --json`` (docs/reference/json-output.md)."""
        return {
            "command": "protect",
            "status": True,
            "protected": not self.problems,
            "running": self.pid is not None,
            "pid": self.pid,
            "config_file": str(self.config_file) if self.config_file else None,
            "max_lag_s": self.max_lag_s,
            "problems": self.problems,
            "files": [entry.to_json() for entry in self.files],
        }


def stale_config(path: Path, expected: Mapping[str, Any]) -> str | None:
    """Why Litestream's configuration at ``path`` is not ``expected`` (None: it is, or unread).

    The daemon writes it when it starts; a ``[protect]`` edited since (another directory, a
    typo) is not what the running Litestream ships to until the daemon starts again.
    """
    try:
        written = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    replicas = {
        str(db.get("path")): db.get("replicas")
        for db in (written.get("dbs") or [] if isinstance(written, dict) else [])
        if isinstance(db, dict)
    }
    for db in expected["dbs"]:
        shipped = replicas.get(db["path"])
        if shipped is not None and shipped != db["replicas"]:
            to = (shipped[0] or {}).get("path") if isinstance(shipped, list) and shipped else None
            return (
                f"Litestream runs with {path}, which ships {db['path']} to {to}, not to the "
                "replica [protect] names now: restart the daemon (systemctl restart memsync), "
                "which writes it again"
            )
    return None


def read_status(store: VectorStore, config: Config, now: datetime) -> ProtectionStatus:
    """Each live file's replica, and whether Litestream runs. Reads files and the replicas only.

    Raises:
        ConfigError: no ``[protect]`` section.
        UnavailableError: the store's metadata, or the S3 bucket, cannot be read.
    """
    protect = config.protect
    if protect is None:
        raise ConfigError(
            config.source,
            ["protect: no [protect] section: nothing is protected"],
            "add [protect] (docs/how-to/continuous-protection.md)",
        )
    files = []
    lives = journal_mode.live_files(store, config.history_db_path)
    for live in lives:
        where = replica_where(protect, config, replica_name(live))
        objects = replica_objects(protect, config, replica_name(live))
        files.append(
            judge_file(
                live,
                where,
                objects,
                last_write(live.path),
                now,
                local_generation(live.path),
                protect.max_lag_s,
            )  # fmt: skip
        )
    path = config_file(config)
    erasure = erasure_litestream(config)
    return ProtectionStatus(
        stale=stale_config(path, litestream_config(protect, config, lives)),
        config_file=path if path.exists() else None,
        pid=running_pid(config),
        max_lag_s=protect.max_lag_s,
        files=tuple(files),
        daemon_pid=daemon_pid(config),
        orphan=erasure[0] if erasure is not None and erasure[1] is None else None,
    )
