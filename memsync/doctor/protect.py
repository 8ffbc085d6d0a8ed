"""Doctor's ``protection`` probe: Litestream runs, and every SQLite file's replica keeps up."""

from __future__ import annotations

from datetime import datetime

from memsync import findings, protection
from memsync.deployment import Deployment
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.errors import MemsyncError
from memsync.model import DoctorResult

CODE = "protection"
CHANGED = "replica-generation-changed"  # the replica's generation is not this host's


def probe_protection(deployment: Deployment, now: datetime) -> list[DoctorResult]:
    """With ``[protect]``: Litestream's process, then one result per file (lag, or why not).

    An error when Litestream is not running, a file is not replicated, or its replica is more
    than ``[protect] max_lag_s`` behind its last write. Reads the replicas only.
    """
    config = deployment.config
    if config.protect is None:
        return []
    try:
        status = protection.read_status(deployment.vector_store, config, now)
    except MemsyncError as error:
        return [DoctorResult(code=CODE, status=ERROR, message=error.message, fix=error.hint)]
    shipped = any(entry.generation for entry in status.files)
    if status.pid:
        first = DoctorResult(code=CODE, status=OK, message=f"Litestream runs as pid {status.pid}")
    elif not shipped:  # never started here: no "stopped", no "since its last shipment"
        first = DoctorResult(
            code=CODE,
            status=ERROR,
            message="nothing of this deployment has been replicated yet: " + status.not_running,
            fix="memsync protect, then start the daemon (systemctl start memsync)",
        )
    else:
        first = DoctorResult(
            code=CODE,
            status=ERROR,
            message=f"{status.not_running}; writes since its last shipment are not replicated",
            fix="start the daemon (systemctl start memsync); journalctl -u memsync says why "
            "Litestream stopped",
        )
    results = [first]
    if status.pid and status.stale is not None:
        results.append(DoctorResult(code=CODE, status=ERROR, message=status.stale))
    if status.orphan is not None:
        message, fix = protection.orphan_note(status.orphan)
        results.append(DoctorResult(code=CODE, status=WARNING, message=message, fix=fix))
    for entry in status.files:
        late = entry.lag_s is not None and entry.lag_s > status.max_lag_s
        if entry.generation_changed:
            results.append(
                DoctorResult(
                    code=CHANGED,
                    status=ERROR,
                    path=str(entry.path),
                    message=f"{entry.label} is not protected by this host: {entry.problem}",
                    fix=findings.spec(CHANGED).fix,
                )
            )
        elif entry.problem is not None or late:
            why = entry.problem or (
                f"its replica {entry.replica} is {entry.lag_s:.0f} s behind its last write "
                f"(max_lag_s {status.max_lag_s:g})"
            )
            results.append(
                DoctorResult(
                    code=CODE,
                    status=ERROR,
                    path=str(entry.path),
                    message=f"{entry.label} is not protected: {why}",
                    fix="memsync protect (switches it to WAL and writes the configuration); "
                    "memsync protect --status",
                )
            )
        else:
            results.append(
                DoctorResult(
                    code=CODE,
                    status=OK,
                    path=str(entry.path),
                    message=f"{entry.label} replicated to {entry.replica}, lag {entry.lag_s} s, "
                    f"{entry.bytes_last_hour} bytes shipped in the last hour",
                )
            )
    return results
