"""What a queued request keeps (its selection, never resolved ids) and how pending apply exits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memsync.errors import ExitCode
from memsync.forget import Applied, Ask
from memsync.forget.queued import exit_code
from memsync.routes import queue as pending

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


def test_a_scope_erasure_selects_the_past_ids_history_still_knows_without_a_point():
    from memsync.forget import Forgotten, Targets
    from tests.helpers.values import event, inventory, point

    store = inventory(
        [point("live", user_id="carol"), point("bob's", user_id="bob")],
        [
            event("live"),
            event("gone"),
            event("gone", "DELETE", None, rowid=2),
            event("lost"),
            event("bob's"),
        ],
    )
    past = {"gone", "lost", "bob's", "never-in-history"}
    targets = Ask(kind="erase", user_id="carol").select(store, NOW.date(), past)
    assert targets == Targets(
        with_point=("live",), history_only=("lost",), not_found=(), already_deleted=("gone",)
    )
    assert Ask(kind="erase", user_id="carol").select(store, NOW.date()).all == ("live",)
    unverified = Forgotten(
        targets=targets,
        dry_run=False,
        erased={"checkpoint": {"history.db": "busy: ..."}, "verified": {"files": 2, "hits": []}},
    )
    assert unverified.exit_code == ExitCode.PARTIAL
    assert unverified.unverified == ["history.db: busy: ..."]
    proven = Forgotten(
        targets=targets,
        dry_run=False,
        erased={"checkpoint": {"history.db": "truncated"}, "verified": {"files": 2, "hits": []}},
    )
    assert proven.exit_code == ExitCode.OK


def test_the_erasure_line_says_rewritten_only_when_the_bytes_were_verified_gone():
    from memsync.cli.forget import _copies_lines

    base = {"history_rows_blanked": 3, "compaction": "VACUUM", "copies": []}
    proven = _copies_lines(
        {**base, "checkpoint": {"history.db": "truncated"}, "verified": {"files": 4, "hits": []},
         "deleted_earlier": [{"memory_id": "m1", "found_in": "snapshot S1"}],
         "unattributed": [f"u{n}" for n in range(12)]}
    )  # fmt: skip
    assert proven[0] == (
        "erased: 3 history rows blanked, both stores rewritten (VACUUM), 4 store files "
        "searched: no byte left; no copy memsync knows of holds it"
    )
    assert "deleted earlier, erased too: m1 (found in snapshot S1)" in proven
    assert (
        proven[-1].startswith("12 deleted memories keep text in history") and "u9 ..." in proven[-1]
    )
    busy = _copies_lines(
        {**base, "checkpoint": {"history.db": "busy: another connection kept history.db-wal"},
         "verified": {"files": 4, "hits": ["/srv/mem0/history.db-wal"]}}
    )  # fmt: skip
    assert "rewritten" not in busy[0] and "NOT verified gone" in busy[0]
    assert "history.db: busy" in busy[0] and "/srv/mem0/history.db-wal still holds" in busy[0]
    assert "run the same command again" in busy[0]
