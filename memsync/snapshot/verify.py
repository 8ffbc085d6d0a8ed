"""``snapshot verify``: one path for a local directory and a bucket, through the repository port.

Signature first (nothing is decoded before it holds), then every stored file read back against
the manifest, then the plaintext (decrypted when sealed) checked: ``PRAGMA integrity_check``,
every point decoded, and ``check`` re-run on the pair when every file passed. The result goes
into ``verified.json`` beside the snapshot, never into the manifest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from memsync import __version__, check, utc
from memsync import findings as registry
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import UnavailableError
from memsync.model import Finding, Severity
from memsync.repository import (
    FileCheck,
    LocalRepository,
    SnapshotRepository,
    decrypt,
    encryption_key,
    parse_s3_target,
    reading,
)
from memsync.s3 import TransportError
from memsync.snapshot.create import signing_key
from memsync.stores import capture
from memsync.stores.embedder import find_mismatch
from memsync.stores.manifest import MANIFEST, FileEntry, Manifest, ManifestTooNew, signature_ok
from memsync.stores.snapshots import ID_PATTERN, PARTIAL_SUFFIX, VERIFIED
from memsync.stores.sqlite_files import integrity
from memsync.stores.vector_store import VectorCapture, VectorStore

VERIFY_CODES = registry.codes(registry.Source.VERIFY)
HISTORY_FILE = "history.db"


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    """What ``verify`` found, in contract order; ``ok`` when no error finding.

    ``expected``: the pair's findings a safety snapshot recorded when it was taken (the damage
    its command was about to repair, kept by design): reported, never a failure.
    """

    target: str
    snapshot_id: str | None
    findings: tuple[Finding, ...]
    verified_at: datetime
    expected: tuple[Finding, ...] = ()  # a safety snapshot's damage, recorded when it was taken
    label: dict[str, Any] | None = None  # the manifest's ``label`` (a safety snapshot's)
    other_embedder: str | None = None  # made by another embedder than the config's (migrate)

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity is Severity.ERROR for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        """``snapshot verify --json`` (docs/reference/json-output.md)."""
        return {
            "command": "snapshot verify",
            "target": self.target,
            "id": self.snapshot_id,
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "label": self.label,
            "expected": [f.to_json() for f in self.expected],
            "other_embedder": self.other_embedder,
        }


def _problem(code: str, path: str | None, message: str, fix: str | None = None) -> Finding:
    return registry.make(code, message, path=path, fix=fix)


def verified_document(report: VerifyReport) -> dict[str, Any]:
    """The ``verified.json`` document of a verification. Pure."""
    return {
        "verified_at": utc.iso(report.verified_at),
        "ok": report.ok,
        "errors": sum(1 for f in report.findings if f.severity is Severity.ERROR),
        "codes": sorted({f.code for f in report.findings}),
        "memsync": __version__,
        "scope": "full",
        "expected": len(report.expected),
    }


def verify_snapshot(
    deployment: Deployment,
    repository: SnapshotRepository,
    snapshot_id: str,
    target: str,
    now: datetime,
    *,
    restorable: bool = False,
) -> VerifyReport:
    """Verify one snapshot of a repository completely and record ``verified.json`` beside it.

    With ``restorable`` (``snapshot verify``), a pair with error findings or writes caught in
    flight is also a ``restore-unclean`` error: restored, it would not check clean. Without it
    (``restore``, ``purge``: they refuse only damaged files), the pair's findings are reported
    as check found them. Writes only ``verified.json`` (to the repository) and temporary files under ``work_dir``.

    Raises:
        ManifestTooNew: the manifest's format is newer than this memsync reads (exit 11).
        UnavailableError: the snapshot is not there (nothing is written), or the repository is
            unreachable or stops answering (``memsync.s3.TransportError``: nothing is written;
            a failed read is never recorded as a verdict).
    """
    if not repository.exists(snapshot_id):
        raise UnavailableError(
            f"snapshot {snapshot_id} not found at {repository.where}",
            "memsync snapshot list (--remote) shows the snapshots there",
        )
    findings, expected, label, other = _findings(
        deployment, repository, snapshot_id, now, restorable
    )
    report = VerifyReport(
        target=target,
        snapshot_id=snapshot_id,
        findings=tuple(sorted(findings, key=Finding.sort_key)),
        verified_at=now,
        expected=tuple(sorted(expected, key=Finding.sort_key)),
        label=label,
        other_embedder=other,
    )
    repository.write_json(snapshot_id, VERIFIED, verified_document(report))
    return report


def verify_directory(
    deployment: Deployment, directory: Path, now: datetime, *, restorable: bool = False
) -> VerifyReport:
    """Verify a local snapshot directory (any path) and record ``verified.json`` in it.

    A ``.partial`` directory is reported incomplete and left untouched. ``restorable``: as in
    ``verify_snapshot``.

    Raises:
        UnavailableError: (exit 11) a directory with no manifest whose name is no snapshot id:
            not a snapshot (a mistyped path: the live store, the snapshot directory); nothing
            is written in it. A snapshot that lost its manifest keeps its id, and is judged.
    """
    if directory.name.endswith(PARTIAL_SUFFIX):
        finding = _problem(
            "manifest-missing",
            str(directory / MANIFEST),
            "the snapshot is incomplete: its "
            "directory still ends in .partial (the create did not finish), so it has no "
            "complete manifest",
            "use another snapshot; the next create removes it",
        )
        return VerifyReport(
            target=str(directory), snapshot_id=directory.name, findings=(finding,), verified_at=now
        )
    if not (directory / MANIFEST).exists() and not ID_PATTERN.match(directory.name):
        raise UnavailableError(
            f"{directory} is not a memsync snapshot (no {MANIFEST}, and its name is no "
            "snapshot id); nothing was written there",
            "name a snapshot by its id or its directory (memsync snapshot list)",
        )
    return verify_snapshot(
        deployment,
        LocalRepository(directory.parent),
        directory.name,
        str(directory),
        now,
        restorable=restorable,
    )


def verify_remote(
    deployment: Deployment, target: str, now: datetime, *, restorable: bool = False
) -> VerifyReport:
    """Verify ``s3://…/<id>``: every object read back into ``work_dir`` and checked there.

    Reads the bucket; writes only ``verified.json`` beside the snapshot there. ``restorable``:
    as in ``verify_snapshot``.
    """
    config = deployment.config
    repository, snapshot_id = parse_s3_target(config, target)
    return verify_snapshot(deployment, repository, snapshot_id, target, now, restorable=restorable)


def _findings(
    deployment: Deployment,
    repository: SnapshotRepository,
    snapshot_id: str,
    now: datetime,
    restorable: bool,
) -> tuple[list[Finding], list[Finding], dict[str, Any] | None, str | None]:
    """(findings, a safety snapshot's expected findings, its label, ``find_mismatch``'s answer)."""
    config = deployment.config
    where = repository.location(snapshot_id, MANIFEST)
    try:
        manifest = repository.read_manifest(snapshot_id)
    except (ManifestTooNew, TransportError):
        raise  # could not read: never a finding about the snapshot, nothing is recorded
    except UnavailableError as error:
        message = (
            "the snapshot has no manifest: it is incomplete or damaged, and nothing in it can be trusted"
            if "no manifest" in error.message
            else error.message
        )
        return (
            [_problem("manifest-missing", where, message, "use another snapshot")],
            [],
            None,
            None,
        )
    key = signing_key(config)
    if key is not None and not signature_ok(manifest, key):
        return (
            [
                _problem(
                    "signature-invalid",
                    where,
                    "the manifest's HMAC-SHA256 signature does not match the configured key: "
                    "the snapshot was altered or signed with another key; nothing was decoded",
                    "use another snapshot, or the signing key it was made with",
                )
            ],
            [],
            None,
            None,
        )
    expected: list[Finding] = []
    with reading.scratch(config, "verify") as temporary:  # a killed run's: removed by the next
        checked = repository.verify(snapshot_id, temporary / "stored")
        findings = [_problem(p.code, p.where, p.message, p.fix) for p in checked.problems]
        good = list(checked.passed)
        with _plaintext(config, repository, snapshot_id, checked, good, findings) as plain:
            if plain is not None:
                listed = {entry.path for entry in manifest.files}
                found, expected = _verify_contents(
                    deployment, plain, manifest, {e.path for e in good}, listed, now, restorable
                )
                findings += found
    return findings, expected, manifest.label, find_mismatch(manifest, config)


@contextmanager
def _plaintext(
    config: Config,
    repository: SnapshotRepository,
    snapshot_id: str,
    checked: FileCheck,
    good: list[FileEntry],
    findings: list[Finding],
) -> Iterator[Path | None]:
    """The plaintext of the files that passed (``good`` loses those that fail to decrypt)."""
    if not checked.manifest.encrypted:
        yield checked.root
        return
    key = encryption_key(config)
    if key is None:
        findings.append(
            _problem(
                "checksum-mismatch",
                repository.location(snapshot_id),
                "the snapshot is "
                "encrypted and no snapshot.encrypt_key_file is configured: contents not verified",
                "configure the key it was made with",
            )
        )
        yield None
        return
    with reading.scratch(config, "verify-plain") as temporary:
        failed = decrypt(checked.root, good, key, temporary)
        for path, why in sorted(failed.items()):
            findings.append(
                _problem("checksum-mismatch", repository.location(snapshot_id, path), why)
            )
        good[:] = [entry for entry in good if entry.path not in failed]
        yield temporary


def _verify_contents(
    deployment: Deployment,
    root: Path,
    manifest: Manifest,
    good: set[str],
    listed: set[str],
    now: datetime,
    restorable: bool,
) -> tuple[list[Finding], list[Finding]]:
    """Check integrity and decoding of the files whose checksums matched, then the pair.

    The pair is checked only when every listed file passed (nothing unverified is unpickled).
    Returns the findings and, for a safety snapshot, the pair's findings its manifest recorded
    when it was taken (``expected``: the damage it keeps by design, never an error here).
    """
    findings: list[Finding] = []
    if HISTORY_FILE in good:
        verdict = integrity(root / HISTORY_FILE, quick=False)
        if verdict != "ok":
            findings.append(
                _problem("integrity-failed", HISTORY_FILE, f"PRAGMA integrity_check: {verdict}")
            )
            good.discard(HISTORY_FILE)
    store = deployment.vector_store  # pure: the layout's names (the collection name is not used)
    index_ok = f"{store.capture_dir}/{store.index_file}" in good
    try:  # an index that failed its checksum is still parsed (plain JSON) to find the files
        vectors = _verified_copies(store, root, manifest, good)
    except UnavailableError:
        if index_ok:
            raise
        return findings, []
    for relative, verdict in store.check_copy(vectors, decode=False).items():
        if verdict != "ok":
            findings.append(
                _problem(
                    "integrity-failed",
                    f"{store.capture_dir}/{relative}",
                    store.integrity_prefix + verdict,
                )
            )
            good.discard(f"{store.capture_dir}/{relative}")
    if not index_ok:
        return findings, []  # no point is decoded before the index passed its checksum
    vectors = _verified_copies(store, root, manifest, good)
    for relative, verdict in store.check_copy(vectors, integrity=False).items():
        if verdict != "ok":
            findings.append(
                _problem("point-undecodable", f"{store.capture_dir}/{relative}", verdict)
            )
            good.discard(f"{store.capture_dir}/{relative}")
    if good != listed:
        return findings, []
    judged = _as_made(deployment, manifest)
    captured = capture.from_directory(root, manifest.capture, judged.config)
    pair = list(check.judge_capture(captured, judged, now.date()).findings)  # streamed
    recorded = _recorded(manifest)
    expected = [f for f in pair if _recorded_key(f) in recorded]
    pair = [f for f in pair if _recorded_key(f) not in recorded]
    return findings + pair + (_unclean(pair) if restorable else []), expected


def _as_made(deployment: Deployment, manifest: Manifest) -> Deployment:
    """The deployment whose vector size the snapshot's pair is judged by. Pure.

    A snapshot taken before ``memsync migrate`` changed the embedder holds the old embedder's
    vectors: judged by the size its manifest records, not the config's, it is a sound backup
    of the deployment as it was (``restore`` refuses it here all the same: ``require_fit``).
    """
    config = deployment.config
    dims = (manifest.embedder or {}).get("dims")
    if find_mismatch(manifest, config) is None or not isinstance(dims, int):
        return deployment
    as_made = replace(config, expected_dims=tuple((key, dims) for key, _ in config.expected_dims))
    return Deployment(as_made, deployment.vector_store)


def _recorded_key(finding: Finding) -> tuple[str, str]:
    return finding.code, finding.memory_id or finding.collection or finding.path or ""


def _recorded(manifest: Manifest) -> set[tuple[str, str]]:
    """A safety snapshot's findings as its create judged them (``check.findings``); else empty.

    A safety snapshot is taken to keep the stores as they were before its command changed
    them, damage included: what its create found is what it was taken to keep.
    """
    if not manifest.safety:
        return set()
    found = manifest.check.get("findings") or []
    return {
        (str(f.get("code")), str(f.get("memory_id") or f.get("collection") or f.get("path") or ""))
        for f in found
        if isinstance(f, dict)
    }


def _unclean(pair: list[Finding]) -> list[Finding]:
    """``restore-unclean`` when the pair has errors or writes caught in flight; else nothing.

    An ``in-flight`` finding in a snapshot is a write half in the copies: restored, it becomes
    the error it stands for (a ``missing-point`` reconcile cannot repair).
    """
    errors = sum(1 for f in pair if f.severity is Severity.ERROR)
    in_flight = sorted({f.memory_id or "" for f in pair if f.code == "in-flight"})
    if not errors and not in_flight:
        return []
    parts = [f"{errors} error findings"] if errors else []
    if in_flight:
        parts.append(f"{len(in_flight)} writes caught in flight ({', '.join(in_flight[:5])})")
    return [
        _problem(
            "restore-unclean",
            None,
            "the captured pair would not restore to a deployment that checks clean: "
            + "; ".join(parts),
        )
    ]


def _verified_copies(
    store: VectorStore, root: Path, manifest: Manifest, good: set[str]
) -> VectorCapture:
    """The snapshot's vector copy, with only the collection files in ``good`` (checksums held)."""
    vectors = store.open_capture(
        root / store.capture_dir, manifest.capture.vectors_at, manifest.capture.vectors_finished_at
    )
    kept = {
        name: copy
        for name, copy in vectors.copies.items()
        if f"{store.capture_dir}/{store.collection_file(name, vectors.root).relative_to(vectors.root)}"
        in good
    }
    return replace(vectors, copies=kept)
