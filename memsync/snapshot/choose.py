"""Which snapshot a restore or a recover reads, and its files verified on local disk.

A snapshot is named by id, by path, by ``s3://…``, by ``latest`` (the newest complete snapshot
whose last verification passed, local or remote) or by a time (``--before``: the newest such
snapshot made before it). ``pick`` is the pure choice over both repositories' listings;
``choose`` lists them. ``materialize`` gives the chosen snapshot as a local directory
(downloaded through the repository port when remote) and ``verify_fit`` verifies every byte
and that it fits the configuration, as ``restore`` always has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memsync import repository, utc
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ConfigError, UnavailableError, UsageError
from memsync.model import Severity
from memsync.repository import Entry
from memsync.repository.plaintext import NO_KEY
from memsync.snapshot.create import signing_key
from memsync.snapshot.transfer import download_snapshot
from memsync.snapshot.verify import VERIFY_CODES, verify_directory
from memsync.stores import snapshots
from memsync.stores.backends import backend_of_mode
from memsync.stores.embedder import find_mismatch
from memsync.stores.embedder import hint as embedder_hint
from memsync.stores.manifest import MANIFEST, Manifest, signature_ok
from memsync.stores.snapshots import SIDECARS, VERIFIED

LATEST = "latest"
TIME_HINT = "give a UTC time with Z or an offset, e.g. 2026-11-30T12:00Z or 2026-11-30T13:00+01:00"

Side = Literal["local", "remote"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Chosen:
    """A snapshot picked by ``latest`` or ``--before``.

    Attributes:
        snapshot_id: its id. where: ``local`` (preferred when both sides have it) or ``remote``.
        by: ``latest`` or ``before``. before: the time given with ``--before`` (UTC), or None.
    """

    snapshot_id: str
    where: Side
    by: Literal["latest", "before"]
    before: datetime | None = None
    passed_over: tuple[str, ...] = ()  # newer complete snapshots with no passing verification

    @property
    def target(self) -> str:
        """The snapshot as ``restore`` names it: its id, or ``s3://<id>`` (configured bucket)."""
        return self.snapshot_id if self.where == "local" else f"s3://{self.snapshot_id}"

    def to_json(self) -> dict[str, Any]:
        """``{"by", "before", "where", "snapshot_id", "passed_over"}`` (reports' ``chosen``)."""
        return {
            "by": self.by,
            "before": utc.iso_or_none(self.before),
            "where": self.where,
            "snapshot_id": self.snapshot_id,
            "passed_over": list(self.passed_over),
        }


def parse_time(text: str) -> datetime:
    """Read a ``--before`` time: ISO 8601 with ``Z`` or an offset, as aware UTC. Pure.

    Raises:
        UsageError: (exit 2) not ISO 8601, no ``Z``/offset (a local time is ambiguous), or
            out of range once in UTC.
    """
    try:
        given = text.strip()
        parsed = datetime.fromisoformat(given[:-1] + "Z" if given.endswith("z") else given)
    except ValueError:
        raise UsageError(f"--before {text!r} is not an ISO 8601 time", TIME_HINT) from None
    if parsed.tzinfo is None:
        raise UsageError(f"--before {text!r} has no Z or UTC offset", TIME_HINT)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is before the first UTC time
        raise UsageError(f"--before {text!r} is out of range in UTC", TIME_HINT) from None


def backend_of(manifest: Manifest) -> str:
    """The backend's manifest ``mode`` of the snapshot (``"embedded"``, ``"pgvector"``). Pure."""
    return backend_of_mode(manifest.mode).mode


def pick(
    local: Sequence[Entry],
    remote: Sequence[Entry],
    before: datetime | None,
    backend: str | None = None,
    *,
    no_safety: bool = False,
) -> tuple[str, Side] | None:
    """The newest complete snapshot whose verification passed (made before ``before``). Pure.

    With ``no_safety`` (restore's choice), a safety snapshot (``Manifest.safety``: taken by
    reconcile, forget or repair-meta before they changed the stores, damage included) never
    qualifies: name it by id to restore it. ``recover`` may read one (a forget's holds exactly
    what it deleted).
    Each side counts on its own verdict; a snapshot on both sides is read locally when its
    local copy qualifies. With ``backend`` (``backend_of``'s words), a snapshot of the other
    backend never qualifies (one directory may hold both after a move to pgvector). Returns
    ``(id, side)``, or None when none qualifies.
    """
    found: dict[str, Side] = {}
    sides: tuple[tuple[Side, Sequence[Entry]], ...] = (("remote", remote), ("local", local))
    for side, entries in sides:  # local last: it wins a tie
        for entry in entries:
            other = (
                backend is not None
                and entry.manifest is not None
                and backend_of(entry.manifest) != backend
            )
            safety = no_safety and entry.is_safety
            if entry.complete and entry.is_verified and not other and not safety:
                if before is None or entry.created_at < before:
                    found[entry.id] = side
    if not found:
        return None
    newest = max(found, key=lambda snapshot_id: (snapshots.id_time(snapshot_id), snapshot_id))
    return newest, found[newest]


def choose(deployment: Deployment, before: datetime | None, *, no_safety: bool = False) -> Chosen:
    """Pick ``latest`` (``before`` None) or the newest before ``before``, local or remote.

    Reads the local snapshot directory and, with ``[s3]``, lists the bucket. A snapshot whose
    manifest records another embedder than the config's (``embedder.find_mismatch``) is never
    chosen.

    Raises:
        UnavailableError: (exit 11) no complete snapshot passed verification (before the time),
            or S3 is unreachable.
    """
    config = deployment.config
    local_repo = repository.local_or_none(config)
    local = local_repo.list() if local_repo is not None else []
    remote = repository.remote(config).list() if config.s3 is not None else []
    backend = deployment.vector_store.mode
    other_embedder = {  # taken before a migration changed the embedder: never chosen
        e.id for e in [*local, *remote] if e.manifest and find_mismatch(e.manifest, config)
    }
    picked = pick(
        [e for e in local if e.id not in other_embedder],
        [e for e in remote if e.id not in other_embedder],
        before,
        backend,
        no_safety=no_safety,
    )
    if picked is None:
        complete = len({e.id for e in [*local, *remote] if e.complete})
        when = f" made before {utc.iso(before)}" if before is not None else ""
        other = len(
            {
                e.id
                for e in [*local, *remote]
                if e.complete and e.manifest is not None and backend_of(e.manifest) != backend
            }
        )
        others = f", {other} of them of the other backend" if other else ""
        if other_embedder:
            others += f", {len(other_embedder)} of them of another embedder"
        safety = len({e.id for e in [*local, *remote] if e.is_safety})
        if safety and no_safety:
            others += f", {safety} of them safety snapshots (never chosen by latest)"
        raise UnavailableError(
            f"no complete snapshot{when} of this {backend} deployment has passed verification "
            f"({complete} complete snapshot(s) listed"
            f"{', local and remote' if config.s3 is not None else ''}{others})",
            "memsync snapshot create takes a snapshot of this deployment; the others were taken "
            "before a migration (restore one with its own config: --config OLD.toml restore ID "
            "--to DIR)"
            if other_embedder or other
            else f"memsync snapshot verify {_unverified(local, remote, before, backend, no_safety)} "
            "(--remote) records a verdict; or name a snapshot by id (memsync snapshot list)",
        )
    snapshot_id, where = picked
    passed_over = sorted(  # what latest would have taken had its verification passed
        {
            e.id
            for e in [*local, *remote]
            if e.complete
            and not e.is_verified
            and not e.is_safety
            and e.id not in other_embedder
            and (e.manifest is None or backend_of(e.manifest) == backend)
            and (before is None or e.created_at < before)
            and (snapshots.id_time(e.id), e.id) > (snapshots.id_time(snapshot_id), snapshot_id)
        }
    )
    return Chosen(
        snapshot_id=snapshot_id,
        where=where,
        by="latest" if before is None else "before",
        before=before,
        passed_over=tuple(passed_over),
    )


def _unverified(
    local: Sequence[Entry],
    remote: Sequence[Entry],
    before: datetime | None,
    backend: str,
    no_safety: bool = False,
) -> str:
    """The newest complete snapshot ``pick`` passed over for want of a verdict, else ``ID``.

    With ``no_safety`` (restore's choice) a safety snapshot, which ``pick`` never takes, is not
    named.
    """
    waiting = [
        e.id
        for e in [*local, *remote]
        if e.complete
        and not e.is_verified
        and (e.verified is None)
        and not (no_safety and e.is_safety)
        and (before is None or e.created_at < before)
        and (e.manifest is None or backend_of(e.manifest) == backend)
    ]
    return max(waiting, key=lambda i: (snapshots.id_time(i), i)) if waiting else "ID"


def resolve(
    deployment: Deployment, target: str | None, before: datetime | None, *, no_safety: bool = False
) -> tuple[str, Chosen | None]:
    """The target a restore or recover reads: as given, or chosen by ``latest`` / ``before``.

    ``no_safety``: as for ``pick`` (restore passes it).

    Raises:
        UsageError: (exit 2) no target and no ``before``, or both an explicit target and ``before``.
        UnavailableError: as ``choose``.
    """
    if before is not None and target not in (None, LATEST):
        raise UsageError(
            f"--before chooses the snapshot itself: drop {target!r}", "memsync snapshot list"
        )
    if before is None and target is None:
        raise UsageError(
            "no snapshot named: give an ID, a PATH, s3://BUCKET/PREFIX/ID, latest, or --before TIME",
            "memsync snapshot list (--remote) shows them",
        )
    if before is None and target != LATEST:
        assert target is not None
        return target, None
    chosen = choose(deployment, before, no_safety=no_safety)
    return chosen.target, chosen


def materialize(config: Config, target: str, scratch: Path) -> Path:
    """A local snapshot directory for ``target`` (a remote one downloaded into ``scratch``).

    Raises:
        UnavailableError: not found, or the download fails or differs from its manifest.
        UsageError: a malformed ``s3://`` target.
    """
    if target.startswith("s3://"):
        remote, snapshot_id = repository.parse_s3_target(config, target)
        return download_snapshot(remote, snapshot_id, scratch / "download")
    return snapshots.resolve_local(target, config.snapshot.directory)


def verify_fit(deployment: Deployment, directory: Path, now: datetime) -> Manifest:
    """Verify a snapshot directory byte for byte, then that it fits the configuration.

    Records ``verified.json`` in the directory. Only damaged or missing files refuse it.

    Raises:
        UnavailableError: (exit 11) a file is missing or differs from the manifest.
        ConfigError: (exit 10) encrypted without a key, another collection or vector size, or
            another embedder than the manifest records (``embedder.find_mismatch``).
    """
    config = deployment.config
    manifest = snapshots.read_manifest(directory)
    if manifest.encrypted and config.snapshot.encrypt_key_file is None:
        raise ConfigError(config.source, [NO_KEY])
    report = verify_directory(deployment, directory, now)
    broken = [f for f in report.findings if f.code in VERIFY_CODES and f.severity is Severity.ERROR]
    if broken:
        listed = "; ".join(f"{f.code} {f.path}" for f in broken[:5])
        raise UnavailableError(
            f"snapshot {directory.name} fails verification: {listed}",
            "use another snapshot (memsync snapshot list)",
        )
    manifest = snapshots.read_manifest(directory)
    require_fit(config, manifest)
    return manifest


def require_fit(config: Config, manifest: Manifest) -> None:
    """Refuse a snapshot of another embedder, collection or vector size than the config's.

    Raises:
        ConfigError: (exit 10) as ``verify_fit``.
    """
    mismatch = find_mismatch(manifest, config)
    if mismatch is not None:
        raise ConfigError(config.source, [f"mem0.embedder: {mismatch}"], embedder_hint(config))
    problems = []
    if manifest.collection != config.collection:
        problems.append(
            f"mem0.vector_store.config.collection_name: the snapshot holds collection "
            f"{manifest.collection!r}, the config says {config.collection!r}"
        )
    size = (manifest.collections.get(config.collection) or {}).get("vector_size")
    for key, dims in config.expected_dims:
        if size is not None and size != dims:
            problems.append(
                f"{key}: the snapshot's vectors have {size} dimensions, the config says {dims}"
            )
    if problems:
        raise ConfigError(config.source, problems, "use a snapshot made with this configuration")


def recorded_clean(deployment: Deployment, directory: Path) -> Manifest | None:
    """The manifest, when its create recorded a clean verification of these files; else None.

    Clean: the manifest's ``integrity`` says ``ok`` for every listed file but the store's index
    (``PRAGMA integrity_check``, or the check of pgvector's export), every point decoded and
    every vector of its collection's size; its signature holds (with a signing key); the
    directory holds no file the manifest does not list; and no later verification failed
    (``verified.json``). Then only the bytes can differ from what was verified, and a restore
    that finds the manifest's sha256 while copying them needs no second decode and judge.
    Reads the manifest, the directory's listing and ``verified.json``. Never raises for what a
    full verification would report: None sends the snapshot down that path.
    """
    try:
        manifest = snapshots.read_manifest(directory)
        key = signing_key(deployment.config)
    except (UnavailableError, ConfigError):
        return None
    if key is not None and not signature_ok(manifest, key):
        return None
    store = deployment.vector_store
    index = f"{store.capture_dir}/{store.index_file}"
    recorded = manifest.integrity
    if recorded.get("points_decoded") is not True or recorded.get("vector_sizes_ok") is not True:
        return None
    if any(recorded.get(e.path) != "ok" for e in manifest.files if e.path != index):
        return None
    stored = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}
    if stored - {e.path for e in manifest.files} - {MANIFEST} - SIDECARS:
        return None
    verdict = snapshots.read_json(directory / VERIFIED)
    if (directory / VERIFIED).exists() and (verdict is None or verdict.get("ok") is not True):
        return None
    return manifest
