"""Breaker: check during a run of deletes of expired memories reports the re-capture's delete.

``check.seen_twice`` keys the first capture's findings by memory id, every finding of it, not
only its pair disagreements: a memory with a warning there (``expired-memory``,
``duplicate-memory``) counts as "seen", so the ``missing-point`` its delete in flight leaves in
the re-capture is an error instead of ``in-flight``. That is exactly the memories a cleanup
deletes one after the other (an app's ``delete_all`` of expired notes, a prune of duplicates):
check exits 3 for deletes that all land, as d8a4f86's defect did before the fix, for these
memories only. The deletes held by a lock on history.db (``holders.delete_in_flight``) within
mem0's busy timeout, the timing by seams on check's capture and judge, as in
test_live_delete_all_breaks.py.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

from memsync import check
from tests.conftest import IN_FLIGHT_MARGIN_S, error_findings
from tests.helpers.holders import delete_in_flight


def test_check_during_a_run_of_deletes_of_expired_memories_reports_no_missing_point(
    deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    memory = deployment.memory
    past = (datetime.now(UTC).date() - timedelta(days=3)).isoformat()
    first, second = (
        memory.add(text, user_id="cleo", infer=False, expiration_date=past)["results"][0]["id"]
        for text in ("cleo's parking pass for march", "cleo's parking pass for april")
    )
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)  # their ADDs are older than the margin
    history = deployment.paths.history_db
    held: list[Any] = []
    judged: list[Any] = []
    temporary_capture, judge_capture = check.capture.temporary_capture, check.judge_capture
    with ExitStack() as stack:

        def first_delete_in_flight(*args: Any, **kwargs: Any) -> Any:
            if not held:
                held.append(stack.enter_context(delete_in_flight(memory, history, first)))
            return temporary_capture(*args, **kwargs)

        def next_delete_after_each_capture(*args: Any, **kwargs: Any) -> Any:
            report = judge_capture(*args, **kwargs)
            judged.append(report)
            held[-1]()  # the delete this capture caught lands
            if len(judged) == 1:  # and the next one is caught in flight by the re-capture
                held.append(stack.enter_context(delete_in_flight(memory, history, second)))
            return report

        monkeypatch.setattr(check.capture, "temporary_capture", first_delete_in_flight)
        monkeypatch.setattr(check, "judge_capture", next_delete_after_each_capture)
        result = cli("check", "--json", config=deployment.config)
    monkeypatch.undo()
    assert len(judged) == 2
    after = cli("check", "--json", config=deployment.config)
    assert after.code == 0 and error_findings(after.json()) == {}  # both deletes landed: clean
    assert error_findings(result.json()) == {}, result.out
    assert result.code == 0
