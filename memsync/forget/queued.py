"""Apply the queue of forget, erase and prune requests (``memsync pending apply``).

Every request is selected again when it is applied (a scope reaches what the app added since
it was asked), all of them through one route, in the order they were asked. A request leaves
the queue only once its deletes are proven; a request that still finds no route stays queued.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import structlog

from memsync import routes
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ExitCode, MemsyncError
from memsync.forget.apply import Deleted, Past, delete_with, finish, look, without_deletes
from memsync.forget.select import Ask, Forgotten
from memsync.routes import queue as pending

logger = structlog.get_logger(__name__)

Status = Literal["applied", "queued", "failed", "would-apply"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    """One queued request and what became of it.

    ``status``: ``applied`` (proven, removed from the queue; also when nothing was left to
    do), ``queued`` (no route now: kept), ``failed`` (an error, an unknown id or a delete not
    proven: kept; ``error`` says why), ``would-apply`` (a dry run). ``done``: the forget's own
    report when it ran (or, in a dry run, what it would select now).
    """

    request: pending.PendingRequest
    status: Status
    done: Forgotten | None = None
    error: str | None = None

    def to_json(self, now: datetime) -> dict[str, Any]:
        """The request (as ``pending list`` shows it) and its fate."""
        return {
            **self.request.to_json(now),
            "status": self.status,
            "targets": list(self.done.targets.all) if self.done else None,
            "deleted": list(self.done.deleted) if self.done else [],
            "unproven": list(self.done.unproven) if self.done else [],
            "erased": (self.done.erased or None) if self.done else None,
            "replicas": self.done.replicas if self.done else None,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueRun:
    """``pending apply``: each request's fate, the route taken, and the requests left after."""

    dry_run: bool
    applied: tuple[Applied, ...]
    taken: routes.Taken
    left: int
    now: datetime

    def to_json(self) -> dict[str, Any]:
        """``pending apply --json`` (docs/reference/json-output.md)."""
        return {
            "command": "pending apply",
            "dry_run": self.dry_run,
            **self.taken.as_json(),
            "requests": [item.to_json(self.now) for item in self.applied],
            "left": self.left,
        }


def exit_code(applied: list[Applied]) -> ExitCode:
    """4 when a request failed, else 5 when one stays queued, else 0. Pure."""
    statuses = {item.status for item in applied}
    if "failed" in statuses:
        return ExitCode.PARTIAL
    return ExitCode.QUEUED if "queued" in statuses else ExitCode.OK


def apply_pending(
    deployment: Deployment, now: datetime, *, dry_run: bool
) -> tuple[list[Applied], routes.Taken]:
    """Apply every queued request through the route available now; return each one's fate.

    Looks once without a route: requests with nothing left to do leave the queue without one
    (a route is opened only for real work; a dry run opens none and says which it would take).
    Then one route for all the rest (``routes.open_writer``), each request selected and
    deleted in turn, the route closed, and each one erased and proven; proven ones are
    removed from the queue (``pending.remove``) and logged (``pending_applied``: who asked,
    when). Queued forgets take no safety snapshot.

    Raises:
        UnavailableError: the queue file or a store is unreadable (exit 11).
        WindowError, UnavailableError: as ``routes.open_writer`` (the window or the app).
    """
    config = deployment.config
    taken = routes.Taken()
    if not dry_run:
        routes.recover_window(config)  # a window a killed memsync left open: start the app
    requests = pending.load(config.state_dir)
    if not requests:
        return [], taken
    before = look(deployment, now, "pending apply", writing=not dry_run)
    results: dict[str, Applied] = {}
    work: list[tuple[pending.PendingRequest, Ask]] = []
    for request in requests:
        ask = Ask.of(request)
        targets = ask.select(before, now.date(), Past.of(deployment, ask).found)
        done = Forgotten(targets=targets, dry_run=dry_run)
        if targets.not_found:
            missing = ", ".join(targets.not_found)
            results[request.id] = Applied(
                request=request, status="failed", done=done, error=f"memory-not-found: {missing}"
            )
        elif ask.has_work(targets) and not dry_run:
            work.append((request, ask))
        elif ask.has_work(targets):
            results[request.id] = Applied(request=request, status="would-apply", done=done)
        else:  # nothing live: a scope erasure may still reach the copies a restore moved aside
            done = without_deletes(deployment, ask, targets, now, dry_run=dry_run)
            if not dry_run:
                results[request.id] = _applied(config, request, done, taken, now)
            else:
                status: Status = "would-apply" if done.erased else "applied"
                results[request.id] = Applied(request=request, status=status, done=done)
    if dry_run:
        if any(item.status == "would-apply" for item in results.values()):
            taken.route = deployment.would_take()
    elif work:
        _apply(deployment, now, work, results, taken)
    return [results[request.id] for request in requests], taken


def _apply(
    deployment: Deployment,
    now: datetime,
    work: list[tuple[pending.PendingRequest, Ask]],
    results: dict[str, Applied],
    taken: routes.Taken,
) -> None:
    """Delete every request's targets on one route, then erase and prove each (``results``)."""
    config = deployment.config
    deleted: dict[str, Deleted] = {}
    try:
        with deployment.open_writer("pending apply", taken) as writer:
            for request, ask in work:
                try:
                    deleted[request.id] = delete_with(deployment, writer, now, ask)
                except MemsyncError as error:
                    results[request.id] = Applied(
                        request=request, status="failed", error=error.message
                    )
    except routes.NoRouteError as no_route:
        for request, _ in work:
            results[request.id] = Applied(request=request, status="queued", error=no_route.message)
        return
    except routes.WindowOverrunError as overrun:
        for request, _ in work:
            if request.id not in deleted and request.id not in results:
                results[request.id] = Applied(
                    request=request, status="failed", error=overrun.message
                )
    for request, ask in work:
        if request.id not in deleted:
            continue
        try:
            done = finish(deployment, now, ask, deleted[request.id], taken)
        except MemsyncError as error:
            results[request.id] = Applied(request=request, status="failed", error=error.message)
            continue
        if done.exit_code is ExitCode.OK:
            results[request.id] = _applied(config, request, done, taken, now)
        else:
            why = "memory-not-found" if done.targets.not_found else "not proven gone"
            results[request.id] = Applied(
                request=request, status="failed", done=done,
                error=f"{why}: {', '.join(done.targets.not_found or done.unproven)}",
            )  # fmt: skip


def _applied(
    config: Config,
    request: pending.PendingRequest,
    done: Forgotten,
    taken: routes.Taken,
    now: datetime,
) -> Applied:
    """Remove a request proven applied from the queue; log who asked it and when."""
    pending.remove(config.state_dir, request.id)
    logger.info(
        "pending_applied", pending_id=request.id, kind=request.kind,
        requested_at=request.requested_at, requested_by=request.requested_by.get("user"),
        age_s=round(request.age_s(now), 3), route=taken.route, deleted=len(done.deleted),
    )  # fmt: skip
    return Applied(request=request, status="applied", done=done)
