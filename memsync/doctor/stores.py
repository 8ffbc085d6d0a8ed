"""Doctor's probes of the captured stores: SQLite integrity and journal mode, check's summary.

They read the fresh copies of one capture (``stores.capture.temporary_capture``); the
store names its own SQLite files (``LiveStore.sqlite_verdicts``).
"""

from __future__ import annotations

from pathlib import Path

from memsync.config import Config
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.model import CheckReport, DoctorResult, Severity
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
    files: list[tuple[Path, str]] = []
    history = captured.history_copy
    if history is not None:
        files.append((config.history_db_path, integrity(history.dest, quick=True)))
    files += captured.store.sqlite_verdicts(captured.vectors)
    if captured.store.capture_blocks_writers:
        return _sqlite_results(files, captured.window.longest_read_s)
    # a server store's export blocks no writer: history.db's read only
    return _sqlite_results(files, history.duration_s if history is not None else 0.0)


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
            fix="nothing to do now but keep snapshots (a damaged file restores from one, and "
            "check finds it); take SQLite 3.51.3 or later when your distribution ships it"
            if wal_bug
            else None,
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
        "up after 5 s; in WAL mode readers never block writers (docs/how-to/wal-mode.md measured "
        "writes 3.6x faster there)",
        fix="memsync tune --wal (a change to your files, which memsync never makes silently: "
        "docs/how-to/wal-mode.md)",
    )


def check_results(report: CheckReport, blocks_writers: bool = True) -> list[DoctorResult]:
    """The ``check`` and ``capture-duration`` results of a check report. Pure.

    A collection-level ``dimension-mismatch`` gives the ``check`` result its fix (after a
    changed embedder: ``memsync migrate``), since every write fails until it is fixed.

    ``blocks_writers`` False (a server store, ``LiveStore.capture_blocks_writers``): the only
    live file read is history.db; the store's export runs in a transaction no writer waits
    for, so its duration is left out.
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
        f"{counts['points']} points, {counts['history_memories']} memories in history (deleted "
        "ones included): "
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
    if not blocks_writers:
        longest = max((window.history_finished_at - window.history_at).total_seconds(), 0.0)
    results.append(
        DoctorResult(
            code="capture-duration",
            status=WARNING if longest > SLOW_READ_S else OK,
            message=f"longest read transaction on a live file: {longest:.3f} s "
            + ("(history.db; the tables' export blocks no writer) " if not blocks_writers else "")
            + "(mem0's writers give up after 5 s)",
            fix="switch the stores to WAL mode" if longest > SLOW_READ_S else None,
        )
    )
    return results
