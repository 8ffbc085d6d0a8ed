"""The refusal and identity messages memsync prints for the app's agent (issue 23): values only."""

from __future__ import annotations

import json
import os

from memsync.agent.protocol import reply_bytes
from memsync.errors import ExitCode
from memsync.stores.agent_client import AgentRefusedError, ExpectedServer


def test_a_refusal_reply_becomes_one_line_naming_memsyncs_uid_what_is_allowed_and_the_fix() -> None:
    line = reply_bytes(
        None,
        error=("refused", "uid 1000 (groups [1000]) is not allowed by this agent"),
        details={
            "peer": {"uid": 1000, "gids": [1000]},
            "allowed": {"uids": [0, 999], "gids": [42]},
        },
    )
    problem = json.loads(line)["error"]
    assert problem["type"] == "refused" and problem["allowed"]["gids"] == [42]

    error = AgentRefusedError.from_reply("the app's memsync agent at /run/a.sock", problem)
    assert error.exit_code is ExitCode.UNAVAILABLE
    assert error.message.startswith(
        f"the app's memsync agent at /run/a.sock refused memsync (uid {os.getuid()} ("
    )
    assert error.message.endswith(": it allows uids [0, 999] and gids [42]")
    assert f"allow_gids=[{os.getgid()}]" in (error.hint or "")
    assert "run memsync as uid 0 (root) or uid 999" in (error.hint or "")
    assert "\n" not in error.message + (error.hint or "")


def test_an_older_agents_refusal_keeps_its_own_message() -> None:
    problem = {"type": "refused", "message": "uid 1000 gid 1000 is not allowed"}
    error = AgentRefusedError.from_reply("the app's memsync agent at /run/a.sock", problem)
    assert error.message.endswith(": uid 1000 gid 1000 is not allowed")
    assert "run memsync as root or the app's user" in (error.hint or "")


def test_the_expected_identity_names_each_uid_with_why() -> None:
    expected = ExpectedServer({0: ("owns /srv/qdrant", "runs pid 12, the store's holder")})
    assert expected.describe() == (
        "uid 0 (user root: owns /srv/qdrant; runs pid 12, the store's holder)"
    )
