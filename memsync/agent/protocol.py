"""The agent's wire constants, its one error type, and the request parser both hosts share.

Both hosts of the operations speak it: the agent inside the app (``server``, a Unix socket) and
the one-shot writer (``writer``, a process of the app's interpreter on stdin/stdout); see
docs/reference/agent-protocol.md.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any

PROTOCOL = 1
SOCKET_NAME = "memsync-agent.sock"
MAX_REQUEST_BYTES = 4 * 1024 * 1024
IDLE_TIMEOUT_S = 60.0  # a connection with no complete request for this long is closed
WAIT_FOR_APP_S = 30.0  # an agent op or a pause waits this long for in-flight app calls
HOLD_NEW_CALLS_S = 2.0  # the longest new app calls wait behind an op waiting for slow ones
# The agent's bounds inside the app (docs/reference/agent-protocol.md, "What the agent costs"):
MAX_CONNECTIONS = 8  # open connections at once; more are answered busy and closed
MAX_CONNECTIONS_PER_UID = 4  # so one peer uid cannot take every slot
RESERVED_CONNECTIONS = 2  # slots only root and the app's own uid may take (memsync gets in)
MAX_BUFFERED_BYTES = 2 * MAX_REQUEST_BYTES  # unread request bytes over all connections
REQUEST_DEADLINE_S = 10.0  # first byte to newline of one request, however it trickles
FD_HEADROOM = 64  # descriptors the app keeps free under RLIMIT_NOFILE beyond the agent's
# JSON arrays and objects in one request: a migration's batch of 64 points holds a few hundred;
# a few million empty ones fit in 4 MiB and would take the app's CPU (and GIL) to parse.
MAX_JSON_CONTAINERS = 20_000
READ_ONLY_REQUEST_BYTES = 65536  # a read-only peer's request (hello, get, search, embed)


class AgentRequestError(Exception):
    """A request the agent answers with an error reply.

    ``kind``: bad-request, failed, busy or refused; ``request_id``: the request's id when it
    could be read.
    """

    def __init__(self, kind: str, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.request_id = request_id


def parse_request(
    line: bytes, handlers: dict[str, Callable[..., Any]]
) -> tuple[Any, str, Callable[[], Any]]:
    """``(id, op, call)`` of a request line; ``call()`` runs the op with its arguments bound.

    Raises:
        AgentRequestError: ("bad-request") not JSON (or nested too deep), not an object,
            another protocol version, an unknown op, or arguments the op does not take.
    """
    if line.count(b"[") + line.count(b"{") > MAX_JSON_CONTAINERS:  # cheap, before parsing
        raise AgentRequestError(
            "bad-request", f"more than {MAX_JSON_CONTAINERS} JSON arrays and objects"
        )
    try:
        request = json.loads(line)
    except (ValueError, RecursionError) as error:
        raise AgentRequestError("bad-request", f"not JSON: {type(error).__name__}") from None
    if not isinstance(request, dict):
        raise AgentRequestError("bad-request", "a request is a JSON object")
    request_id = request.get("id")
    if not isinstance(request_id, (str, int, type(None))) or isinstance(request_id, bool):
        raise AgentRequestError("bad-request", "id must be a string, an integer or null")
    if request.get("v") != PROTOCOL:
        version = str(request.get("v"))[:20]
        raise AgentRequestError(
            "bad-request", f"protocol {version}; this agent speaks {PROTOCOL}", request_id
        )
    op, args = request.get("op"), request.get("args", {})
    handler = handlers.get(op) if isinstance(op, str) else None
    if handler is None or not isinstance(args, dict):
        message = f"unknown op {str(op)[:40]!r} or args not an object"
        raise AgentRequestError("bad-request", message, request_id)
    try:
        bound = inspect.signature(handler).bind(**args)
    except TypeError as error:
        raise AgentRequestError("bad-request", f"{op}: {error}", request_id) from None
    return request_id, str(op), functools.partial(handler, *bound.args, **bound.kwargs)


def failure_details(error: BaseException) -> dict[str, Any]:
    """What a caller can act on in an op's exception, for the error reply.

    ``exception`` (its type), and, for an HTTP client's error (openai, httpx, requests),
    ``status`` and ``retry_after_s`` (a ``Retry-After`` in seconds).
    """
    details: dict[str, Any] = {"exception": type(error).__name__}
    response = getattr(error, "response", None)
    for status in (
        getattr(error, "status_code", None),
        getattr(response, "status_code", None),
        getattr(error, "status", None),
    ):
        if isinstance(status, int) and 100 <= status <= 599:
            details["status"] = status
            break
    headers = getattr(response, "headers", None)
    try:
        wait = float(headers.get("retry-after")) if headers is not None else None
    except (AttributeError, TypeError, ValueError):
        wait = None  # an HTTP date, or no header: not honoured
    if wait is not None and 0 <= wait <= 3600:
        details["retry_after_s"] = wait
    return details


def reply_bytes(
    request_id: Any,
    result: Any = None,
    error: tuple[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> bytes:
    """One reply line (newline included); a result JSON cannot carry becomes a "failed" error.

    ``details``: more keys of the error object (a refusal's ``peer`` and ``allowed``).
    """
    document: dict[str, Any] = {"v": PROTOCOL, "id": request_id, "ok": error is None}
    if error is None:
        document["result"] = result
    else:
        document["error"] = {"type": error[0], "message": error[1], **(details or {})}
    try:
        text = json.dumps(document, default=str, allow_nan=False)
    except (ValueError, RecursionError):
        document = {"v": PROTOCOL, "id": request_id, "ok": False}
        document["error"] = {"type": "failed", "message": "the result is not valid JSON"}
        text = json.dumps(document)
    return text.encode() + b"\n"
