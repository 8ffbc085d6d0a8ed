"""The ``snapshot purge-memory`` report: its ``--json`` document and its text."""

from __future__ import annotations

from memsync.snapshot.purge_memory import Purged


def text(done: Purged, *, dry_run: bool) -> str:
    """The text report: what holds the memories, what was rewritten, the versions."""
    if dry_run:
        lines = [f"holds them: {i}" for i in done.holding]
        lines.append(
            f"{len(done.holding)} local snapshots hold {len(done.memory_ids)} memories "
            "(remote-only snapshots are read by a run with --remote)"
        )
    else:
        lines = [
            f"rewrote {len(done.rewritten)} snapshot(s)"
            + (f", re-uploaded {len(done.uploaded)}" if done.uploaded else "")
            + f" ({len(done.memory_ids)} memories)"
        ]
    if done.other_backend:
        lines.append(
            f"{len(done.other_backend)} of them of the other backend (taken before a migrate "
            f"--switch), not rewritten: {', '.join(done.other_backend)}"
        )
    lines += _version_lines(done, dry_run)
    return "\n".join(lines)


def other_backend_refusal(done: Purged) -> tuple[str, str]:
    """The exit-11 error line when snapshots of the other backend hold them: ``(message, hint)``."""
    return (
        f"{len(done.other_backend)} snapshot(s) of the other backend, taken before a migrate "
        f"--switch, hold these memories and were not rewritten: {', '.join(done.other_backend)}",
        "run the same purge-memory with memsync's config as it was before the switch "
        "(memsync --config OLD.toml snapshot purge-memory ...: memsync.toml.bak, or your config "
        "with mem0_config_file naming the app's .bak)",
    )


def _version_lines(done: Purged, dry_run: bool) -> list[str]:
    if done.scan_error:
        return [f"noncurrent S3 versions holding erased memories: {done.scan_error}"]
    scan = done.scan
    if scan is None:
        return []
    deleted = set(done.deleted)
    kept = {k.version.label: k for k in done.kept}
    lines = []
    for hit in scan.hits:
        label = hit.version.label
        if label in deleted:
            lines.append(f"deleted {label}")
        elif label in kept:
            until = kept[label].retain_until
            lines.append(
                f"KEPT    {label}: object lock"
                + (f", retained until {until.isoformat()}" if until else "")
            )
        elif label in done.failed:
            lines.append(f"FAILED  {label}: not deleted: {done.failed[label]}")
        else:
            lines.append(
                f"{'would delete' if dry_run else 'holds'} {label} "
                f"({len(hit.memory_ids)} erased memories)"
            )
    lines += [f"unreadable {label}: {why}" for label, why in sorted(scan.unreadable.items())]
    left = len(scan.hits) - len(deleted)
    lines.append(
        f"noncurrent S3 versions holding erased memories: {len(scan.hits)}, deleted "
        f"{len(deleted)}, left {left}"
        + (
            " (memsync snapshot purge-memory ... --delete-versions deletes them)"
            if left and not done.kept and not done.failed and not dry_run
            else ""
        )
        + f"; read {scan.downloaded}, known from earlier runs {scan.cached}"
    )
    return lines


def refusal(done: Purged) -> tuple[str, str]:
    """The exit-11 error line when object lock kept versions: ``(message, hint)``."""
    first = done.kept[0]
    until = f" (retained until {first.retain_until.isoformat()})" if first.retain_until else ""
    return (
        f"object lock kept {len(done.kept)} noncurrent S3 version(s) holding erased memories, "
        f"first {first.version.label}{until}",
        "delete them once their retention ends (run this again then); every other version "
        "holding them was deleted",
    )


def failed_refusal(done: Purged) -> tuple[str, str]:
    """The exit-11 error line when S3 did not delete versions: ``(message, hint)``."""
    label, why = next(iter(done.failed.items()))
    return (
        f"{len(done.failed)} noncurrent S3 version(s) holding erased memories were not "
        f"deleted, first {label}: {why}",
        "they still hold the text: check that the provider deletes object versions (memsync "
        "doctor: s3-delete-version), or delete them in the provider's console, then run this "
        "again",
    )


def unknown_refusal(done: Purged) -> tuple[str, str]:
    """The exit-11 error line when the bucket's versions could not be listed: ``(message, hint)``."""
    return (
        f"whether noncurrent S3 versions hold erased memories is {done.scan_error}",
        done.scan_hint or "run this again once S3 answers",
    )
