"""The agent's wire constants and its one error type (docs/reference/agent-protocol.md)."""

from __future__ import annotations

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
