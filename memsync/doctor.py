"""``doctor``: a health check of every path and store of the deployment, for people and monitors.

``probe_*`` functions read (files, mounts, processes, versions) and return ``DoctorResult``s;
``run_doctor`` runs them all plus ``check`` on one capture. Doctor never writes to the
deployment, never imports mem0 and never takes Qdrant's lock. Result codes:
docs/reference/doctor.md.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from packaging.version import InvalidVersion, Version

from memsync import check, jobs, state
from memsync.config import Config
from memsync.errors import MemsyncError
from memsync.model import CheckReport, DoctorResult, Severity
from memsync.stores import deployment, local_qdrant, locks, versions
from memsync.stores.deployment import Captured
from memsync.stores.sqlite_files import SLOW_READ_S, SQLITE_VERSION, header_journal_mode, integrity

OK, WARNING, ERROR = "ok", "warning", "error"
# Every result code doctor emits (docs/reference/commands/doctor.md).
RESULT_CODES = (
    "path-mount", "path-volatile", "path-under-tmp", "disk-space", "path-permissions",
    "store-lock", "private-tmp-mismatch", "sqlite-integrity", "journal-mode", "sqlite-version",
    "collection-params", "check", "capture-duration", "mem0-version", "qdrant-client-version",
    "version-mismatch", "last-snapshot", "restore-unfinished", "pre-restore-copy", "daemon",
    "daemon-job", "prune-skipped",
)  # fmt: skip
VOLATILE_FS = frozenset({"tmpfs", "ramfs"})
MIN_FREE_BYTES = 256 * 1024 * 1024
WAL_FIXED_SQLITE = (3, 51, 3)  # WAL-reset corruption bug fixed in SQLite 3.51.3
SNAPSHOT_MAX_AGE_S = 36 * 3600


@dataclass(frozen=True, slots=True, kw_only=True)
class DoctorReport:
    """Doctor's results in probe order, plus the check report when the capture succeeded."""

    results: tuple[DoctorResult, ...]
    check: CheckReport | None

    def count(self, status: str) -> int:
        """Number of results with ``status``."""
        return sum(1 for result in self.results if result.status == status)

    @property
    def ok(self) -> bool:
        """True when no result is an error."""
        return self.count(ERROR) == 0


# Known-bad mem0ai releases (FIELD_NOTES.md, from mem0's public tracker):
# (first bad, last bad, status, what goes wrong, what to do)
MEM0_KNOWN_BAD: tuple[tuple[str, str, str, str, str], ...] = (
    ("0.0.7", "1.0.7", ERROR,
     "deletes the embedded Qdrant directory at every start unless on_disk=True",
     "upgrade mem0ai (>= 1.0.8) or set vector_store.config.on_disk = true"),
    ("0.1.99", "0.1.106", ERROR,
     "history migration can hang at start-up on an unexpected column set",
     "upgrade mem0ai"),
    ("0.1.118", "1.0.5", ERROR,
     "delete_all(user_id=...) also wipes every other user's points",
     "upgrade mem0ai (>= 1.0.6); memsync refuses bulk deletes through it"),
    ("0.0.0", "1.0.7", WARNING,
     "writes DELETE rows with NULL timestamps (memsync orders history by rowid)",
     "upgrade mem0ai"),
    ("0.0.0", "2.0.14", WARNING,
     "delete_all removes only the first 100 memories",
     "upgrade mem0ai (>= 2.0.15); memsync re-reads after every bulk delete"),
)  # fmt: skip


def judge_mem0_version(version: str, on_disk: bool) -> list[tuple[str, str, str]]:
    """Return ``(status, problem, fix)`` for each known-bad range ``version`` falls in. Pure."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        return [(WARNING, f"unparseable mem0ai version {version!r}", "check the install")]
    problems = []
    for first, last, status, problem, fix in MEM0_KNOWN_BAD:
        if Version(first) <= parsed <= Version(last):
            if "on_disk" in problem and on_disk:
                continue
            problems.append((status, problem, fix))
    return problems


def probe_paths(config: Config) -> list[DoctorResult]:
    """Mount, filesystem type, /tmp placement, free space and permissions of every path."""
    data_paths = [
        ("Qdrant directory", config.qdrant_path, True),
        ("history.db", config.history_db_path, True),
        ("MEM0_DIR", config.mem0_dir, False),
        ("mem0 telemetry Qdrant", config.migrations_qdrant_path, False),
        ("memsync state directory", config.state_dir, False),
        ("memsync work directory", config.work_dir, False),
    ]
    if config.snapshot.directory is not None:
        data_paths.append(("snapshot directory", config.snapshot.directory, True))
    results: list[DoctorResult] = []
    for label, path, precious in data_paths:
        try:
            results += _probe_one_path(label, path, precious)
        except OSError as error:
            results.append(
                DoctorResult(
                    code="path-permissions",
                    status=ERROR if precious else WARNING,
                    path=str(path),
                    message=f"{label} cannot be inspected: {error.strerror}",
                    fix="run memsync as the app's user, or give its group access (UMask=0007)",
                )
            )
    return results


def _probe_one_path(label: str, path: Path, precious: bool) -> list[DoctorResult]:
    mountpoint, fstype, _device = locks.mount_of(path)
    results = []
    if fstype in VOLATILE_FS:
        results.append(
            DoctorResult(
                code="path-volatile",
                status=ERROR if precious else WARNING,
                path=str(path),
                message=f"{label} is on {fstype} ({mountpoint}): a reboot wipes it",
                fix="move it to persistent storage (docs/how-to/move-store-off-tmp.md)",
            )
        )
    else:
        results.append(
            DoctorResult(
                code="path-mount",
                status=OK,
                path=str(path),
                message=f"{label} is on {fstype} mounted at {mountpoint}",
            )
        )
    if precious and _under_tmp(path):
        results.append(
            DoctorResult(
                code="path-under-tmp",
                status=WARNING,
                path=str(path),
                message=f"{label} is under /tmp: systemd-tmpfiles cleans it, /tmp is tmpfs on "
                "current distributions, and a service with PrivateTmp=yes sees its own /tmp",
                fix="move it to persistent storage (docs/how-to/move-store-off-tmp.md)",
            )
        )
    results.append(_probe_free_space(label, path))
    results.append(_probe_permissions(label, path))
    return results


def _under_tmp(path: Path) -> bool:
    absolute = str(path.absolute())
    roots = ("/tmp", "/var/tmp")  # noqa: S108 - we detect them, we do not write there
    return any(absolute == root or absolute.startswith(root + "/") for root in roots)


def _probe_free_space(label: str, path: Path) -> DoctorResult:
    free, total = locks.free_bytes(path)
    ratio = free / total if total else 0.0
    status = ERROR if free < MIN_FREE_BYTES else WARNING if ratio < 0.10 else OK
    return DoctorResult(
        code="disk-space",
        status=status,
        path=str(path),
        message=f"{label}: {_gib(free)} free of {_gib(total)} ({ratio:.0%}; {free} bytes)",
        fix=None if status == OK else "free space: SQLite writes and memsync's captures fail on a full disk",
    )


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


def _probe_permissions(label: str, path: Path) -> DoctorResult:
    if not path.exists():
        return DoctorResult(
            code="path-permissions",
            status=OK,
            path=str(path),
            message=f"{label} does not exist",
        )
    info = path.stat()
    mode = stat.S_IMODE(info.st_mode)
    readable = os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0))
    detail = f"owner uid {info.st_uid} gid {info.st_gid}, mode {mode:04o}"
    if not readable:
        return DoctorResult(
            code="path-permissions",
            status=ERROR,
            path=str(path),
            message=f"{label} is not readable by memsync (uid {os.getuid()}): {detail}",
            fix="run memsync as the app's user or a group that can read the store (UMask=0007)",
        )
    if mode & stat.S_IROTH and path.is_file():
        return DoctorResult(
            code="path-permissions",
            status=WARNING,
            path=str(path),
            message=f"{label} is readable by every user ({detail}); it holds personal memories",
            fix=f"chmod o-rwx {path}",
        )
    return DoctorResult(code="path-permissions", status=OK, path=str(path), message=f"{label}: {detail}")


def probe_locks(config: Config) -> list[DoctorResult]:
    """Which process holds the embedded store's lock, and whether it sees the same files."""
    results = []
    for label, directory in (
        ("Qdrant directory", config.qdrant_path),
        ("mem0 telemetry Qdrant", config.migrations_qdrant_path),
    ):
        lock_file = directory / local_qdrant.LOCK_FILE
        holder = locks.find_holder(lock_file, directory)
        if holder is None:
            message = f"no process holds {lock_file}" if lock_file.exists() else f"{lock_file} does not exist"
            results.append(DoctorResult(code="store-lock", status=OK, path=str(lock_file), message=message))
            continue
        results.append(
            DoctorResult(
                code="store-lock",
                status=OK,
                path=str(lock_file),
                message=f"{label} is held by {holder.describe()}: commands that write through "
                "mem0 need that process stopped",
            )
        )
        if holder.sees_same_file is False:
            results.append(
                DoctorResult(
                    code="private-tmp-mismatch",
                    status=ERROR,
                    path=str(directory),
                    message=f"{holder.describe()} holds {lock_file} in another mount namespace "
                    f"(PrivateTmp=yes?): the {directory} it writes is not the one memsync "
                    "sees, so checks and snapshots here cover the wrong files",
                    fix="move the store out of /tmp (docs/how-to/move-store-off-tmp.md), or "
                    "set PrivateTmp=no on the app's unit",
                )
            )
    return results


def probe_sqlite(config: Config, captured: Captured) -> list[DoctorResult]:
    """Integrity (quick_check on the copies), journal mode and SQLite version of each file."""
    files: list[tuple[Path, Path | None]] = [
        (config.history_db_path, captured.history_copy.dest if captured.history_copy else None)
    ]
    for name, copied in sorted(captured.collection_copies.items()):
        files.append((local_qdrant.storage_path(config.qdrant_path, name), copied.dest))
    results = []
    uses_wal = False
    for live, copy in files:
        if copy is None:
            continue
        verdict = integrity(copy, quick=True)
        results.append(
            DoctorResult(
                code="sqlite-integrity",
                status=OK if verdict == "ok" else ERROR,
                path=str(live),
                message=f"quick_check of a fresh copy: {verdict}",
                fix=None if verdict == "ok" else "restore this file from a snapshot",
            )
        )
        mode = header_journal_mode(live)
        uses_wal = uses_wal or mode == "wal"
        results.append(_journal_result(live, mode, captured.window.longest_read_s))
    version = tuple(int(part) for part in SQLITE_VERSION.split("."))
    wal_bug = uses_wal and version < WAL_FIXED_SQLITE
    results.append(
        DoctorResult(
            code="sqlite-version",
            status=WARNING if wal_bug else OK,
            path=None,
            message=f"SQLite library {SQLITE_VERSION}"
            + (" has a rare WAL-reset corruption bug (fixed in 3.51.3)" if wal_bug else ""),
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
        fix="stop the app, then: sqlite3 FILE 'PRAGMA journal_mode=WAL' (a change to your "
        "files; memsync never does it silently)",
    )


def probe_collections(config: Config, captured: Captured) -> list[DoctorResult]:
    """Each collection's vector size and distance against the config."""
    if not captured.qdrant_present:
        return [
            DoctorResult(
                code="collection-params",
                status=ERROR,
                path=str(config.qdrant_path),
                message=f"no embedded Qdrant at {config.qdrant_path} (meta.json missing)",
                fix="memsync restore <snapshot>, or fix [mem0] vector_store.config.path",
            )
        ]
    results = []
    for name, info in sorted(captured.collections.items()):
        if name not in (config.collection, config.entities_collection):
            continue
        wrong = [f"{key} = {size}" for key, size in config.expected_dims if size != info.vector_size]
        distance_ok = info.distance in (None, "Cosine")
        status = ERROR if wrong else OK if distance_ok else WARNING
        message = f"collection {name!r}: vector size {info.vector_size}, distance {info.distance}"
        if wrong:
            message += f", but the config says {', '.join(wrong)}"
        elif not distance_ok:
            message += " (mem0 creates Cosine collections)"
        results.append(
            DoctorResult(
                code="collection-params",
                status=status,
                path=str(local_qdrant.storage_path(config.qdrant_path, name)),
                message=message,
                fix="set embedding_model_dims to the collection's size" if wrong else None,
            )
        )
    if config.collection not in captured.collections:
        results.append(
            DoctorResult(
                code="collection-params",
                status=WARNING,
                path=str(config.qdrant_path),
                message=f"collection {config.collection!r} does not exist yet",
            )
        )
    return results


def probe_versions(config: Config) -> list[DoctorResult]:
    """mem0ai and qdrant-client versions here (and in the app's interpreter) vs known-bad ones."""
    ours = versions.tracked_versions()
    results = []
    vector_store = config.mem0.get("vector_store") or {}
    store_config = (vector_store.get("config") if isinstance(vector_store, dict) else None) or {}
    on_disk = isinstance(store_config, dict) and store_config.get("on_disk") is True
    for where, found in [("memsync's environment", ours), *_app_versions(config)]:
        mem0_version = found.get("mem0ai")
        if mem0_version is None:
            results.append(
                DoctorResult(
                    code="mem0-version",
                    status=WARNING,
                    message=f"mem0ai is not installed in {where}",
                    fix="install mem0ai (memsync's writing commands need it)",
                )
            )
        else:
            problems = judge_mem0_version(mem0_version, on_disk)
            worst = ERROR if any(p[0] == ERROR for p in problems) else WARNING if problems else OK
            text = "; ".join(p[1] for p in problems)
            results.append(
                DoctorResult(
                    code="mem0-version",
                    status=worst,
                    message=f"mem0ai {mem0_version} in {where}" + (f": {text}" if text else ""),
                    fix="; ".join(p[2] for p in problems) or None,
                )
            )
        results.append(
            DoctorResult(
                code="qdrant-client-version",
                status=OK if found.get("qdrant-client") else WARNING,
                message=f"qdrant-client {found.get('qdrant-client') or 'not installed'} in {where}",
            )
        )
    app = dict(_app_versions(config))
    if app:
        theirs = next(iter(app.values()))
        mismatched = [name for name in ours if theirs.get(name) != ours[name]]
        if mismatched:
            results.append(
                DoctorResult(
                    code="version-mismatch",
                    status=WARNING,
                    message="the app and memsync use different "
                    + ", ".join(f"{n} ({theirs.get(n)} vs {ours[n]})" for n in mismatched),
                    fix="install the app's versions in memsync's environment, so repairs "
                    "write what the app expects",
                )
            )
    return results


_APP_VERSION_SCRIPT = (
    "import importlib.metadata as m, json\n"
    "def v(n):\n"
    "    try: return m.version(n)\n"
    "    except m.PackageNotFoundError: return None\n"
    "print(json.dumps({n: v(n) for n in ('mem0ai', 'qdrant-client')}))\n"
)


def _app_versions(config: Config) -> list[tuple[str, dict[str, str | None]]]:
    if config.app_python is None:
        return []
    try:
        completed = subprocess.run(  # noqa: S603 - the configured interpreter, fixed script
            [str(config.app_python), "-I", "-c", _APP_VERSION_SCRIPT],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        reported = json.loads(completed.stdout)
        if not isinstance(reported, dict):
            raise ValueError("not an object")
        return [(f"the app's interpreter {config.app_python}",
                 {k: v for k, v in reported.items() if isinstance(v, str)})]
    except (OSError, subprocess.SubprocessError, ValueError):
        return [(f"the app's interpreter {config.app_python} (unreadable)", {})]


def probe_last_snapshot(config: Config, now: datetime) -> DoctorResult:
    """Age of the newest complete snapshot (a directory with a manifest) in the snapshot directory."""
    directory = config.snapshot.directory
    if directory is None:
        return DoctorResult(
            code="last-snapshot",
            status=WARNING,
            message="no snapshot directory configured: there is no backup to restore from",
            fix="set [snapshot] directory and run memsync snapshot create",
        )
    manifests = sorted(directory.glob("*/manifest.json")) if directory.is_dir() else []
    complete = [m for m in manifests if not m.parent.name.endswith(".partial")]
    if not complete:
        return DoctorResult(
            code="last-snapshot",
            status=WARNING,
            path=str(directory),
            message="no complete snapshot found",
            fix="memsync snapshot create",
        )
    newest = max(complete, key=lambda m: m.stat().st_mtime)
    age = now.timestamp() - newest.stat().st_mtime
    return DoctorResult(
        code="last-snapshot",
        status=WARNING if age > SNAPSHOT_MAX_AGE_S else OK,
        path=str(newest.parent),
        message=f"newest snapshot {newest.parent.name} is {age / 3600:.1f} hours old",
        fix="memsync snapshot create" if age > SNAPSHOT_MAX_AGE_S else None,
    )


PRUNE_SKIP_LIMIT_S = 7 * 86400


def probe_daemon(config: Config, now: datetime) -> list[DoctorResult]:
    """The daemon's health when it is configured: running, jobs overdue or failing, prune skipped."""
    if not config.daemon.jobs:
        return []
    document = jobs.load_state(config)
    pid = jobs.daemon_pid(config)
    results = [DoctorResult(code="daemon", status=OK if pid else WARNING,
                            message=f"daemon running as pid {pid}" if pid else "no memsync daemon runs for this state directory",
                            fix=None if pid else "systemctl start memsync (docs/how-to/install-on-a-vps.md)")]
    for row in jobs.job_health(config, document, now):
        if row["overdue"] or row["failing"]:
            problem = "overdue" if row["overdue"] else f"failing ({row['last_outcome']})"
            results.append(DoctorResult(code="daemon-job", status=WARNING,
                                        message=f"job {row['job']} is {problem}; last success {row['last_success_at']}",
                                        fix="memsync status; journalctl -u memsync"))
    prune = document.get("jobs", {}).get("prune", {})
    skipped = jobs.parse(prune.get("last_skipped_at"))
    success = jobs.parse(prune.get("last_success_at"))
    if skipped and (success is None or success < skipped) and (success is None or
                                                               (now - success).total_seconds() > PRUNE_SKIP_LIMIT_S):
        results.append(DoctorResult(code="prune-skipped", status=WARNING,
                                    message="expired memories have not been pruned for more than 7 days: the app "
                                    "holds the store whenever prune runs",
                                    fix="schedule prune in a maintenance window when the app is stopped"))
    return results


def probe_restores(config: Config) -> list[DoctorResult]:
    """An unfinished restore (error) and the pre-restore copies kept beside the stores."""
    results = []
    pending = state.unfinished_restore(config.state_dir)
    if pending is not None:
        results.append(
            DoctorResult(
                code="restore-unfinished",
                status=ERROR,
                path=str(config.state_dir / state.RESTORE_JOURNAL),
                message=f"a restore of snapshot {pending} did not finish",
                fix="memsync restore --resume (finishes it or rolls it back)",
            )
        )
    for copy in state.pre_restore_copies([config.qdrant_path, config.history_db_path]):
        results.append(
            DoctorResult(
                code="pre-restore-copy",
                status=OK,
                path=str(copy),
                message="files a restore moved aside (kept, never deleted by memsync)",
                fix=f"remove it once the restored deployment is trusted: rm -r {copy}",
            )
        )
    return results


def _check_results(report: CheckReport) -> list[DoctorResult]:
    counts = report.counts()
    status = ERROR if counts["errors"] else WARNING if counts["warnings"] else OK
    codes = sorted({f.code for f in report.findings if f.severity is not Severity.INFO})
    summary = (
        f"{counts['points']} points, {counts['history_memories']} memories in history: "
        f"{counts['errors']} errors, {counts['warnings']} warnings, {counts['infos']} infos"
    )
    results = [
        DoctorResult(
            code="check",
            status=status,
            message=summary + (f" ({', '.join(codes)})" if codes else ""),
            fix="memsync check for the findings" if codes else None,
        )
    ]
    longest = report.window.longest_read_s
    results.append(
        DoctorResult(
            code="capture-duration",
            status=WARNING if longest > SLOW_READ_S else OK,
            message=f"longest read transaction on a live file: {longest:.3f} s "
            f"(mem0's writers give up after 5 s)",
            fix="switch the stores to WAL mode" if longest > SLOW_READ_S else None,
        )
    )
    return results


def run_doctor(config: Config, now: datetime) -> DoctorReport:
    """Run every probe and ``check`` on one capture. Reads the deployment only.

    Never raises for a store problem: an unreadable store becomes an error result.
    """
    results: list[DoctorResult] = []
    results += probe_paths(config)  # catches its own OSErrors, path by path
    try:
        results += probe_locks(config)
    except OSError as error:  # an unreachable path is a finding, not a crash
            results.append(
                DoctorResult(
                    code="path-permissions",
                    status=ERROR,
                    path=getattr(error, "filename", None),
                    message=f"cannot inspect {getattr(error, 'filename', 'a path')}: {error.strerror}",
                    fix="run memsync as the app's user, or give its group access (UMask=0007)",
                )
            )
    report: CheckReport | None = None
    try:
        with deployment.temporary_capture(config) as captured:
            results += probe_collections(config, captured)
            results += probe_sqlite(config, captured)
            report = check.judge(deployment.read_inventory(captured, config), now.date())
        results += _check_results(report)
    except MemsyncError as error:  # the stores could not be checked: never "healthy"
        results.append(
            DoctorResult(code="check", status=ERROR, message=error.message, fix=error.hint)
        )
    results += probe_versions(config)
    results.append(probe_last_snapshot(config, now))
    results += probe_restores(config)
    results += probe_daemon(config, now)
    return DoctorReport(results=tuple(results), check=report)


def summarize(results: Iterable[DoctorResult]) -> dict[str, int]:
    """Counts by status: ``{"ok": n, "warnings": n, "errors": n}``."""
    listed = list(results)
    return {
        "ok": sum(1 for r in listed if r.status == OK),
        "warnings": sum(1 for r in listed if r.status == WARNING),
        "errors": sum(1 for r in listed if r.status == ERROR),
    }
