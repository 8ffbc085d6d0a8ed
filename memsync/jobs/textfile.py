"""The Prometheus textfile (node_exporter's textfile collector): rendering and writing.

Conventions (Prometheus' instrumentation practice: a series that may exist is always there):
every job ``judge_jobs`` lists has ``memsync_job_last_success_timestamp_seconds`` (0 when it
never succeeded, so ``time() - ...`` alerts fire for it), ``memsync_job_failing`` and
``memsync_job_overdue`` (0/1, the same judgement as ``memsync status``); the queue gauges are
always there (0 for an empty queue) unless the queue file cannot be read. Values are as of the
file's write time: node_exporter exports that as ``node_textfile_mtime_seconds``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsync import findings
from memsync.jobs.health import JobsVerdict, QueueFigures
from memsync.jobs.schedule import parse


def _gauge(name: str, text: str, samples: list[tuple[str, float | int]]) -> list[str]:
    lines = [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
    return lines + [f"{name}{labels} {_number(value)}" for labels, value in samples]


def _number(value: float | int) -> str:
    return str(int(value)) if float(value).is_integer() else f"{float(value):.3f}"


def render_textfile(
    verdict: JobsVerdict,
    state: Mapping[str, Any],
    queue: QueueFigures,
    window_left_open: bool = False,
    pending_uploads: int | None = None,
) -> str:
    """The textfile's text: jobs' judgement and figures, the queue, a window left open. Pure.

    ``pending_uploads``: local snapshots waiting for their upload (None: no snapshot directory).
    """
    records = state.get("jobs") or {}
    rows = verdict.rows
    success = []
    for row in rows:
        moment = parse(row["last_success_at"])
        success.append((f'{{memsync_job="{row["job"]}"}}', moment.timestamp() if moment else 0))
    lines = _gauge(
        "memsync_job_last_success_timestamp_seconds",
        "Start of the last successful run of a memsync job (Unix time, UTC); 0 when it never succeeded.",
        [(labels, round(value)) for labels, value in success],
    )
    lines += _gauge(
        "memsync_job_failing",
        "1 when the last run of a job did not do its work (failed, no route, queued, try later) "
        "or found problems.",
        [(f'{{memsync_job="{r["job"]}"}}', int(r["failing"])) for r in rows],
    )
    lines += _gauge(
        "memsync_job_overdue",
        "1 when a scheduled job has no success since its latest slot (as memsync status judges).",
        [(f'{{memsync_job="{r["job"]}"}}', int(r["overdue"])) for r in rows],
    )
    ran = [r["job"] for r in rows if r["job"] in records and "duration_s" in records[r["job"]]]
    lines += _gauge(
        "memsync_job_duration_seconds",
        "Duration of the last run of a memsync job.",
        [(f'{{memsync_job="{n}"}}', float(records[n]["duration_s"])) for n in ran],
    )
    lines += _summaries(records, [r["job"] for r in rows])
    lines += _backlog(queue, window_left_open, pending_uploads)
    return "\n".join(lines) + "\n"


def _backlog(queue: QueueFigures, window_left_open: bool, pending_uploads: int | None) -> list[str]:
    """The queue, a window left open and the snapshots waiting for their upload."""
    lines: list[str] = []
    if queue.count is not None:
        lines += _gauge(
            "memsync_pending_requests",
            "Writes queued for lack of a route (<state_dir>/pending.json).",
            [("", queue.count)],
        )
        lines += _gauge(
            "memsync_pending_oldest_age_seconds",
            "Age of the oldest queued write; 0 when the queue is empty.",
            [("", round(queue.oldest_age_s or 0.0, 1))],
        )
    lines += _gauge(
        "memsync_window_left_open",
        "1 when a maintenance window's memsync died before [app] start_command ran: the app "
        "may be down.",
        [("", int(window_left_open))],
    )
    if pending_uploads is not None:
        lines += _gauge(
            "memsync_snapshots_pending_upload",
            "Local snapshots whose upload failed or was interrupted, waiting for the next "
            "snapshot create --upload.",
            [("", pending_uploads)],
        )
    return lines


def _summaries(records: Mapping[str, Any], names: list[str]) -> list[str]:
    """The gauges from the figures jobs reported: findings, snapshot size, window downtime."""
    summaries = {n: records.get(n, {}).get("summary") or {} for n in names}
    by_code = summaries.get("check", {}).get("findings_by_code", {})
    lines = _gauge(
        "memsync_findings",
        "Findings of the last check, by code and severity (error: check exits 3).",
        [
            (f'{{code="{code}",severity="{_severity(code)}"}}', count)
            for code, count in sorted(by_code.items())
        ],
    )
    size = summaries.get("snapshot", {}).get("size_bytes")
    if isinstance(size, int):
        lines += _gauge("memsync_snapshot_size_bytes", "Size of the last snapshot.", [("", size)])
    lines += _tripwire(summaries.get("snapshot", {}))
    downtime = [
        (f'{{memsync_job="{n}"}}', s["downtime_s"])
        for n, s in summaries.items()
        if isinstance(s.get("downtime_s"), int | float)
    ]
    if downtime:
        lines += _gauge(
            "memsync_job_window_downtime_seconds",
            "The app's downtime in the maintenance window of a job's last successful run.",
            downtime,
        )
    if "verify" in names:
        lines += _verify_gauges(summaries["verify"])
    return lines


def _severity(code: str) -> str:
    """The registry's severity of a finding code; ``unknown`` for a code this memsync lacks."""
    try:
        return findings.spec(code).severity.value
    except KeyError:
        return "unknown"


def _verify_gauges(summary: Mapping[str, Any]) -> list[str]:
    """Scheduled verification: last clean run, bytes read, problems, coverage of the cycle."""
    clean = parse(summary.get("last_ok_at"))
    lines = _gauge(
        "memsync_verify_last_success_timestamp_seconds",
        "Time of the last scheduled verification that found no problem (Unix time, UTC); "
        "0 when none did.",
        [("", round(clean.timestamp()) if clean else 0)],
    )
    lines += _gauge(
        "memsync_verify_bytes_read",
        "Stored bytes the last scheduled verification read back (both sides).",
        [("", int(summary.get("bytes_read") or 0))],
    )
    lines += _gauge(
        "memsync_verify_problems",
        "Error findings of the last scheduled verification (damaged snapshots' files).",
        [("", int(summary.get("problems") or 0))],
    )
    coverage = summary.get("coverage") or {}
    lines += _gauge(
        "memsync_verify_cycle_coverage_ratio",
        "Share of a side's stored bytes read back and matched within the last verify_cycle "
        "(1 = every byte).",
        [(f'{{side="{side}"}}', float(value)) for side, value in sorted(coverage.items())],
    )
    return lines


def _tripwire(summary: Mapping[str, Any]) -> list[str]:
    """``memsync_tripwire_tripped`` of the last snapshot run, when its report had a tripwire."""
    if not isinstance(summary.get("tripwire_tripped"), bool):
        return []
    labels = f'snapshot_id="{summary.get("snapshot_id") or ""}"'
    if isinstance(summary.get("tripwire_pinned"), str):
        labels += f',pinned="{summary["tripwire_pinned"]}"'
    lines = _gauge(
        "memsync_tripwire_tripped",
        "1 when the last snapshot held far fewer memories than the one before (mass-deletion; "
        "pinned: the snapshot kept until memsync snapshot unpin).",
        [(f"{{{labels}}}", int(summary["tripwire_tripped"]))],
    )
    split = [
        (f'{{snapshot_id="{summary.get("snapshot_id") or ""}",how="{how}"}}', summary[key])
        for how, key in (("deleted", "tripwire_deleted"), ("vanished", "tripwire_vanished"))
        if isinstance(summary.get(key), int)
    ]
    if split:
        lines += _gauge(
            "memsync_tripwire_gone_memories",
            "Memories of the snapshot before a tripped tripwire gone since: how=deleted with a "
            "DELETE history event, how=vanished without one (an error: check's missing-point).",
            split,
        )
    return lines


def protection_gauges(files: list[tuple[str, float | None]]) -> str:
    """``[protect]``'s gauges: per SQLite file (label), replicated or not and its lag. Pure.

    A file without a replica has ``memsync_protect_replicated 0`` and no lag series.
    """
    lines = _gauge(
        "memsync_protect_replicated",
        "1 when Litestream's replica holds a generation of the SQLite file ([protect]).",
        [(f'{{file="{label}"}}', int(lag is not None)) for label, lag in files],
    )
    lines += _gauge(
        "memsync_protect_lag_seconds",
        "Seconds the SQLite file's last write is newer than its replica's last shipment; "
        "0 when everything is shipped.",
        [(f'{{file="{label}"}}', lag) for label, lag in files if lag is not None],
    )
    return "\n".join(lines) + "\n"


def write_textfile(path: Path, text: str, mode: int) -> None:
    """Replace ``path`` with ``text`` atomically, with permissions ``mode`` whatever the umask.

    The temporary file (``.<name>.<pid>.tmp`` beside it) does not end in ``.prom``, so
    node_exporter never reads a partial file.

    Raises:
        OSError: the directory cannot be written.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
