"""The only writer to stdout: text reports or one JSON document; error lines go to stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memsync import findings
from memsync.errors import ExitError
from memsync.model import CheckReport, Finding
from memsync.utc import iso as _iso

if TYPE_CHECKING:  # doctor's modules (S3, routes) load only for the doctor command
    from memsync.doctor import DoctorReport


@contextmanager
def progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr when it is a terminal (tqdm); None otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(desc=label, unit=" points", file=sys.stderr, leave=False, mininterval=0.2)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()


@contextmanager
def byte_progress(label: str, total: int | None) -> Iterator[Callable[[int], None] | None]:
    """A byte-count progress bar on stderr when it is a terminal (tqdm); None otherwise.

    The callback takes the bytes just transferred (boto3's Callback convention).
    """
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(desc=label, total=total, unit="B", unit_scale=True, file=sys.stderr, leave=False)
    try:
        yield bar.update
    finally:
        bar.close()


def emit(as_json: bool, document: dict[str, Any], text: str) -> int:
    """Write the JSON document or the text; return 0 (the commands' usual success)."""
    if as_json:
        emit_json(document)
    else:
        emit_text(text)
    return 0


def emit_json(document: dict[str, Any]) -> None:
    """Write exactly one JSON document (and a newline) to stdout."""
    # ASCII escapes keep the document valid UTF-8 whatever a payload or command line holds.
    sys.stdout.write(json.dumps(document, ensure_ascii=True, sort_keys=False) + "\n")
    sys.stdout.flush()


def emit_text(text: str) -> None:
    """Write human-readable text to stdout."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def exit_error(code: int, message: str, hint: str | None, *, as_json: bool) -> None:
    """Write the one stderr line of a failed command (contract: ``exit_error``)."""
    if as_json:
        line = json.dumps(ExitError(code, message, hint).to_json())
    else:
        line = f"memsync: error: {message}" + (f" (hint: {hint})" if hint else "")
    sys.stderr.write(line.replace("\n", " ") + "\n")
    sys.stderr.flush()


def finding_lines(finding: Finding) -> list[str]:
    """A finding as text: severity, code and subject; the message; the fix and where it is explained.

    The fix is the finding's own, else the registry's default; the anchor comes from the
    registry (``memsync.findings``). An unregistered code is shown without either.
    """
    where = finding.memory_id or finding.path or finding.collection or "-"
    lines = [
        f"{finding.severity.value.upper():<8} {finding.code:<22} {where}",
        f"         {finding.message}",
    ]
    entry = findings.REGISTRY.get(finding.code)
    fix = finding.fix or (entry.fix if entry else None)
    if fix:
        lines.append(f"         fix: {fix}" + (f" (see {entry.anchor})" if entry else ""))
    return lines


def check_text(report: CheckReport, limit: int | None = None) -> str:
    """A readable check report: one block per finding, then a summary line."""
    lines: list[str] = []
    shown = report.findings if limit is None else report.findings[:limit]
    for finding in shown:
        lines += finding_lines(finding)
    if limit is not None and len(report.findings) > limit:
        lines.append(f"... and {len(report.findings) - limit} more (use --json for all)")
    counts = report.counts()
    verdict = "stores agree" if report.ok else "STORES DISAGREE"
    lines.append(
        f"check: {verdict}: {counts['errors']} errors, {counts['warnings']} warnings, "
        f"{counts['infos']} infos ({counts['points']} points, {counts['history_memories']} "
        f"memories in history, deleted ones included; captured vectors at "
        f"{_iso(report.window.vectors_at)}, "
        f"history at {_iso(report.window.history_at)})"
    )
    return "\n".join(lines)


def doctor_text(report: DoctorReport) -> str:
    """A readable doctor report: one line per result, fixes indented, then a summary."""
    from memsync.doctor import summarize

    lines = []
    for result in report.results:
        where = f" [{result.path}]" if result.path else ""
        lines.append(f"{result.status.upper():<8} {result.code:<22} {result.message}{where}")
        if result.fix and result.status != "ok":
            lines.append(f"{'':<32}fix: {result.fix}")
    counts = summarize(report.results)
    lines.append(
        f"doctor: {'healthy' if report.ok else 'UNHEALTHY'}: {counts['errors']} errors, "
        f"{counts['warnings']} warnings, {counts['ok']} ok"
    )
    return "\n".join(lines)
