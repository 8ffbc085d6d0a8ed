"""What a queued request keeps (its selection, never resolved ids) and how pending apply exits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memsync import pending
from memsync.errors import ExitCode
from memsync.forget import Applied, Ask
from memsync.forget.queued import exit_code

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "ask",
    [
        Ask(kind="erase", user_id="alice"),
        Ask(kind="forget", memory_ids=("a", "b")),
        Ask(kind="prune"),
        Ask(kind="forget", agent_id="coach", run_id="r1"),
    ],
    ids=["user-erasure", "ids", "prune", "agent-and-run"],
)
def test_a_request_records_the_selection_and_gives_it_back_unchanged(ask):
    request = ask.request(NOW)
    assert request.requested_at == "2026-05-01T12:00:00Z" and request.kind == ask.kind
    assert Ask.of(request) == ask


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        ((), ExitCode.OK),
        (("applied", "applied"), ExitCode.OK),
        (("applied", "queued"), ExitCode.QUEUED),
        (("queued", "failed"), ExitCode.PARTIAL),
        (("would-apply",), ExitCode.OK),
    ],
    ids=["empty", "all-applied", "some-queued", "a-failure-wins", "dry-run"],
)
def test_pending_apply_exit_status(statuses, code):
    request = pending.new_request("prune", NOW)
    assert exit_code([Applied(request=request, status=s) for s in statuses]) is code
