"""Doctor's probes of writes: the route a write would take now, the queue, an open window."""

from __future__ import annotations

import os
from datetime import datetime

from memsync.config import Config
from memsync.deployment import Deployment
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.errors import MemsyncError, TryLaterError, UnavailableError
from memsync.model import DoctorResult
from memsync.routes import queue as pending
from memsync.state import WINDOW_FILE, window_left_open
from memsync.stores import interpreter
from memsync.stores.agent_client import (
    AgentRefusedError,
    agent_socket_for,
    find_agent,
    sockets_hidden,
    why_no_agent,
)

APPLY_FIX = (
    "memsync pending apply once a route exists (the app's memsync agent, [app] stop_command and "
    "start_command, or the app stopped); memsync pending list shows who asked and when"
)


ROUTE_FIX = (
    "attach memsync.agent in the app (two lines), or set [app] stop_command and start_command: "
    "docs/how-to/maintenance-while-the-app-runs.md"
)


def probe_route(deployment: Deployment) -> DoctorResult:
    """The route a write (forget, prune, reconcile) would take now, as ``routes.open_writer``.

    Reads /proc and greets the app's agent (``hello``: a read); never takes a lock. A warning
    when the app holds the store and neither its agent nor a window can write (forget, erase
    and prune would be queued; reconcile and confirm refused); an error when the agent that
    answers serves another deployment or is not this deployment's app; ``agent-refused`` (an
    error) when the agent, or its socket's mode, refuses memsync: every write and quiesced
    snapshot would fail (exit 11).
    """
    config = deployment.config
    store = deployment.vector_store
    holder = store.holder()
    path = store.where
    try:
        client = find_agent(deployment.vector_store, config)
    except AgentRefusedError as error:
        return DoctorResult(
            code="agent-refused", status=ERROR, path=str(agent_socket_for(deployment.vector_store, config)),
            message=error.message, fix=error.hint,
        )  # fmt: skip
    except UnavailableError as error:
        return DoctorResult(
            code="write-route", status=ERROR, path=path, message=error.message, fix=error.hint
        )
    except TryLaterError as error:
        return DoctorResult(
            code="write-route", status=WARNING, path=path, message=error.message, fix=error.hint
        )
    if client is not None:
        with client:
            return DoctorResult(
                code="write-route", status=OK, path=str(client.path),
                message=f"writes go through the app's memsync agent (pid {client.hello.get('pid')})",
            )  # fmt: skip
    app = " with the app's interpreter (app-interpreter above)"
    if interpreter.shown(config) is None:
        app = ", but only with the app's interpreter, which is unknown: they are refused now"
    gone = next((own.path for own in store.local_dirs() if not own.path.exists()), None)
    if gone is not None:
        return DoctorResult(
            code="write-route", status=WARNING, path=path,
            message=f"no write route: the store {gone} is not there",
            fix="check the path first (memsync config show); if it is right, the store is "
            "lost: memsync restore latest",
        )  # fmt: skip
    if holder is None or holder.pid == os.getpid():
        try:
            store.reach()  # a server store: reachable at all (one connection, no table read)
        except MemsyncError as error:  # unreachable, or its secret unset (ConfigError)
            return DoctorResult(
                code="write-route", status=ERROR, path=path,
                message=f"no write route: {error.message}", fix=error.hint,
            )  # fmt: skip
        message = f"nobody holds the store: writes go to it directly{app}"
        return DoctorResult(code="write-route", status=OK, path=path, message=message)
    why = why_no_agent(agent_socket_for(deployment.vector_store, config))
    if why is None and config.app.agent_socket is None and sockets_hidden(holder.pid):
        why = (
            f"memsync (uid {os.getuid()}) cannot see which sockets pid {holder.pid} listens on: "
            "if the app attaches the agent, set [app] agent_socket to its path"
        )
    because = "" if why is None else f" ({why})"
    if config.app.window:
        return DoctorResult(
            code="write-route", status=OK, path=path,
            message=f"{holder.describe()} holds the store and no agent answers{because}: writes stop it "
            f"for a maintenance window (at most {config.app.max_downtime_s:g} s){app}",
        )  # fmt: skip
    return DoctorResult(
        code="write-route", status=WARNING, path=path,
        message=f"{holder.describe()} holds the store, no memsync agent answers{because} and no "
        "window is configured: forget, erase and prune would be queued, reconcile and confirm "
        "refused",
        fix=ROUTE_FIX
        + "; an app that attaches the agent logs why it serves nothing (logger memsync.agent)",
    )  # fmt: skip


def probe_window(config: Config) -> list[DoctorResult]:
    """An error when a maintenance window was left open: its memsync died, the app may be down.

    Reads ``<state_dir>/window.json`` (``state.window_left_open``); nothing when it is absent.
    """
    document = window_left_open(config.state_dir)
    if document is None:
        return []
    return [
        DoctorResult(
            code="window-left-open",
            status=ERROR,
            path=str(config.state_dir / WINDOW_FILE),
            message=f"a maintenance window for {document.get('what', '?')} opened at "
            f"{document.get('opened_at', '?')} was never closed: [app] stop_command ran, "
            "start_command did not succeed; the app may be down",
            fix="start the app ([app] start_command), or run any memsync write (prune): it "
            "runs start_command first and removes the marker",
        )
    ]


def probe_pending(config: Config, now: datetime) -> list[DoctorResult]:
    """The queue's size and oldest request (warning), and each erasure queued too long (error).

    Nothing when the queue is empty. An erasure older than ``[app] max_pending`` is an error:
    someone asked for their text to be gone and it is still there. A window left open comes
    first (``probe_window``). Reads only.
    """
    results = probe_window(config)
    path = str(config.state_dir / pending.PENDING_FILE)
    try:
        requests = pending.load(config.state_dir)
    except UnavailableError as error:
        return [
            *results,
            DoctorResult(
                code="pending-requests",
                status=ERROR,
                path=path,
                message=error.message,
                fix=error.hint,
            ),  # fmt: skip
        ]
    if not requests:
        return results
    oldest = pending.oldest_age_s(requests, now) or 0.0
    kinds = sorted({request.kind for request in requests})
    results.append(
        DoctorResult(
            code="pending-requests",
            status=WARNING,
            path=path,
            message=f"{len(requests)} requests ({', '.join(kinds)}) wait for a route to write; "
            f"the oldest was asked {oldest / 3600:.1f} h ago",
            fix=APPLY_FIX,
        )
    )
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
