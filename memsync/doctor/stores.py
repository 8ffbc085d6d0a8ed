"""Doctor's probes of the captured stores: SQLite integrity and journal mode, collection sizes.

They read the fresh copies of one capture (``stores.capture.temporary_capture``).
"""

from __future__ import annotations

from pathlib import Path

from memsync import findings
from memsync.config import Config
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.errors import UnavailableError
from memsync.model import CheckReport, CollectionInfo, DoctorResult, Severity
from memsync.stores.capture import Captured
from memsync.stores.sqlite_files import (
    SLOW_READ_S,
    SQLITE_VERSION,
    integrity,
    source_journal_mode,
)

WAL_FIXED_SQLITE = (3, 51, 3)  # WAL-reset corruption bug fixed in SQLite 3.51.3


def probe_sqlite(config: Config, captured: Captured) -> list[DoctorResult]:
    """Integrity (quick_check on the copies), journal mode and SQLite version of each file."""
    store, vectors = captured.store, captured.vectors
    files: list[tuple[Path, str]] = []
    if captured.history_copy is not None:
        files.append((config.history_db_path, integrity(captured.history_copy.dest, quick=True)))
    if store.location is None:  # a server store (pgvector): no SQLite files, its probe_server
        history = captured.history_copy  # its export blocks no writer: history.db's read only
        return _sqlite_results(files, history.duration_s if history is not None else 0.0)
    verdicts = store.check_copy(vectors, quick=True, decode=False)
    for name in sorted(vectors.copies):
        relative = str(store.collection_file(name, vectors.root).relative_to(vectors.root))
        files.append((store.collection_file(name), verdicts[relative]))
    return _sqlite_results(files, captured.window.longest_read_s)


def _sqlite_results(files: list[tuple[Path, str]], longest_read_s: float) -> list[DoctorResult]:
    results = []
    uses_wal = False
    for live, verdict in files:
        results.append(
            DoctorResult(
                code="sqlite-integrity",
                status=OK if verdict == "ok" else ERROR,
                path=str(live),
                message=f"quick_check of a fresh copy: {verdict}",
                fix=None if verdict == "ok" else "restore this file from a snapshot",
            )
        )
        mode = source_journal_mode(live)  # None: an empty file (beside a legacy dbm store)
        uses_wal = uses_wal or mode == "wal"
        if mode is not None:
            results.append(_journal_result(live, mode, longest_read_s))
    version = tuple(int(part) for part in SQLITE_VERSION.split("."))
    wal_bug = uses_wal and version < WAL_FIXED_SQLITE
    results.append(
        DoctorResult(
            code="sqlite-version",
            status=WARNING if wal_bug else OK,
            path=None,
            message=f"SQLite library {SQLITE_VERSION}"
            + (
                " has a rare WAL-reset corruption bug (SQLite 3.7.0 to 3.51.2, fixed in 3.51.3) "
                "and a file here is in WAL mode"
                if wal_bug
                else ""
            ),
            fix="upgrade SQLite (the Python build's library)" if wal_bug else None,
        )
    )
    return results


def _journal_result(live: Path, mode: str, longest_read_s: float) -> DoctorResult:
    if mode == "wal":
        return DoctorResult(code="journal-mode", status=OK, path=str(live), message="WAL")
    slow = longest_read_s > SLOW_READ_S
    return DoctorResult(
        code="journal-mode",
        status=WARNING if slow else OK,
        path=str(live),
        message="rollback journal (mem0's default): a reader blocks mem0's writers, which give "
        "up after 5 s; in WAL mode readers never block writers (and writes were 3.6x faster)",
        fix="memsync tune --wal (a change to your files, which memsync never makes silently: "
        "docs/how-to/wal-mode.md)",
    )


def probe_collections(config: Config, captured: Captured) -> list[DoctorResult]:
    """Each collection's vector size and distance against the config.

    [] for a server store (pgvector): its ``probe_server`` reads its tables on the server.
    """
    if captured.store.location is None:
        return []
    if not captured.qdrant_present:
        return [
            DoctorResult(
                code="collection-params",
                status=ERROR,
                path=captured.store.where,
                message=f"no {captured.store.kind} store at {captured.store.where} "
                f"({captured.store.index_file} missing)",
                fix="memsync restore <snapshot>, or fix [mem0] vector_store.config.path",
            )
        ]
    results = [
        DoctorResult(
            code="legacy-point-store",
            status=ERROR,
            path=", ".join(f"{captured.store.where}/{file}" for file in files),
            message=f"collection {name!r} keeps qdrant-client's legacy dbm point store beside or "
            "instead of the storage.sqlite qdrant-client 1.20 reads: its points are invisible to "
            "mem0, not lost",
            fix=findings.spec("legacy-point-store").fix,
        )
        for name, files in sorted(captured.vectors.legacy_files.items())
    ]
    results += [
        _collection_params(config, captured, name, info)
        for name, info in sorted(captured.collections.items())
        if name in (config.collection, config.entities_collection)
    ]
    if config.collection not in captured.collections:
        results.append(
            DoctorResult(
                code="collection-params",
                status=WARNING,
                path=str(captured.store.location),
                message=f"collection {config.collection!r} does not exist yet",
            )
        )
    return results


def _collection_params(
    config: Config, captured: Captured, name: str, info: CollectionInfo
) -> DoctorResult:
    """One collection's vector size and distance against the config's sizes.

    A collection of the wrong size that holds points was written by the embedder before the
    change: the fix is check's (``findings.changed_embedder_fix``: ``memsync migrate``).
    """
    mismatched = [(key, size) for key, size in config.expected_dims if size != info.vector_size]
    wrong = [f"{key} = {size}" for key, size in mismatched]
    distance_ok = info.distance in (None, "Cosine")
    message = (
        f"collection {name!r}: vector size {info.vector_size or 'not recorded'}, "
        f"distance {info.distance or 'not recorded'}"
    )
    if wrong:
        message += f", but the config says {', '.join(wrong)}"
    elif not distance_ok:
        message += " (mem0 creates Cosine collections)"
    return DoctorResult(
        code="collection-params",
        status=ERROR if wrong else OK if distance_ok else WARNING,
        path=str(captured.store.collection_file(name)),
        message=message,
        fix=_dimension_fix(captured, name, info.vector_size, mismatched[0][0]) if wrong else None,
    )


def _dimension_fix(captured: Captured, name: str, size: int | None, key: str) -> str:
    """Check's fix when the collection holds points of its size, else the plain one."""
    try:
        stored = captured.store.count_rows(captured.vectors).get(name, 0)
    except UnavailableError:  # a damaged copy: sqlite-integrity names it
        stored = 0
    if stored and size is not None:
        return findings.changed_embedder_fix(key, size)
    return "set embedding_model_dims to the collection's size"


def check_results(report: CheckReport, server_store: bool = False) -> list[DoctorResult]:
    """The ``check`` and ``capture-duration`` results of a check report. Pure.

    A collection-level ``dimension-mismatch`` gives the ``check`` result its fix (after a
    changed embedder: ``memsync migrate``), since every write fails until it is fixed.

    ``server_store`` (pgvector): the only live file read is history.db; the export of the
    tables runs in a transaction no writer waits for, so its duration is left out.
    """
    counts = report.counts()
    status = ERROR if counts["errors"] else WARNING if counts["warnings"] else OK
    codes = sorted({f.code for f in report.findings if f.severity is not Severity.INFO})
    fix = "memsync check for the findings" if codes else None
    for finding in report.findings:  # every write fails until this one is fixed: its fix first
        if finding.code == "dimension-mismatch" and finding.memory_id is None:
            fix = finding.fix
            break
    summary = (
        f"{counts['points']} points, {counts['history_memories']} memories in history: "
        f"{counts['errors']} errors, {counts['warnings']} warnings, {counts['infos']} infos"
    )
    results = [
        DoctorResult(
            code="check",
            status=status,
            message=summary + (f" ({', '.join(codes)})" if codes else ""),
            fix=fix,
        )
    ]
    window = report.window
    longest = window.longest_read_s
    if server_store:
        longest = max((window.history_finished_at - window.history_at).total_seconds(), 0.0)
    results.append(
        DoctorResult(
            code="capture-duration",
            status=WARNING if longest > SLOW_READ_S else OK,
            message=f"longest read transaction on a live file: {longest:.3f} s "
            + ("(history.db; the tables' export blocks no writer) " if server_store else "")
            + "(mem0's writers give up after 5 s)",
            fix="switch the stores to WAL mode" if longest > SLOW_READ_S else None,
        )
    )
    return results
