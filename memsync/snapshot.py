"""``snapshot``: both stores captured in one job into one dated directory, verified, uploaded, pruned.

Pure halves: ``build_manifest`` and ``plan_prune``. I/O halves: ``create_snapshot``,
``verify_snapshot``, ``upload_snapshot``, ``download_snapshot``, ``list_snapshots``,
``apply_prune``. Layout and codes: CONTRACT.md ("Snapshots"); manifest fields:
docs/reference/snapshot-manifest.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import __version__, check, seal
from memsync.config import Config, SnapshotConfig
from memsync.errors import ConfigError, UnavailableError, UsageError
from memsync.model import CaptureWindow, CheckReport, Finding, Severity
from memsync.s3 import ObjectStore
from memsync.state import fsync_dir, write_json_atomic
from memsync.stores import deployment, local_qdrant, snapshots, versions
from memsync.stores.sqlite_files import SQLITE_VERSION, integrity, work_dir_error

logger = structlog.get_logger(__name__)

Progress = Callable[[int, int], None]
VERIFY_CODES = (
    "manifest-missing", "file-missing", "checksum-mismatch", "integrity-failed",
    "point-undecodable", "signature-invalid",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Created:
    """A snapshot just created: its id, directory and manifest."""

    id: str
    path: Path
    manifest: dict[str, Any]
    removed_partials: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    """What ``verify`` found, in contract order; ``ok`` when no error finding."""

    target: str
    snapshot_id: str | None
    findings: tuple[Finding, ...]
    verified_at: datetime

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity is Severity.ERROR for f in self.findings)


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneDecision:
    """Keep or remove one snapshot, and why."""

    id: str
    keep: bool
    reasons: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """What retention needs to know of one snapshot."""

    id: str
    time: datetime
    complete: bool
    verified: bool


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def build_manifest(
    *,
    snapshot_id: str,
    created_at: datetime,
    collection: str,
    window: CaptureWindow,
    files: Sequence[dict[str, Any]],
    collections: dict[str, dict[str, Any]],
    history: dict[str, int],
    integrity_results: dict[str, Any],
    report: CheckReport,
    versions: dict[str, str | None],
    encryption: dict[str, Any] | None,
) -> dict[str, Any]:
    """Assemble the manifest document (no signature yet). Pure."""
    return {
        "format": snapshots.FORMAT_VERSION,
        "id": snapshot_id,
        "created_at": _iso(created_at),
        "mode": "embedded",
        "collection": collection,
        "versions": {"memsync": __version__, "sqlite": SQLITE_VERSION, **versions},
        "capture": {
            "vectors_at": _iso(window.vectors_at),
            "vectors_finished_at": _iso(window.vectors_finished_at),
            "history_at": _iso(window.history_at),
            "history_finished_at": _iso(window.history_finished_at),
            "longest_read_s": round(window.longest_read_s, 4),
        },
        "files": sorted(files, key=lambda item: str(item["path"])),
        "collections": collections,
        "history": history,
        "integrity": integrity_results,
        "check": {**report.counts(), "findings": [f.to_json() for f in report.findings]},
        "encryption": encryption,
    }


def snapshot_dir(config: Config) -> Path:
    """The configured snapshot directory. Raises ConfigError when none is set."""
    if config.snapshot.directory is None:
        raise ConfigError(config.source, ["snapshot.directory: required for snapshots"])
    return config.snapshot.directory


def _signing_key(snapshot: SnapshotConfig) -> bytes | None:
    if snapshot.signing_key_file is None:
        return None
    try:
        key = snapshot.signing_key_file.read_bytes().strip()
    except OSError as error:
        raise ConfigError(str(snapshot.signing_key_file), [f"signing key unreadable: {error.strerror}"]) from error
    if len(key) < 16:
        raise ConfigError(str(snapshot.signing_key_file), ["signing key must hold at least 16 bytes"])
    return key


def _encryption_key(snapshot: SnapshotConfig) -> bytes | None:
    return seal.load_key(snapshot.encrypt_key_file) if snapshot.encrypt_key_file else None


def _sqlite_files(captured: deployment.Captured) -> list[Path]:
    files = [copy.dest for copy in captured.collection_copies.values()]
    if captured.history_copy is not None:
        files.append(captured.history_copy.dest)
    return files


def create_snapshot(config: Config, now: datetime, progress: Progress | None = None) -> Created:
    """Capture both stores into ``<snapshot.directory>/<id>/`` with an integrity-checked manifest.

    Built under ``<id>.partial/`` (files 0600, directories 0700, fsynced) and renamed when
    complete; stale ``.partial`` directories of dead creates are removed first. Takes no lock
    on the deployment and never writes to it.

    Raises:
        ConfigError: no snapshot directory, or an unreadable key file.
        UnavailableError: a store is unreadable, damaged, or a copy fails its integrity check
            (the partial directory is removed).
        TryLaterError: a store is busy or the snapshot disk is full.
    """
    directory = snapshot_dir(config)
    signing_key = _signing_key(config.snapshot)
    encryption_key = _encryption_key(config.snapshot)
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileExistsError, NotADirectoryError) as error:
        raise ConfigError(config.source, [f"snapshot.directory: {directory} is not a directory"]) from error
    except OSError as error:
        raise work_dir_error(directory, error) from error
    removed = snapshots.remove_stale_partials(directory)
    while True:  # two creates in the same second: the second takes the next -N
        snapshot_id = snapshots.new_id(now, {child.name for child in directory.iterdir()})
        partial = directory / f"{snapshot_id}{snapshots.PARTIAL_SUFFIX}"
        try:
            partial.mkdir(mode=0o700)
            break
        except FileExistsError:
            continue
    with (partial / snapshots.CREATING_LOCK).open("w") as creating:
        fcntl.flock(creating, fcntl.LOCK_EX)
        try:
            manifest = _fill(config, partial, snapshot_id, now, signing_key, encryption_key, progress)
            (partial / snapshots.CREATING_LOCK).unlink()
            final = directory / snapshot_id
            os.rename(partial, final)
            fsync_dir(directory)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    logger.info("snapshot_created", snapshot_id=snapshot_id, size_bytes=sum(f["size"] for f in manifest["files"]))
    return Created(id=snapshot_id, path=final, manifest=manifest, removed_partials=tuple(removed))


def _fill(
    config: Config,
    partial: Path,
    snapshot_id: str,
    now: datetime,
    signing_key: bytes | None,
    encryption_key: bytes | None,
    progress: Progress | None,
) -> dict[str, Any]:
    captured = deployment.capture(config, partial)
    return finish_directory(config, partial, captured, snapshot_id, now, now.date(), signing_key, encryption_key,
                            progress)


def finish_directory(
    config: Config,
    partial: Path,
    captured: deployment.Captured,
    snapshot_id: str,
    created_at: datetime,
    today: date,
    signing_key: bytes | None,
    encryption_key: bytes | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Check a captured layout in ``partial`` and write its manifest (sealing files when keyed).

    Runs ``integrity_check`` on every SQLite file, decodes every point, judges the pair,
    hashes (and with a key, seals) every file, sets modes 0600/0700, writes the manifest.

    Raises:
        UnavailableError: a file fails its integrity check or a point does not decode.
    """
    results: dict[str, Any] = {}
    for path in _sqlite_files(captured):
        verdict = integrity(path, quick=False)
        results[str(path.relative_to(partial))] = verdict
        if verdict != "ok":
            raise UnavailableError(
                f"the copy of {path.relative_to(partial)} fails PRAGMA integrity_check ({verdict})",
                "the live file is damaged: run memsync doctor; restore it from an older snapshot",
            )
    inventory = deployment.read_inventory(captured, config, progress)
    collections: dict[str, dict[str, Any]] = {}
    wrong_sizes = 0
    for name, info in sorted(captured.collections.items()):
        copy = captured.collection_copies.get(name)
        if name == config.collection:
            sizes = [p.vector_size for p in inventory.points.values()]
        else:
            sizes = [p.vector_size for p in local_qdrant.iter_points(copy.dest)] if copy else []
        wrong_sizes += sum(1 for size in sizes if info.vector_size is not None and size != info.vector_size)
        collections[name] = {
            "vector_size": info.vector_size,
            "distance": info.distance,
            "points": len(sizes),
        }
    results["points_decoded"] = True
    results["vector_sizes_ok"] = wrong_sizes == 0
    report = check.judge(inventory, today)
    files = _file_entries(partial, encryption_key)
    manifest = build_manifest(
        snapshot_id=snapshot_id,
        created_at=created_at,
        collection=config.collection,
        window=captured.window,
        files=files,
        collections=collections,
        history={"rows": inventory.history_rows, "memories": len(inventory.history)},
        integrity_results=results,
        report=report,
        versions=versions.tracked_versions(),
        encryption={"algorithm": seal.ALGORITHM} if encryption_key else None,
    )
    if signing_key is not None:
        manifest["signature"] = snapshots.sign(manifest, signing_key)
    for path in sorted(partial.rglob("*")):
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    write_json_atomic(partial / snapshots.MANIFEST, manifest)
    return manifest


def _file_entries(partial: Path, key: bytes | None) -> list[dict[str, Any]]:
    entries = []
    for path in sorted(p for p in partial.rglob("*") if p.is_file() and p.name != snapshots.CREATING_LOCK):
        relative = str(path.relative_to(partial))
        size, digest = snapshots.sha256_file(path)
        entry: dict[str, Any] = {"path": relative, "size": size, "sha256": digest}
        if key is not None:
            sealed = path.with_name(path.name + ".sealing")
            seal.seal_file(path, sealed, key, relative)
            os.replace(sealed, path)
            entry["stored_size"], entry["stored_sha256"] = snapshots.sha256_file(path)
        else:
            with path.open("rb+") as handle:
                os.fsync(handle.fileno())
        entries.append(entry)
    for directory in sorted({p.parent for p in partial.rglob("*")} | {partial}):
        fsync_dir(directory)
    return entries


def stored_digest(entry: dict[str, Any]) -> tuple[int, str]:
    """The size and sha256 of a file as stored (ciphertext when encrypted)."""
    return int(entry.get("stored_size", entry["size"])), str(entry.get("stored_sha256", entry["sha256"]))


# --- verify ----------------------------------------------------------------------------------


def _problem(code: str, path: str | None, message: str, fix: str | None = None) -> Finding:
    return Finding(code=code, severity=Severity.ERROR, path=path, message=message, fix=fix)


def verify_directory(config: Config, directory: Path, now: datetime) -> VerifyReport:
    """Verify a local snapshot directory completely and record ``verified.json`` beside it.

    Checks the signature (when a signing key is configured) before anything is decoded, every
    file's size and sha256 (ciphertext and plaintext when encrypted), ``PRAGMA integrity_check``
    of every SQLite file, that every point decodes, and re-runs ``check`` on the pair.
    Writes only ``verified.json`` (atomically) and temporary files under ``work_dir``.
    """
    findings = _verify_findings(config, directory, now)
    report = VerifyReport(
        target=str(directory),
        snapshot_id=directory.name,
        findings=tuple(sorted(findings, key=Finding.sort_key)),
        verified_at=now,
    )
    if directory.is_dir() and not directory.name.endswith(snapshots.PARTIAL_SUFFIX):
        write_json_atomic(directory / snapshots.VERIFIED, verified_document(report))
    return report


def verified_document(report: VerifyReport) -> dict[str, Any]:
    """The ``verified.json`` document of a verification."""
    return {
        "verified_at": _iso(report.verified_at),
        "ok": report.ok,
        "errors": sum(1 for f in report.findings if f.severity is Severity.ERROR),
        "codes": sorted({f.code for f in report.findings}),
        "memsync": __version__,
    }


def _verify_findings(config: Config, directory: Path, now: datetime) -> list[Finding]:
    manifest_path = directory / snapshots.MANIFEST
    if directory.name.endswith(snapshots.PARTIAL_SUFFIX):
        return [_problem("manifest-missing", str(manifest_path), "the snapshot is incomplete: its "
                         "directory still ends in .partial (the create did not finish), so it has no "
                         "complete manifest", "use another snapshot; the next create removes it")]
    if not manifest_path.is_file():
        return [_problem("manifest-missing", str(manifest_path), "the snapshot has no manifest: it "
                         "is incomplete or damaged, and nothing in it can be trusted",
                         "use another snapshot")]
    try:
        manifest = snapshots.read_manifest(directory)
    except UnavailableError as error:
        return [_problem("manifest-missing", str(manifest_path), error.message, "use another snapshot")]
    signing_key = _signing_key(config.snapshot)
    if signing_key is not None and not snapshots.signature_ok(manifest, signing_key):
        return [_problem("signature-invalid", str(manifest_path),
                         "the manifest's HMAC-SHA256 signature does not match the configured key: "
                         "the snapshot was altered or signed with another key; nothing was decoded",
                         "use another snapshot, or the signing key it was made with")]
    findings: list[Finding] = []
    listed_paths = {str(entry["path"]) for entry in manifest.get("files", [])}
    for extra in sorted(p for p in directory.rglob("*") if p.is_file()):
        relative = str(extra.relative_to(directory))
        if relative not in listed_paths and relative not in (snapshots.MANIFEST, snapshots.VERIFIED):
            findings.append(_problem("checksum-mismatch", str(extra), f"{relative} is not listed in the manifest: "
                                     "something was added to the snapshot after it was made"))
    good: list[dict[str, Any]] = []
    for entry in manifest.get("files", []):
        path = directory / str(entry["path"])
        if not path.is_file():
            findings.append(_problem("file-missing", str(path), f"{entry['path']} listed in the manifest is missing"))
            continue
        size, digest = snapshots.sha256_file(path)
        if (size, digest) != stored_digest(entry):
            findings.append(_problem(
                "checksum-mismatch", str(path),
                f"{entry['path']} is {size} bytes with sha256 {digest[:16]}…, the manifest says "
                f"{stored_digest(entry)[0]} bytes, {stored_digest(entry)[1][:16]}…",
                "the file was changed or truncated after the snapshot: use another snapshot"))
            continue
        good.append(entry)
    listed = {str(entry["path"]) for entry in manifest.get("files", [])}
    with _plaintext(config, directory, manifest, good, findings) as plain:
        if plain is not None:
            findings += _verify_contents(config, plain, manifest, {str(e["path"]) for e in good}, listed, now)
    return findings


@contextmanager
def _plaintext(
    config: Config,
    directory: Path,
    manifest: dict[str, Any],
    good: list[dict[str, Any]],
    findings: list[Finding],
) -> Iterator[Path | None]:
    """The snapshot's plaintext files: the directory itself, or a decrypted temporary copy."""
    if not manifest.get("encryption"):
        yield directory
        return
    key = _encryption_key(config.snapshot)
    if key is None:
        findings.append(_problem("checksum-mismatch", str(directory), "the snapshot is encrypted and "
                                 "no snapshot.encrypt_key_file is configured: contents not verified",
                                 "configure the key it was made with"))
        yield None
        return
    config.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=config.work_dir, prefix="verify-") as temporary:
        root = Path(temporary)
        for entry in list(good):
            relative = str(entry["path"])
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                seal.open_file(directory / relative, target, key, relative)
            except seal.SealError as error:
                findings.append(_problem("checksum-mismatch", str(directory / relative), str(error)))
                good.remove(entry)
                continue
            if snapshots.sha256_file(target) != (int(entry["size"]), str(entry["sha256"])):
                findings.append(_problem("checksum-mismatch", str(directory / relative),
                                         f"{relative} decrypts to bytes that differ from the manifest"))
                good.remove(entry)
        yield root


def _verify_contents(
    config: Config, root: Path, manifest: dict[str, Any], good: set[str], listed: set[str], now: datetime
) -> list[Finding]:
    """Check integrity and decoding of the files whose checksums matched, then the pair.

    The pair is checked only when every listed file passed (nothing unverified is unpickled).
    """
    findings: list[Finding] = []
    sqlite_files = [p for p in good if p.endswith(".sqlite") or p == "history.db"]
    for relative in sqlite_files:
        verdict = integrity(root / relative, quick=False)
        if verdict != "ok":
            findings.append(_problem("integrity-failed", relative, f"PRAGMA integrity_check: {verdict}"))
            good.discard(relative)
    meta = "qdrant/meta.json"
    if meta not in good:
        return findings
    for relative in sorted(p for p in good if p.endswith(local_qdrant.STORAGE_FILE)):
        try:
            for _point in local_qdrant.iter_points(root / relative):
                pass
        except UnavailableError as error:
            findings.append(_problem("point-undecodable", relative, error.message))
            good.discard(relative)
    if good != listed:
        return findings
    captured = deployment.from_directory(root, window_from_manifest(manifest))
    inventory = deployment.read_inventory(captured, config)
    report = check.judge(inventory, now.date())
    findings += [f for f in report.findings]
    return findings


def window_from_manifest(manifest: dict[str, Any]) -> CaptureWindow:
    """The capture window a manifest records."""
    capture = manifest.get("capture", {})

    def moment(key: str) -> datetime:
        return datetime.fromisoformat(str(capture[key]).replace("Z", "+00:00"))

    return CaptureWindow(
        vectors_at=moment("vectors_at"),
        vectors_finished_at=moment("vectors_finished_at"),
        history_at=moment("history_at"),
        history_finished_at=moment("history_finished_at"),
        longest_read_s=float(capture.get("longest_read_s", 0.0)),
    )


# --- S3 --------------------------------------------------------------------------------------


def object_store(config: Config) -> ObjectStore:
    """The configured object store. Raises ConfigError without an ``[s3]`` section."""
    if config.s3 is None:
        raise ConfigError(config.source, ["s3: an [s3] section is required for remote snapshots"])
    return ObjectStore(config.s3)


def upload_snapshot(
    config: Config,
    directory: Path,
    progress: Callable[[int], None] | None = None,
    store: ObjectStore | None = None,
) -> dict[str, int]:
    """Upload a complete local snapshot: every file with its sha256, then the manifest last.

    Files already in the bucket with the same size and sha256 are not sent again, so an
    interrupted upload resumes. ``store`` defaults to the configured one. Returns
    ``{"sent": n, "skipped": n, "bytes": n}``.

    Raises:
        UnavailableError: the snapshot is incomplete, or S3 fails (nothing local is removed).
    """
    manifest = snapshots.read_manifest(directory)
    store = store or object_store(config)
    sent = skipped = sent_bytes = 0
    for entry in manifest["files"]:
        size, digest = stored_digest(entry)
        local = directory / str(entry["path"])
        if snapshots.sha256_file(local) != (size, digest):
            raise UnavailableError(f"{local} differs from its manifest: it was changed after the snapshot",
                                   f"memsync snapshot verify {directory.name}; upload another snapshot")
        key = store.key(directory.name, str(entry["path"]))
        if store.put_file(key, directory / str(entry["path"]), digest, progress):
            sent += 1
            sent_bytes += size
        else:
            skipped += 1
    data = (directory / snapshots.MANIFEST).read_bytes()
    store.put_bytes(store.key(directory.name, snapshots.MANIFEST), data, _sha(data))
    logger.info("snapshot_uploaded", snapshot_id=directory.name, bucket=store.bucket, sent=sent, skipped=skipped)
    return {"sent": sent, "skipped": skipped, "bytes": sent_bytes}


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def parse_s3_target(config: Config, target: str) -> tuple[ObjectStore, str]:
    """Split ``s3://bucket/prefix/ID`` (or ``s3://ID``) into a store and a snapshot id.

    Endpoint and region come from ``[s3]``; ``s3://ID`` uses the configured bucket and prefix.
    """
    store = object_store(config)
    rest = target[len("s3://") :].strip("/")
    parts = rest.split("/")
    snapshot_id = parts[-1]
    if not snapshots.ID_PATTERN.match(snapshot_id):
        raise UsageError(f"{target!r} does not end in a snapshot id")
    if len(parts) > 1:
        store.bucket = parts[0]
        store.prefix = "/".join(parts[1:-1])
    return store, snapshot_id


def download_snapshot(
    config: Config, store: ObjectStore, snapshot_id: str, dest_parent: Path,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Download a remote snapshot into ``dest_parent/<id>/``, verifying every byte first.

    Built under ``<id>.partial/`` and renamed only when every file matches the manifest.

    Raises:
        UnavailableError: no manifest (incomplete), an object missing or differing from the
            manifest, or S3 unreachable; nothing partial is left.
    """
    raw = store.get_bytes(store.key(snapshot_id, snapshots.MANIFEST))
    if raw is None:
        raise UnavailableError(
            f"remote snapshot {snapshot_id} at {store.where} has no manifest: it is incomplete",
            "memsync snapshot list --remote shows complete snapshots",
        )
    final = dest_parent / snapshot_id
    if dest_parent.exists() and not dest_parent.is_dir():
        raise UsageError(f"{dest_parent} is not a directory")
    if final.exists():
        raise UsageError(f"{final} already exists", "choose another directory or remove it")
    partial = dest_parent / f"{snapshot_id}{snapshots.PARTIAL_SUFFIX}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True, mode=0o700)
    try:
        try:
            manifest = json.loads(raw)
        except ValueError:
            manifest = None
        problem = snapshots.manifest_problem(manifest, snapshot_id)
        if problem:
            raise UnavailableError(f"remote manifest of {snapshot_id} at {store.where} is not valid: {problem}",
                                   "use another snapshot")
        assert isinstance(manifest, dict)
        for entry in manifest["files"]:
            target = partial / str(entry["path"])
            store.get_file(store.key(snapshot_id, str(entry["path"])), target, progress)
            if snapshots.sha256_file(target) != stored_digest(entry):
                raise UnavailableError(
                    f"remote object {store.key(snapshot_id, str(entry['path']))} differs from its "
                    "manifest (size or sha256)",
                    "the remote copy is damaged: use another snapshot",
                )
            os.chmod(target, 0o600)
        (partial / snapshots.MANIFEST).write_bytes(raw)
        os.rename(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final


def verify_remote(config: Config, target: str, now: datetime) -> VerifyReport:
    """Download ``s3://…/<id>`` into ``work_dir`` and verify it there.

    Reads the bucket; writes only ``verified.json`` beside the snapshot there.
    """
    store, snapshot_id = parse_s3_target(config, target)
    config.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=config.work_dir, prefix="remote-") as temporary:
        findings: list[Finding]
        try:
            local = download_snapshot(config, store, snapshot_id, Path(temporary))
            findings = _verify_findings(config, local, now)
        except UnavailableError as error:
            code = "manifest-missing" if "no manifest" in error.message else "checksum-mismatch"
            findings = [_problem(code, target, error.message, error.hint)]
    report = VerifyReport(target=target, snapshot_id=snapshot_id,
                          findings=tuple(sorted(findings, key=Finding.sort_key)), verified_at=now)
    document = json.dumps(verified_document(report), sort_keys=True).encode()
    store.put_bytes(store.key(snapshot_id, snapshots.VERIFIED), document, _sha(document))
    return report


def remote_candidates(store: ObjectStore) -> list[dict[str, Any]]:
    """The remote snapshots under the prefix: id, complete, verified, size, manifest."""
    grouped: dict[str, dict[str, Any]] = {}
    base = store.key("") + "/" if store.prefix else ""
    for item in store.iter_objects(base):
        relative = item.key[len(base) :]
        snapshot_id, _, name = relative.partition("/")
        if not snapshots.ID_PATTERN.match(snapshot_id):
            continue
        entry = grouped.setdefault(snapshot_id, {"id": snapshot_id, "names": set(), "size_bytes": 0})
        entry["names"].add(name)
        entry["size_bytes"] += item.size
    results = []
    for snapshot_id, entry in sorted(grouped.items()):
        manifest = _remote_json(store, snapshot_id, snapshots.MANIFEST, entry["names"])
        if snapshots.manifest_problem(manifest, snapshot_id) is not None:
            manifest = None  # a damaged or foreign manifest: the snapshot is not complete
        verified = _remote_json(store, snapshot_id, snapshots.VERIFIED, entry["names"])
        results.append({"id": snapshot_id, "complete": manifest is not None, "manifest": manifest,
                        "verified": bool(verified and verified.get("ok")),
                        "size_bytes": entry["size_bytes"]})
    return results


def _remote_json(store: ObjectStore, snapshot_id: str, name: str, names: set[str]) -> dict[str, Any] | None:
    """A small JSON object of a remote snapshot, or None when absent or not JSON."""
    if name not in names:
        return None
    raw = store.get_bytes(store.key(snapshot_id, name))
    try:
        document = json.loads(raw) if raw else None
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


# --- retention -------------------------------------------------------------------------------


def plan_prune(candidates: Iterable[Candidate], policy: SnapshotConfig) -> list[PruneDecision]:
    """Decide which snapshots retention keeps, as restic does. Pure.

    ``keep_last`` keeps the newest N; ``keep_daily``/``weekly``/``monthly`` keep the newest
    snapshot of each of the last N days (UTC) / ISO weeks / months that have snapshots. The
    rules add up. The newest verified snapshot is always kept; incomplete ones are never
    touched (they are not in the result).

    Raises:
        ConfigError: every keep_* is 0 (an empty policy would remove everything).
    """
    if not (policy.keep_last or policy.keep_daily or policy.keep_weekly or policy.keep_monthly):
        raise ConfigError("snapshot", ["snapshot.keep_*: retention needs at least one keep_* > 0"])
    complete = sorted((c for c in candidates if c.complete), key=lambda c: c.id, reverse=True)
    reasons: dict[str, list[str]] = {c.id: [] for c in complete}
    for index, candidate in enumerate(complete[: policy.keep_last]):
        reasons[candidate.id].append(f"last {index + 1}")
    buckets: tuple[tuple[str, int, Callable[[datetime], str]], ...] = (
        ("daily", policy.keep_daily, lambda t: t.strftime("%Y-%m-%d")),
        ("weekly", policy.keep_weekly, lambda t: f"{t.isocalendar()[0]:04d}-W{t.isocalendar()[1]:02d}"),
        ("monthly", policy.keep_monthly, lambda t: t.strftime("%Y-%m")),
    )
    for name, count, bucket_of in buckets:
        seen: list[str] = []
        for candidate in complete:
            bucket = bucket_of(candidate.time.astimezone(UTC))
            if bucket in seen:
                continue
            if len(seen) >= count:
                break
            seen.append(bucket)
            reasons[candidate.id].append(f"{name} {bucket}")
    newest_verified = next((c for c in complete if c.verified), None)
    if newest_verified is not None:
        reasons[newest_verified.id].append("newest verified")
    return [PruneDecision(id=c.id, keep=bool(reasons[c.id]), reasons=tuple(reasons[c.id])) for c in complete]


def local_candidates(config: Config) -> list[Candidate]:
    """Retention candidates of the local snapshot directory."""
    return [
        Candidate(id=info.id, time=info.created_at, complete=info.complete, verified=info.is_verified)
        for info in snapshots.iter_local(snapshot_dir(config))
    ]


def apply_prune(config: Config, decisions: Sequence[PruneDecision], remote: bool) -> list[str]:
    """Remove the snapshots ``decisions`` do not keep; return their ids.

    Local: the directory is removed. Remote: the manifest object first (so the snapshot is
    incomplete by construction from then on), then every other object under its prefix.
    """
    removed = []
    store = object_store(config) if remote else None
    for decision in decisions:
        if decision.keep:
            continue
        if store is not None:
            manifest_key = store.key(decision.id, snapshots.MANIFEST)
            store.delete([manifest_key])
            store.delete([item.key for item in store.iter_objects(store.key(decision.id) + "/")])
        else:
            path = snapshot_dir(config) / decision.id
            shutil.rmtree(path)
        logger.info("snapshot_removed", snapshot_id=decision.id, remote=remote)
        removed.append(decision.id)
    return removed
