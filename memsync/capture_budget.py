"""The capture budget: how long a capture will hold its read on each live file, estimated first.

A capture copies each live SQLite file with one ``VACUUM INTO``: one read transaction for the
whole copy. In rollback mode (mem0's default) the app's writer cannot commit while it is held,
and mem0ai 2.2.1 and qdrant-client 1.20 give up after Python's 5 s busy timeout
(``BUSY_TIMEOUT_S``) with ``database is locked``. In WAL mode readers never block the writer,
so WAL files have no budget.

The estimate, per file: ``hold_s = size_bytes / rate``, where ``rate`` (bytes per second) is
the slowest of the last ``KEEP_SAMPLES`` copy rates measured by real captures on this machine
and recorded in ``<state_dir>/capture-rate.json`` (``record_manifest`` after each
``snapshot create``; doctor also counts the rates of its own capture). A copy smaller than
``MIN_SAMPLE_BYTES`` is never a sample (fixed costs dominate its time). Until a large enough
capture was measured, the rate is ``DEFAULT_RATE_BYTES_PER_S``, below every rate measured on
mem0 stores so far (150-200 MB/s at 2 cores, docs/how-to/wal-mode.md). A deliberate choice: a
calibration copy of a scratch file would time a fresh, unfragmented file on memsync's work
disk, not the store's disk and layout, and read faster than the store it stands for.

A file whose estimate exceeds ``WARN_HOLD_S`` (2.5 s: half the busy timeout, a 2x margin for
the rate's spread between captures) and that is not in WAL mode is "near the timeout":
``snapshot create`` logs ``capture_near_busy_timeout`` and reports it in its JSON
(``capture_budget``), and doctor emits ``wal-recommended``. The fix is ``memsync tune --wal``.
When the app's agent answers, ``snapshot create`` pauses the app's writes for its capture
(they wait at the agent's gate, not on SQLite), so it warns about nothing; ``check`` and
``doctor`` captures are never paused, so doctor's recommendation stands.

The state file (version 1)::

    {"version": 1, "samples": [{"bytes_per_s": float, "measured_at": "<UTC ISO 8601 Z>",
      "source": "history.db" | "collections", "sample_bytes": int, "sample_s": float}, ...]}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memsync.config import Config
from memsync.errors import MemsyncError
from memsync.state import write_json_atomic
from memsync.stores.agent_client import find_agent
from memsync.stores.journal_mode import WAL, LiveFile, live_files
from memsync.stores.manifest import Manifest
from memsync.stores.sqlite_files import CopyResult
from memsync.stores.vector_store import VectorStore
from memsync.utc import iso, parse

logger = structlog.get_logger(__name__)

RATE_FILE = "capture-rate.json"
VERSION = 1
BUSY_TIMEOUT_S = 5.0  # Python's sqlite3 default, kept by mem0ai 2.2.1 and qdrant-client 1.20
WARN_HOLD_S = 2.5  # half of BUSY_TIMEOUT_S
MIN_SAMPLE_BYTES = 4 * 1024 * 1024
KEEP_SAMPLES = 5
DEFAULT_RATE_BYTES_PER_S = 100_000_000.0
FIX = "memsync tune --wal"
AGENT_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyRate:
    """One measured copy rate: bytes copied per second by one capture's ``VACUUM INTO``.

    Attributes:
        bytes_per_s: copied bytes (of the compact copy) per second of read transaction.
        measured_at: when the copy finished (UTC).
        source: what was copied (``"history.db"``, ``"collections"``, a file label), or
            ``"default"`` for the built-in rate.
        sample_bytes: bytes copied (0 for the default).
        sample_s: seconds the read transaction lasted (0 for the default).
    """

    bytes_per_s: float
    measured_at: datetime | None
    source: str
    sample_bytes: int = 0
    sample_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The sample as stored in ``capture-rate.json`` (and reported in JSON output)."""
        return {
            "bytes_per_s": round(self.bytes_per_s, 1),
            "measured_at": iso(self.measured_at) if self.measured_at else None,
            "source": self.source,
            "sample_bytes": self.sample_bytes,
            "sample_s": round(self.sample_s, 4),
        }


DEFAULT_RATE = CopyRate(bytes_per_s=DEFAULT_RATE_BYTES_PER_S, measured_at=None, source="default")


@dataclass(frozen=True, slots=True, kw_only=True)
class FileBudget:
    """One live file's estimated read hold during a capture.

    Attributes:
        path: the live file.
        label: ``"history.db"`` or ``"collection <name>"``.
        journal_mode: ``"wal"``, ``"rollback"``, or None (no SQLite header yet).
        size_bytes: the main file's size.
        estimated_hold_s: ``size_bytes / rate`` in seconds.
        near_timeout: not WAL and the estimate exceeds the threshold.
    """

    path: Path
    label: str
    journal_mode: str | None
    size_bytes: int
    estimated_hold_s: float
    near_timeout: bool

    def to_json(self) -> dict[str, Any]:
        """The file's entry in ``capture_budget.files`` (docs/reference/json-output.md)."""
        return {
            "path": str(self.path),
            "label": self.label,
            "journal_mode": self.journal_mode,
            "size_bytes": self.size_bytes,
            "estimated_hold_s": round(self.estimated_hold_s, 3),
            "near_timeout": self.near_timeout,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureBudget:
    """Every live file's estimate, the rate used and the threshold (seconds).

    ``agent``: the app's memsync agent answers, so ``snapshot create`` pauses the app's writes
    for its capture (they wait at the agent's gate, not on SQLite's busy timeout): no file is
    near the timeout then, whatever its estimate.
    """

    files: tuple[FileBudget, ...]
    rate: CopyRate
    threshold_s: float = WARN_HOLD_S
    agent: bool = False

    @property
    def near_timeout(self) -> tuple[FileBudget, ...]:
        """The files a capture could hold close to the busy timeout, in capture order."""
        return () if self.agent else tuple(f for f in self.files if f.near_timeout)

    def to_json(self) -> dict[str, Any]:
        """The ``capture_budget`` object of ``snapshot create --json`` and ``tune --json``."""
        return {
            "busy_timeout_s": BUSY_TIMEOUT_S,
            "warn_above_s": self.threshold_s,
            "agent": self.agent,
            "rate": self.rate.to_json(),
            "files": [f.to_json() for f in self.files],
            "near_timeout": [
                {
                    "path": str(f.path),
                    "estimated_hold_s": round(f.estimated_hold_s, 3),
                    "fix": FIX,
                }
                for f in self.near_timeout
            ],
        }


def estimate_hold_s(size_bytes: int, rate: CopyRate) -> float:
    """Seconds one ``VACUUM INTO`` of ``size_bytes`` holds its read at ``rate``. Pure.

    The live file's size counts its free pages, which the copy skips: an over-estimate, never
    an under-estimate, when the file has free pages.
    """
    return size_bytes / rate.bytes_per_s if rate.bytes_per_s > 0 else float("inf")


def pick_rate(samples: Sequence[CopyRate]) -> CopyRate:
    """The slowest of the samples (the estimate errs towards warning); the default when none. Pure."""
    return min(samples, key=lambda sample: sample.bytes_per_s, default=DEFAULT_RATE)


def build_budget(
    files: Sequence[LiveFile], rate: CopyRate, threshold_s: float = WARN_HOLD_S
) -> CaptureBudget:
    """Estimate each file's hold at ``rate``; flag non-WAL files above ``threshold_s``. Pure.

    Files keep their order (capture order). A WAL file is never flagged: readers do not block
    its writer, however long the copy.
    """
    budgets = []
    for live in files:
        hold = estimate_hold_s(live.size_bytes, rate)
        budgets.append(
            FileBudget(
                path=live.path,
                label=live.label,
                journal_mode=live.mode,
                size_bytes=live.size_bytes,
                estimated_hold_s=hold,
                near_timeout=live.mode != WAL and hold > threshold_s,
            )
        )
    return CaptureBudget(files=tuple(budgets), rate=rate, threshold_s=threshold_s)


def samples_from_copies(copies: Iterable[CopyResult]) -> list[CopyRate]:
    """One sample per copy of at least ``MIN_SAMPLE_BYTES`` that took measurable time. Pure.

    ``CopyResult.size_bytes`` is the copy's size, ``duration_s`` its read transaction.
    """
    return [
        CopyRate(
            bytes_per_s=copy.size_bytes / copy.duration_s,
            measured_at=copy.finished_at,
            source=copy.source.name,
            sample_bytes=copy.size_bytes,
            sample_s=copy.duration_s,
        )
        for copy in copies
        if copy.size_bytes >= MIN_SAMPLE_BYTES and copy.duration_s > 0
    ]


def samples_from_manifest(manifest: Manifest) -> list[CopyRate]:
    """The copy rates a snapshot's manifest shows: history.db, and the collections together. Pure.

    The capture window times history.db's copy alone (``history_at`` to
    ``history_finished_at``) and every collection's copies in a row (``vectors_at`` to
    ``vectors_finished_at``); file sizes are the plaintext copies' (``files[].size``).
    Samples under ``MIN_SAMPLE_BYTES`` are left out, and so are WAL files: their captures read
    from snapshots pinned together (``sqlite_files.pinned_snapshots``), so the window's times
    include waiting for the other copies, and no estimate is ever made for a WAL file.
    """
    window = manifest.capture
    wal = {entry.path for entry in manifest.files if entry.journal_mode == "wal"}
    sizes = {entry.path: entry.size for entry in manifest.files if entry.path not in wal}
    history_bytes = sizes.get("history.db", 0)
    vector_bytes = sum(size for path, size in sizes.items() if path.endswith("storage.sqlite"))
    parts = [
        ("history.db", history_bytes, window.history_at, window.history_finished_at),
        ("collections", vector_bytes, window.vectors_at, window.vectors_finished_at),
    ]
    samples = []
    for source, size, started, finished in parts:
        seconds = (finished - started).total_seconds()
        if size >= MIN_SAMPLE_BYTES and seconds > 0:
            samples.append(
                CopyRate(
                    bytes_per_s=size / seconds,
                    measured_at=finished,
                    source=source,
                    sample_bytes=size,
                    sample_s=seconds,
                )
            )
    return samples


def load_samples(state_dir: Path) -> list[CopyRate]:
    """The recorded samples, oldest first; [] when the file is absent or unreadable. Reads only.

    A damaged or foreign file is ignored (logged as ``capture_rate_unreadable``), never an
    error: the estimate falls back to the default rate.
    """
    path = state_dir / RATE_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return [_sample(item) for item in document["samples"]]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as error:
        logger.warning("capture_rate_unreadable", path=str(path), error=str(error))
        return []


def _sample(item: dict[str, Any]) -> CopyRate:
    measured = item.get("measured_at")
    return CopyRate(
        bytes_per_s=float(item["bytes_per_s"]),
        measured_at=parse(measured) if measured else None,
        source=str(item.get("source", "")),
        sample_bytes=int(item.get("sample_bytes", 0)),
        sample_s=float(item.get("sample_s", 0.0)),
    )


def record_samples(state_dir: Path, samples: Sequence[CopyRate]) -> None:
    """Add ``samples`` to ``<state_dir>/capture-rate.json``, keeping the newest ``KEEP_SAMPLES``.

    Writes the file atomically (0600). Never raises: a state directory memsync cannot write
    only costs the next estimate its measurement (logged as ``capture_rate_unsaved``).
    """
    if not samples:
        return
    kept = [*load_samples(state_dir), *samples][-KEEP_SAMPLES:]
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_json_atomic(
            state_dir / RATE_FILE,
            {"version": VERSION, "samples": [sample.to_json() for sample in kept]},
        )
    except OSError as error:
        logger.warning("capture_rate_unsaved", path=str(state_dir / RATE_FILE), error=str(error))
        return
    logger.debug("capture_rate_recorded", samples=len(samples), kept=len(kept))


def record_manifest(state_dir: Path, manifest: Manifest) -> None:
    """Record the copy rates of a snapshot just created (``samples_from_manifest``). Never raises."""
    record_samples(state_dir, samples_from_manifest(manifest))


def estimate(store: VectorStore, config: Config, extra: Sequence[CopyRate] = ()) -> CaptureBudget:
    """The capture budget of the deployment's live files now. Reads headers, sizes, the state file.

    ``extra``: rates measured by the caller's own capture (doctor), counted with the recorded
    ones.

    Raises:
        UnavailableError: the vector store's metadata is unreadable or invalid.
    """
    return build_budget(
        live_files(store, config.history_db_path),
        pick_rate([*load_samples(config.state_dir), *extra]),
    )


def warn_before_capture(store: VectorStore, config: Config) -> CaptureBudget:
    """Estimate the budget and log ``capture_near_busy_timeout`` for each file near it.

    Called before ``snapshot create``'s capture (also the daemon's snapshot job, which runs
    that command). When the app's agent answers, the capture will pause the app's writes and
    nothing is logged (``CaptureBudget.agent``). Reads only (and greets the agent). Never
    raises for a store problem (the capture that follows reports it): an unreadable store
    gives an empty budget.
    """
    try:
        budget = replace(estimate(store, config), agent=_agent_answers(store, config))
    except MemsyncError:
        return CaptureBudget(files=(), rate=pick_rate(load_samples(config.state_dir)))
    for near in budget.near_timeout:
        logger.warning(
            "capture_near_busy_timeout",
            path=str(near.path),
            journal_mode=near.journal_mode,
            size_bytes=near.size_bytes,
            estimated_hold_s=round(near.estimated_hold_s, 3),
            limit_s=BUSY_TIMEOUT_S,
            rate_bytes_per_s=round(budget.rate.bytes_per_s, 1),
            rate_source=budget.rate.source,
            fix=FIX,
        )
    return budget


def _agent_answers(store: VectorStore, config: Config) -> bool:
    """Whether the app's memsync agent answers for this deployment (``find_agent``)."""
    try:
        client = find_agent(store, config, timeout_s=AGENT_TIMEOUT_S)
    except MemsyncError:  # an agent of another deployment: the capture refuses it anyway
        return False
    if client is None:
        return False
    client.close()
    return True
