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
IDLE_TIMEOUT_S = 60.0
WAIT_FOR_APP_S = 30.0  # an agent op or a pause waits this long for in-flight app calls


class AgentRequestError(Exception):
    """A request the agent answers with an error reply (``type``: bad-request, failed, busy)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def parse_request(
    line: bytes, handlers: dict[str, Callable[..., Any]]
) -> tuple[Any, str, Callable[[], Any]]:
    """``(id, op, call)`` of a request line; ``call()`` runs the op with its arguments bound.

    Raises:
        AgentRequestError: ("bad-request") not JSON (or nested too deep), not an object,
            another protocol version, an unknown op, or arguments the op does not take.
    """
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
        raise AgentRequestError("bad-request", f"protocol {version}; this agent speaks {PROTOCOL}")
    op, args = request.get("op"), request.get("args") or {}
    handler = handlers.get(op) if isinstance(op, str) else None
    if handler is None or not isinstance(args, dict):
        raise AgentRequestError("bad-request", f"unknown op {str(op)[:40]!r} or args not an object")
    try:
        bound = inspect.signature(handler).bind(**args)
    except TypeError as error:
        raise AgentRequestError("bad-request", f"{op}: {error}") from None
    return request_id, str(op), functools.partial(handler, *bound.args, **bound.kwargs)


def reply_bytes(
    request_id: Any,
    result: Any = None,
    error: tuple[str, str] | None = None,
    detail: dict[str, Any] | None = None,
) -> bytes:
    """One reply line (newline included); a result JSON cannot carry becomes a "failed" error.

    ``detail``: more keys of the error object (a refusal's ``peer`` and ``allowed``).
    """
    document: dict[str, Any] = {"v": PROTOCOL, "id": request_id, "ok": error is None}
    if error is None:
        document["result"] = result
    else:
        document["error"] = {**(detail or {}), "type": error[0], "message": error[1]}
    try:
        text = json.dumps(document, default=str, allow_nan=False)
    except (ValueError, RecursionError):
        document = {"v": PROTOCOL, "id": request_id, "ok": False}
        document["error"] = {"type": "failed", "message": "the result is not valid JSON"}
        text = json.dumps(document)
    return text.encode() + b"\n"
