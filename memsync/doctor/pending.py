"""Doctor's probe of the queue of forget, erase and prune requests (``memsync.pending``)."""

from __future__ import annotations

from datetime import datetime

from memsync import pending
from memsync.config import Config
from memsync.doctor.status import ERROR, WARNING
from memsync.errors import UnavailableError
from memsync.model import DoctorResult

APPLY_FIX = (
    "memsync pending apply once a route exists (the app's memsync agent, [app] stop_command and "
    "start_command, or the app stopped); memsync pending list shows who asked and when"
)


def probe_pending(config: Config, now: datetime) -> list[DoctorResult]:
    """The queue's size and oldest request (warning), and each erasure queued too long (error).

    Nothing when the queue is empty. An erasure older than ``[app] max_pending`` is an error:
    someone asked for their text to be gone and it is still there. Reads only.
    """
    path = str(config.state_dir / pending.PENDING_FILE)
    try:
        requests = pending.load(config.state_dir)
    except UnavailableError as error:
        return [
            DoctorResult(
                code="pending-requests",
                status=ERROR,
                path=path,
                message=error.message,
                fix=error.hint,
            )  # fmt: skip
        ]
    if not requests:
        return []
    oldest = pending.oldest_age_s(requests, now) or 0.0
    kinds = sorted({request.kind for request in requests})
    results = [
        DoctorResult(
            code="pending-requests",
            status=WARNING,
            path=path,
            message=f"{len(requests)} requests ({', '.join(kinds)}) wait for a route to write; "
            f"the oldest was asked {oldest / 3600:.1f} h ago",
            fix=APPLY_FIX,
        )
    ]
    limit_s = config.app.max_pending.total_seconds()
    for request in requests:
        if request.kind != "erase" or request.age_s(now) <= limit_s:
            continue
        results.append(
            DoctorResult(
                code="pending-erasure-overdue",
                status=ERROR,
                path=path,
                message=f"erasure {request.id} (asked {request.requested_at} by "
                f"{request.requested_by.get('user', '?')}) has waited "
                f"{request.age_s(now) / 3600:.1f} h, longer than [app] max_pending "
                f"({limit_s / 3600:g} h): the text is still stored",
                fix=APPLY_FIX,
            )
        )
    return results
