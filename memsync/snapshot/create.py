"""``snapshot create``: both stores captured in one job into one dated directory, checked, committed.

``build_manifest`` is pure; ``create_snapshot`` captures into ``<id>.partial/`` of the local
repository and commits it; ``finish_directory`` checks a captured layout and writes its manifest
(also used by ``purge`` to re-finish a rewritten snapshot). Layout and codes: docs/reference/contract.md
("Snapshots"); manifest fields: docs/reference/snapshot-manifest.md.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
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
from memsync.model import CaptureWindow, CheckReport, Inventory
from memsync.repository import LocalRepository, encryption_key, reading, snapshot_dir
from memsync.snapshot import guard
from memsync.state import fsync_dir, write_json_atomic
from memsync.stores import capture, interpreter, journal_mode, snapshots
from memsync.stores.agent_client import not_held_reason, writes_held
from memsync.stores.embedder import embedder_of
from memsync.stores.manifest import MANIFEST, SAFETY, FileEntry, Manifest, sign
from memsync.stores.sqlite_files import SQLITE_VERSION, integrity, work_dir_error
from memsync.stores.vector_store import refuse_legacy_store

logger = structlog.get_logger(__name__)

Progress = Callable[[int, int], None]

# How many captures ``create_snapshot`` makes at most to get a pair no write was caught in,
# each the in-flight margin after the last: a new, independent copy of both stores.
SETTLE_ATTEMPTS = 5

# Until what a quiesced capture held the app's writes (``Held.until``): the read snapshots of
# every file opened (WAL mode), or the whole copy (a rollback-journal file, a server store).
HELD_FOR_SNAPSHOTS = "read-snapshots"
HELD_FOR_COPY = "copy"


@dataclass(frozen=True, slots=True, kw_only=True)
class Held:
    """How long the app's agent held its writes for a capture (seconds, as the agent measured)."""

    seconds: float | None
    until: str  # HELD_FOR_SNAPSHOTS or HELD_FOR_COPY

    def to_json(self) -> dict[str, Any]:
        """``{"s": seconds, "until": ...}`` for the JSON report. Pure."""
        return {"s": self.seconds, "until": self.until}

    def text(self) -> str:
        """``held 0.004 s until the read snapshots opened`` (or ``... until the copy ended``)."""
        seconds = "?" if self.seconds is None else f"{self.seconds:.3f}"
        until = (
            "the read snapshots opened" if self.until == HELD_FOR_SNAPSHOTS else "the copy ended"
        )
        return f"held {seconds} s until {until}"


@dataclass(frozen=True, slots=True)
class Judgement:
    """A capture's check report and its memory collection's points per vector size."""

    report: CheckReport
    sizes: Mapping[int | None, int]


def judge_copy(
    captured: capture.Captured,
    deployment: Deployment,
    today: date,
    progress: Progress | None = None,
) -> Judgement:
    """Judge a capture as a stream (``check.judge_capture``), counting vector sizes on the way.

    Holds a chunk of memories, not the inventory. Raises as ``check.judge_capture``.
    """
    sizes: Counter[int | None] = Counter()
    report = check.judge_capture(captured, deployment, today, progress=progress, sizes=sizes)
    return Judgement(report, sizes)


@dataclass(frozen=True, slots=True)
class Checked:
    """A captured layout's files read back: integrity verdicts, and (size, sha256) by path."""

    verdicts: dict[str, str]
    digests: dict[str, tuple[int, str]]


def check_files(captured: capture.Captured, partial: Path) -> Checked:
    """``PRAGMA integrity_check`` of every captured SQLite file and the sha256 of every file.

    Reads only. SQLite and hashlib let go of the GIL while they work, so ``create_snapshot``
    runs this in a thread beside the judge's decoding.
    """
    verdicts = _integrity_verdicts(captured, partial)
    digests = {
        str(path.relative_to(partial)): snapshots.sha256_file(path) for path in _files(partial)
    }
    return Checked(verdicts, digests)


def _files(partial: Path) -> list[Path]:
    """Every file of a layout but the ``.creating`` lock, sorted."""
    return sorted(
        p for p in partial.rglob("*") if p.is_file() and p.name != snapshots.CREATING_LOCK
    )


def _in_background(captured: capture.Captured, partial: Path) -> Future[Checked]:
    """``check_files`` in a thread of its own; its result (or error) when asked."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-files")
    try:
        return pool.submit(check_files, captured, partial)
    finally:
        pool.shutdown(wait=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Created:
    """A snapshot just created: its id, directory, manifest and what the tripwire found."""

    id: str
    path: Path
    manifest: Manifest
    removed_partials: tuple[Path, ...] = ()
    tripwire: guard.TripwireResult | None = None
    writes_held: Held | None = None  # None: no agent paused the app's writes

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
            "writes_held": self.writes_held.to_json() if self.writes_held else None,
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
        fresh = captured.history_copy.source != path  # captured now, not a purge's file at rest
        results[str(path.relative_to(partial))] = integrity(path, quick=False, fresh=fresh)
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
    removed first. Takes no lock on the deployment and never writes to it, but for rolling back
    a hot journal a killed writer left while no app holds the store (as the app's start would).

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
    store = deployment.vector_store
    holder = store.holder()
    if holder is None or holder.pid == os.getpid():  # the app is not running (or it crashed)
        # a hot journal a killed writer left, rolled back as the app's next start would, so
        # snapshots go on while the app is down after a crash (a read-only copy cannot)
        journal_mode.roll_back_hot_journals(store, config.history_db_path)
    repository = LocalRepository(directory)
    with (
        repository.building(now) as (snapshot_id, partial),
        capture.scratch_directory(config) as side,
    ):
        captured, judged, checked, quiesced, why, held = _settled_capture(
            deployment, partial, now.date(), progress, side / "inventory"
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
            checked=checked,
            quiesced=quiesced,
            not_quiesced=why,
            embedder=embedder_of(config),
            label=None if by is None else {"kind": SAFETY, "by": by},
        )
        final = repository.commit(snapshot_id, partial, None)
    logger.info("snapshot_created", snapshot_id=snapshot_id, size_bytes=manifest.size_bytes)
    tripwire = guard.run_tripwire(  # never fails it; reads the capture again only on a drop
        deployment,
        repository,
        manifest,
        now,
        lambda: _committed_inventory(deployment, repository, manifest),
    )
    return Created(
        id=snapshot_id,
        path=final,
        manifest=manifest,
        removed_partials=tuple(removed),
        tripwire=tripwire,
        writes_held=held,
    )


def _settled_capture(
    deployment: Deployment,
    partial: Path,
    today: date,
    progress: Progress | None,
    inventory: Path | None = None,
) -> tuple[capture.Captured, Judgement, Future[Checked], bool | None, str | None, Held | None]:
    """Capture into ``partial``: quiesced through the app's agent, else until settled.

    ``inventory``: a scratch directory (outside the snapshot) where the vector store may write
    an inventory-only export of the same instant, which the judge reads instead of the
    snapshot's full rows (``capture.capture``); the caller removes it.

    With an agent (``agent_client.find_agent``), app writes are paused for the one capture,
    so both stores are copied at one instant (``quiesced`` True unless the lease ran out or a
    process wrote history.db outside the agent's gate: ``agent_client.not_held_reason``).
    Without, at most ``SETTLE_ATTEMPTS`` captures, each after the in-flight margin has passed
    since the last (``check.wait_out_the_margin``), until no write is caught in the window
    (``in-flight``): a pair disagreement the first capture finds (``check.maybe_in_flight``: a
    delete in flight looks like a ``missing-point``) is captured again, and one a capture
    alone shows is in flight (``check.seen_twice``); each new one replaces the files of the
    last.
    Returns the capture, its judgement (``judge_copy``), its files' ``check_files`` (run in a
    thread beside the judge), ``quiesced`` (None: no agent
    answered; False: it did, but the pair kept is not one instant), why it is not, and how long
    the agent held the app's writes (None: no agent). Raises as
    ``capture.capture``; UnavailableError when an agent serves another deployment, refuses
    memsync or is not this deployment's app (never an unquiesced capture then).
    """
    config = deployment.config
    quiesced = _quiesced_capture(deployment, partial, inventory)
    agent = None if quiesced is None else False
    why = None if quiesced is None else quiesced[2]
    held = None if quiesced is None else quiesced[3]
    before: CheckReport | None = None  # the capture before, a margin earlier
    for attempt in range(1, SETTLE_ATTEMPTS + 1):
        captured = (
            quiesced[0]
            if quiesced
            else capture.capture(deployment.vector_store, config, partial, inventory=inventory)
        )
        # its points would be missing
        refuse_legacy_store(captured.vectors.legacy_files, "snapshot create")
        checked = _in_background(captured, partial)
        try:
            judged = judge_copy(captured, deployment, today, progress)
        except BaseException:
            wait([checked])  # it reads the files the caller is about to remove
            raise
        if before is not None:  # a disagreement this capture alone shows is in flight
            judged = replace(judged, report=check.seen_twice(before, judged.report))
        report = judged.report
        exact = quiesced is not None and quiesced[1]
        to_settle = unsettled(report) or (before is None and check.maybe_in_flight(report))
        if exact or not to_settle:
            return captured, judged, checked, exact or agent, None if exact else why, held
        quiesced = None
        if attempt == SETTLE_ATTEMPTS:
            break
        logger.info("snapshot_recapture", attempt=attempt, unsettled=len(unsettled(report)))
        wait([checked])
        _clear_capture(partial)
        check.wait_out_the_margin(report.window)
        before = report
    logger.warning("snapshot_unsettled", unsettled=unsettled(report))
    return captured, judged, checked, agent, why, held


def _quiesced_capture(
    deployment: Deployment, partial: Path, inventory: Path | None = None
) -> tuple[capture.Captured, bool, str | None, Held] | None:
    """One capture with the app's writes paused by its agent; None when no agent answers.

    The pause lasts until the read snapshots of every store file are open, when each file is
    in WAL mode (``capture.capture``'s ``on_pinned``): the copies are made from them while
    the app writes again. Otherwise (a rollback-journal file, or a server vector store) it
    lasts the whole copy: a reader of a rollback-journal file blocks the app's writer anyway,
    and only a pause keeps the two copies one instant.

    Returns the capture, whether it was exact (the pause held every app write until the pair
    was fixed: the lease, ``[app] pause_lease_s``, did not run out, and no process had
    history.db open for writing outside the agent's gate), when not why, and how long writes
    were held and until what. Logs ``capture_quiesced`` with the seconds app writes were held
    and the pids held; ``capture_not_quiesced`` when not.
    """
    config = deployment.config
    with ExitStack() as holding:
        pause = holding.enter_context(writes_held(deployment.vector_store, config))
        if pause is None:
            return None
        until = [HELD_FOR_COPY]

        def resume_when_pinned(every: bool) -> None:
            if every:
                until[0] = HELD_FOR_SNAPSHOTS
                holding.close()  # the agent resumes the app's writes now

        captured = capture.capture(
            deployment.vector_store,
            config,
            partial,
            on_pinned=resume_when_pinned,
            inventory=inventory,
        )
    why = not_held_reason(pause)
    held = Held(seconds=pause.get("held_s"), until=until[0])
    logger.info(
        "capture_quiesced",
        held_s=held.seconds,
        held_until=held.until,
        waited_s=pause.get("waited_s"),
        exact=why is None,
        agent_pid=pause.get("agent_pid"),
        covered=pause.get("covered"),
    )
    if why is not None:
        logger.warning("capture_not_quiesced", reason=why)
    return captured, why is None, why, held


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
    judged: Judgement | None = None,
    checked: Future[Checked] | None = None,
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
    given, is the layout's judgement (``judge_copy``: not redone), and ``checked`` its
    files' ``check_files`` under way.
    ``quiesced`` and ``embedder`` (None: not recorded) go to ``capture.quiesced`` and ``embedder``;
    ``not_quiesced`` (why an agent's pause did not hold every write) to ``capture.not_quiesced``
    when ``quiesced`` is False; ``label`` (a safety snapshot's) to ``label``.

    Raises:
        UnavailableError: a file fails its integrity check or a point does not decode.
    """
    config = deployment.config
    files = checked.result() if checked is not None else check_files(captured, partial)
    results = _integrity(files.verdicts)
    judged = judged or judge_copy(captured, deployment, today, progress)
    report = judged.report
    collections, wrong_sizes = _collections(config, captured, judged.sizes)
    results["points_decoded"] = True
    results["vector_sizes_ok"] = wrong_sizes == 0
    manifest = build_manifest(
        snapshot_id=snapshot_id,
        created_at=created_at,
        collection=config.collection,
        window=captured.window,
        files=_file_entries(
            partial,
            encryption,
            {**(journal_modes or {}), **_journal_modes(captured, partial)},
            files.digests,
        ),
        collections=collections,
        history={"rows": report.history_rows, "memories": report.history_memories},
        integrity_results=results,
        report=report,
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
    scopes = dict(report.scopes) if report.scopes is not None else None
    manifest = replace(manifest, scopes=scopes)  # the tripwire's counts (snapshot.tripwire)
    if signing is not None:
        manifest = replace(manifest, signature=sign(manifest, signing))
    for path in sorted(partial.rglob("*")):
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    write_json_atomic(partial / MANIFEST, manifest.to_json())
    return manifest


def _integrity(verdicts: Mapping[str, str]) -> dict[str, Any]:
    """The ``PRAGMA integrity_check`` verdicts. Raises UnavailableError when one is not ``ok``."""
    results: dict[str, Any] = {}
    for relative, verdict in verdicts.items():
        results[relative] = verdict
        if verdict != "ok":
            raise UnavailableError(
                f"the copy of {relative} fails PRAGMA integrity_check ({verdict})",
                "the live file is damaged: run memsync doctor; restore it from an older snapshot",
            )
    return results


def _collections(
    config: Config, captured: capture.Captured, memory_sizes: Mapping[int | None, int]
) -> tuple[dict[str, dict[str, Any]], int]:
    """Per collection: vector size, distance and points; and how many vectors have the wrong size.

    ``memory_sizes``: the memory collection's points per vector size, as judged; the other
    collections (mem0's entities) are read here.
    """
    collections: dict[str, dict[str, Any]] = {}
    wrong_sizes = 0
    for name, info in sorted(captured.collections.items()):
        if name == config.collection:
            sizes = Counter(memory_sizes)
        else:
            sizes = Counter(
                p.vector_size for p in captured.store.iter_points(captured.vectors, name)
            )
        if info.vector_size is not None:
            wrong_sizes += sum(n for size, n in sizes.items() if size != info.vector_size)
        collections[name] = {
            "vector_size": info.vector_size,
            "distance": info.distance,
            "points": sum(sizes.values()),
        }
    return collections, wrong_sizes


def _committed_inventory(
    deployment: Deployment, repository: LocalRepository, manifest: Manifest
) -> Inventory:
    """The inventory of a committed snapshot, read from its plaintext (the tripwire's split).

    Raises:
        UnavailableError, ConfigError: as ``reading.open_files`` and ``read_inventory``.
    """
    config = deployment.config
    with reading.scratch(config, "tripwire-new") as area:
        paths = [entry.path for entry in manifest.files]
        opened = reading.open_files(config, repository, manifest.id, paths, area)
        captured = capture.from_directory(opened.root, manifest.capture, config)
        return capture.read_inventory(deployment.vector_store, captured, config)


def _journal_modes(captured: capture.Captured, partial: Path) -> dict[str, str]:
    """Each copied SQLite file's live journal mode, by its path in the snapshot."""
    copies = [*captured.collection_copies.values(), captured.history_copy]
    return {
        str(copy.dest.relative_to(partial)): copy.journal_mode
        for copy in copies
        if copy is not None and copy.journal_mode is not None and copy.dest.is_relative_to(partial)
    }


def _file_entries(
    partial: Path,
    key: bytes | None,
    modes: dict[str, str],
    digests: Mapping[str, tuple[int, str]],
) -> list[FileEntry]:
    """Each file's entry (``digests``: its size and sha256, else read here), sealed when keyed."""
    entries = []
    for path in _files(partial):
        relative = str(path.relative_to(partial))
        size, digest = digests.get(relative) or snapshots.sha256_file(path)
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
