"""``snapshot create``: both stores captured in one job into one dated directory, checked, committed.

``build_manifest`` is pure; ``create_snapshot`` captures into ``<id>.partial/`` of the local
repository and commits it; ``finish_directory`` checks a captured layout and writes its manifest
(also used by ``purge`` to re-finish a rewritten snapshot). Layout and codes: docs/reference/contract.md
("Snapshots"); manifest fields: docs/reference/snapshot-manifest.md.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import __version__, check, seal
from memsync.capture_budget import CaptureBudget
from memsync.config import Config, read_key_file
from memsync.deployment import Deployment
from memsync.errors import ConfigError, UnavailableError
from memsync.model import CaptureWindow, CheckReport, Inventory, count_scopes
from memsync.repository import LocalRepository, encryption_key, snapshot_dir
from memsync.snapshot import guard
from memsync.snapshot.embedder import embedder_of
from memsync.state import fsync_dir, write_json_atomic
from memsync.stores import capture, interpreter, snapshots
from memsync.stores.agent_client import not_held_reason, writes_held
from memsync.stores.manifest import MANIFEST, SAFETY, FileEntry, Manifest, sign
from memsync.stores.sqlite_files import SQLITE_VERSION, integrity, work_dir_error
from memsync.stores.vector_store import refuse_legacy_store

logger = structlog.get_logger(__name__)

Progress = Callable[[int, int], None]

# How many captures ``create_snapshot`` makes at most to get a pair no write was caught in,
# and the pause between two (seconds): each capture is a new, independent copy of both stores.
SETTLE_ATTEMPTS = 5
SETTLE_PAUSE_S = 0.2


@dataclass(frozen=True, slots=True, kw_only=True)
class Created:
    """A snapshot just created: its id, directory, manifest and what the tripwire found."""

    id: str
    path: Path
    manifest: Manifest
    removed_partials: tuple[Path, ...] = ()
    tripwire: guard.TripwireResult | None = None

    def to_json(
        self,
        *,
        budget: CaptureBudget,
        upload: dict[str, Any] | None,
        pending_uploads: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """``snapshot create --json`` (docs/reference/json-output.md).

        ``budget``: the estimate made before the capture; ``upload``: the new snapshot's
        (``--upload``); ``pending_uploads``: the run's pending uploads (None without it).
        """
        manifest = self.manifest
        return {
            "command": "snapshot create",
            "id": self.id,
            "path": str(self.path),
            "size_bytes": manifest.size_bytes,
            "files": len(manifest.files),
            "collections": manifest.collections,
            "history": manifest.history,
            "check": {
                **{k: v for k, v in manifest.check.items() if k != "findings"},
                "error_findings": error_findings(manifest.check)[:SHOWN_ERRORS],
            },
            "encrypted": manifest.encrypted,
            "signed": manifest.signature is not None,
            "upload": upload,
            "removed_partials": [str(p) for p in self.removed_partials],
            "quiesced": bool(manifest.quiesced),
            "route": "agent" if manifest.quiesced is not None else "none",
            "not_quiesced": manifest.not_quiesced,
            "capture_budget": budget.to_json(),
            **(self.tripwire.report() if self.tripwire else {}),  # findings, tripwire
            "pending_uploads": pending_uploads,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CapturePlan:
    """``snapshot create --dry-run``: where a capture would go, from what, and its budget."""

    directory: Path
    sources: tuple[str, ...]
    upload: bool
    budget: CaptureBudget
    pending_uploads: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``snapshot create --dry-run --json``."""
        return {
            "command": "snapshot create",
            "dry_run": True,
            "directory": str(self.directory),
            "sources": list(self.sources),
            "upload": self.upload,
            "capture_budget": self.budget.to_json(),
            "pending_uploads": list(self.pending_uploads),
        }


SHOWN_ERRORS = 20  # error findings a create report lists (the manifest keeps them all)


def error_findings(check: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The error-severity findings of a manifest's ``check`` (as ``Finding.to_json``)."""
    found = check.get("findings") or []
    return [f for f in found if isinstance(f, dict) and f.get("severity") == "error"]


def build_manifest(
    *,
    snapshot_id: str,
    created_at: datetime,
    collection: str,
    window: CaptureWindow,
    files: Sequence[FileEntry],
    collections: dict[str, dict[str, Any]],
    history: dict[str, int],
    integrity_results: dict[str, Any],
    report: CheckReport,
    versions: dict[str, str | None],
    encryption: dict[str, Any] | None,
) -> Manifest:
    """Assemble the manifest (no signature yet). Pure."""
    return Manifest(
        id=snapshot_id,
        created_at=created_at,
        collection=collection,
        versions={"memsync": __version__, "sqlite": SQLITE_VERSION, **versions},
        capture=replace(window, longest_read_s=round(window.longest_read_s, 4)),
        files=tuple(sorted(files, key=lambda entry: entry.path)),
        collections=collections,
        history=history,
        integrity=integrity_results,
        check={
            **report.counts(),
            "findings": [f.to_json() for f in report.findings],
            "unsettled": unsettled(report),
        },
        encryption=encryption,
    )


def _with_backend(manifest: Manifest, captured: capture.Captured) -> Manifest:
    """The manifest with the backend's ``mode`` and the versions its capture recorded.

    pgvector: ``"pgvector"`` and the server's versions; embedded Qdrant: ``"embedded"``, none.
    """
    store = captured.store
    server = store.captured_versions(captured.vectors)
    return replace(manifest, mode=store.mode, versions={**manifest.versions, **server})


def unsettled(report: CheckReport) -> list[str]:
    """The memory ids of the report's ``in-flight`` findings, sorted and unique. Pure.

    A write caught between the vector and the history capture: restored, such a pair would
    give the error the finding stands for (a ``missing-point`` reconcile cannot repair).
    """
    return sorted({f.memory_id or f.message for f in report.findings if f.code == "in-flight"})


def signing_key(config: Config) -> bytes | None:
    """The configured manifest signing key (at least 16 bytes), or None.

    Raises:
        ConfigError: the key file is unreadable or too short.
    """
    path = config.snapshot.signing_key_file
    if path is None:
        return None
    key = read_key_file(path, "snapshot.signing_key_file", config.source).strip()
    if len(key) < 16:
        problem = f"snapshot.signing_key_file: key file {path} must hold at least 16 bytes"
        raise ConfigError(config.source, [problem])
    return key


def _integrity_verdicts(captured: capture.Captured, partial: Path) -> dict[str, str]:
    """``PRAGMA integrity_check`` of every captured file, by path relative to ``partial``.

    The vector copies first (through ``VectorStore.check_copy``, in capture order), then history.db.
    """
    store, vectors = captured.store, captured.vectors
    checked = store.check_copy(vectors, decode=False)
    base = str(vectors.root.relative_to(partial))
    results = {}
    for name in vectors.copies:
        relative = str(store.collection_file(name, vectors.root).relative_to(vectors.root))
        results[f"{base}/{relative}"] = checked[relative]
    if captured.history_copy is not None:
        path = captured.history_copy.dest
        results[str(path.relative_to(partial))] = integrity(path, quick=False)
    return results


def create_snapshot(
    deployment: Deployment,
    now: datetime,
    progress: Progress | None = None,
    *,
    by: str | None = None,
) -> Created:
    """Capture both stores into ``<snapshot.directory>/<id>/`` with an integrity-checked manifest.

    ``by``: the command taking it as a safety snapshot before it changes the stores (its
    manifest's ``label``, ``{"kind": "safety", "by": by}``); None for an ordinary snapshot.

    Built under ``<id>.partial/`` (files 0600, directories 0700, fsynced, ``.creating``
    flock-held) and renamed when complete; stale ``.partial`` directories of dead creates are
    removed first. Takes no lock on the deployment and never writes to it.

    Raises:
        ConfigError: no snapshot directory, or an unreadable key file.
        UnavailableError: a store is unreadable, damaged, or a copy fails its integrity check
            (the partial directory is removed).
        TryLaterError: a store is busy or the snapshot disk is full.
    """
    config = deployment.config
    directory = snapshot_dir(config)
    keys = signing_key(config), encryption_key(config)
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileExistsError, NotADirectoryError) as error:
        raise ConfigError(
            config.source, [f"snapshot.directory: {directory} is not a directory"]
        ) from error
    except OSError as error:
        raise work_dir_error(directory, error) from error
    removed = snapshots.remove_stale_partials(directory)
    repository = LocalRepository(directory)
    with repository.building(now) as (snapshot_id, partial):
        captured, judged, quiesced, why = _settled_capture(
            deployment, partial, now.date(), progress
        )
        manifest = finish_directory(
            deployment,
            partial,
            captured,
            snapshot_id,
            now,
            now.date(),
            *keys,
            progress=progress,
            judged=judged,
            quiesced=quiesced,
            not_quiesced=why,
            embedder=embedder_of(config),
            label=None if by is None else {"kind": SAFETY, "by": by},
        )
        final = repository.commit(snapshot_id, partial, None)
    logger.info("snapshot_created", snapshot_id=snapshot_id, size_bytes=manifest.size_bytes)
    checked = guard.run_tripwire(deployment, repository, manifest, now, judged[0])  # never fails it
    return Created(
        id=snapshot_id,
        path=final,
        manifest=manifest,
        removed_partials=tuple(removed),
        tripwire=checked,
    )


def _settled_capture(
    deployment: Deployment, partial: Path, today: date, progress: Progress | None
) -> tuple[capture.Captured, tuple[Inventory, CheckReport], bool | None, str | None]:
    """Capture into ``partial``: quiesced through the app's agent, else until settled.

    With an agent (``agent_client.find_agent``), app writes are paused for the one capture,
    so both stores are copied at one instant (``quiesced`` True unless the lease ran out or a
    process wrote history.db outside the agent's gate: ``agent_client.not_held_reason``).
    Without, at most ``SETTLE_ATTEMPTS`` captures, ``SETTLE_PAUSE_S`` apart, until no write
    is caught in the window (``in-flight``); each new one replaces the files of the last.
    Returns the capture, its inventory and judged report, ``quiesced`` (None: no agent
    answered; False: it did, but the pair kept is not one instant) and why it is not. Raises as
    ``capture.capture``; UnavailableError when an agent serves another deployment, refuses
    memsync or is not this deployment's app (never an unquiesced capture then).
    """
    config = deployment.config
    quiesced = _quiesced_capture(deployment, partial)
    agent = None if quiesced is None else False
    why = None if quiesced is None else quiesced[2]
    for attempt in range(1, SETTLE_ATTEMPTS + 1):
        captured = (
            quiesced[0] if quiesced else capture.capture(deployment.vector_store, config, partial)
        )
        # its points would be missing
        refuse_legacy_store(captured.vectors.legacy_files, "snapshot create")
        inventory = capture.read_inventory(deployment.vector_store, captured, config, progress)
        report = check.judge(inventory, today)
        exact = quiesced is not None and quiesced[1]
        if exact or not unsettled(report):
            return captured, (inventory, report), exact or agent, None if exact else why
        quiesced = None
        if attempt == SETTLE_ATTEMPTS:
            break
        logger.info("snapshot_recapture", attempt=attempt, unsettled=len(unsettled(report)))
        _clear_capture(partial)
        time.sleep(SETTLE_PAUSE_S)
    logger.warning("snapshot_unsettled", unsettled=unsettled(report))
    return captured, (inventory, report), agent, why


def _quiesced_capture(
    deployment: Deployment, partial: Path
) -> tuple[capture.Captured, bool, str | None] | None:
    """One capture with the app's writes paused by its agent; None when no agent answers.

    Returns the capture, whether it was exact (the pause held every app write for the whole
    copy: the lease, ``[app] pause_lease_s``, did not run out, and no process had history.db
    open for writing outside the agent's gate) and, when not, why. Logs ``capture_quiesced``
    with the seconds app writes were held and the pids held; ``capture_not_quiesced`` when not.
    """
    config = deployment.config
    with writes_held(deployment.vector_store, config) as pause:
        if pause is None:
            return None
        captured = capture.capture(deployment.vector_store, config, partial)
    why = not_held_reason(pause)
    logger.info(
        "capture_quiesced",
        held_s=pause.get("held_s"),
        waited_s=pause.get("waited_s"),
        exact=why is None,
        agent_pid=pause.get("agent_pid"),
        covered=pause.get("covered"),
    )
    if why is not None:
        logger.warning("capture_not_quiesced", reason=why)
    return captured, why is None, why


def _clear_capture(partial: Path) -> None:
    """Remove the captured files of ``partial`` (all but the ``.creating`` lock)."""
    for path in partial.iterdir():
        if path.name == snapshots.CREATING_LOCK:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def finish_directory(
    deployment: Deployment,
    partial: Path,
    captured: capture.Captured,
    snapshot_id: str,
    created_at: datetime,
    today: date,
    signing: bytes | None,
    encryption: bytes | None,
    progress: Progress | None = None,
    journal_modes: Mapping[str, str] | None = None,
    judged: tuple[Inventory, CheckReport] | None = None,
    quiesced: bool | None = None,
    embedder: dict[str, Any] | None = None,
    not_quiesced: str | None = None,
    label: dict[str, Any] | None = None,
) -> Manifest:
    """Check a captured layout in ``partial`` and write its manifest (sealing files when keyed).

    Runs ``integrity_check`` on every SQLite file, decodes every point, judges the pair,
    hashes (and with a key, seals) every file, sets modes 0600/0700, writes the manifest.
    ``journal_modes`` (by path in the snapshot) stands in for the live files' modes when the
    layout is not a fresh capture (a purge rewrites an existing snapshot). ``judged``, when
    given, is the layout's already read inventory and its report (neither is redone).
    ``quiesced`` and ``embedder`` (None: not recorded) go to ``capture.quiesced`` and ``embedder``;
    ``not_quiesced`` (why an agent's pause did not hold every write) to ``capture.not_quiesced``
    when ``quiesced`` is False; ``label`` (a safety snapshot's) to ``label``.

    Raises:
        UnavailableError: a file fails its integrity check or a point does not decode.
    """
    config = deployment.config
    results = _integrity(captured, partial)
    inventory, report = judged or (None, None)
    if inventory is None:
        inventory = capture.read_inventory(deployment.vector_store, captured, config, progress)
    collections, wrong_sizes = _collections(config, captured, inventory)
    results["points_decoded"] = True
    results["vector_sizes_ok"] = wrong_sizes == 0
    manifest = build_manifest(
        snapshot_id=snapshot_id,
        created_at=created_at,
        collection=config.collection,
        window=captured.window,
        files=_file_entries(
            partial, encryption, {**(journal_modes or {}), **_journal_modes(captured, partial)}
        ),
        collections=collections,
        history={"rows": inventory.history_rows, "memories": len(inventory.history)},
        integrity_results=results,
        report=report or check.judge(inventory, today),
        versions=_app_versions(config),
        encryption={"algorithm": seal.ALGORITHM} if encryption else None,
    )
    manifest = replace(
        manifest,
        quiesced=quiesced,
        not_quiesced=not_quiesced if quiesced is False else None,
        embedder=embedder,
        label=label,
    )
    manifest = _with_backend(manifest, captured)
    manifest = replace(  # the mass-deletion tripwire's counts (memsync.snapshot.tripwire)
        manifest, scopes=count_scopes(p.payload for p in inventory.points.values())
    )
    if signing is not None:
        manifest = replace(manifest, signature=sign(manifest, signing))
    for path in sorted(partial.rglob("*")):
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    write_json_atomic(partial / MANIFEST, manifest.to_json())
    return manifest


def _integrity(captured: capture.Captured, partial: Path) -> dict[str, Any]:
    """``PRAGMA integrity_check`` of every captured SQLite file. Raises UnavailableError when one fails."""
    results: dict[str, Any] = {}
    for relative, verdict in _integrity_verdicts(captured, partial).items():
        results[relative] = verdict
        if verdict != "ok":
            raise UnavailableError(
                f"the copy of {relative} fails PRAGMA integrity_check ({verdict})",
                "the live file is damaged: run memsync doctor; restore it from an older snapshot",
            )
    return results


def _collections(
    config: Config, captured: capture.Captured, inventory: Inventory
) -> tuple[dict[str, dict[str, Any]], int]:
    """Per collection: vector size, distance and points; and how many vectors have the wrong size."""
    collections: dict[str, dict[str, Any]] = {}
    wrong_sizes = 0
    for name, info in sorted(captured.collections.items()):
        if name == config.collection:
            sizes = [p.vector_size for p in inventory.points.values()]
        else:
            sizes = [p.vector_size for p in captured.store.iter_points(captured.vectors, name)]
        wrong_sizes += sum(
            1 for size in sizes if info.vector_size is not None and size != info.vector_size
        )
        collections[name] = {
            "vector_size": info.vector_size,
            "distance": info.distance,
            "points": len(sizes),
        }
    return collections, wrong_sizes


def _journal_modes(captured: capture.Captured, partial: Path) -> dict[str, str]:
    """Each copied SQLite file's live journal mode, by its path in the snapshot."""
    copies = [*captured.collection_copies.values(), captured.history_copy]
    return {
        str(copy.dest.relative_to(partial)): copy.journal_mode
        for copy in copies
        if copy is not None and copy.journal_mode is not None and copy.dest.is_relative_to(partial)
    }


def _file_entries(partial: Path, key: bytes | None, modes: dict[str, str]) -> list[FileEntry]:
    entries = []
    for path in sorted(
        p for p in partial.rglob("*") if p.is_file() and p.name != snapshots.CREATING_LOCK
    ):
        relative = str(path.relative_to(partial))
        size, digest = snapshots.sha256_file(path)
        if key is not None:
            sealed = path.with_name(path.name + ".sealing")
            seal.seal_file(path, sealed, key, relative)
            os.replace(sealed, path)
            stored_size, stored_sha256 = snapshots.sha256_file(path)
            entries.append(
                FileEntry(
                    path=relative,
                    size=size,
                    sha256=digest,
                    stored_size=stored_size,
                    stored_sha256=stored_sha256,
                    journal_mode=modes.get(relative),
                )
            )
            continue
        with path.open("rb+") as handle:
            os.fsync(handle.fileno())
        entries.append(
            FileEntry(path=relative, size=size, sha256=digest, journal_mode=modes.get(relative))
        )
    for directory in sorted({p.parent for p in partial.rglob("*")} | {partial}):
        fsync_dir(directory)
    return entries


def _app_versions(config: Config) -> dict[str, str | None]:
    """The app's mem0ai and qdrant-client, as last recorded (``[app] python`` or learned).

    Not run here (a snapshot never starts the app's interpreter): null until memsync has
    measured them once (doctor, a write). memsync's own are not the store's.
    """
    found = interpreter.shown(config) or {}
    return {"mem0ai": found.get("mem0ai"), "qdrant-client": found.get("qdrant_client")}
