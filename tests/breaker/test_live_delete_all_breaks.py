"""A delete_all (or any run of deletes) in flight while check and doctor capture.

mem0 deletes each memory's point, then writes its DELETE event. check captures once more when
it sees a ``missing-point`` (a delete in flight looks like one); a ``delete_all`` still running
then has its next delete in flight, a new ``missing-point`` the first capture never saw. It is
``in-flight`` (seen once), not an error: every delete lands a moment later. The app is held
between its two writes by a lock on history.db (``holders.delete_in_flight``), the re-capture's
timing by a seam on check's judge.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

import pytest

from memsync import check
from tests.conftest import IN_FLIGHT_MARGIN_S, error_findings
from tests.helpers.holders import delete_in_flight, deployment_in_mode


@pytest.fixture(params=["embedded-rollback", "embedded-wal", "pgvector-rollback", "pgvector-wal"])
def deployment(request: Any, make_deployment: Any) -> Any:
    """The seeded deployment on each vector store, history.db (and Qdrant's file) in each mode."""
    return deployment_in_mode(make_deployment, request.param)


def _deletes_one_after_the_other(deployment: Any, monkeypatch: Any) -> tuple[list[str], ExitStack]:
    """The app deletes ``live[0]``, then ``live[1]`` (as ``delete_all`` does, one by one): the
    first capture finds the first delete between its two writes, the re-capture the second.
    Each delete is held well within mem0's 5 s busy timeout, and lands. Returns the victims and
    the stack holding the deletes (closing it lands what is still held)."""
    first, second = deployment.seeded.live[:2]
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)  # their ADDs are older than the margin
    stack = ExitStack()
    history = deployment.paths.history_db
    held: list[Any] = []
    judged: list[Any] = []
    temporary_capture, judge_capture = check.capture.temporary_capture, check.judge_capture

    def first_delete_in_flight(*args: Any, **kwargs: Any) -> Any:
        if not held:
            held.append(stack.enter_context(delete_in_flight(deployment.memory, history, first)))
        return temporary_capture(*args, **kwargs)

    def next_delete_after_each_capture(*args: Any, **kwargs: Any) -> Any:
        report = judge_capture(*args, **kwargs)
        judged.append(report)
        held[-1]()  # the delete this capture caught lands
        if len(judged) == 1:  # and the next one is caught in flight by the re-capture
            held.append(stack.enter_context(delete_in_flight(deployment.memory, history, second)))
        return report

    monkeypatch.setattr(check.capture, "temporary_capture", first_delete_in_flight)
    monkeypatch.setattr(check, "judge_capture", next_delete_after_each_capture)
    return [first, second], stack


def test_check_during_a_run_of_deletes_reports_no_missing_point(
    deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    victims, stack = _deletes_one_after_the_other(deployment, monkeypatch)
    with stack:
        result = cli("check", "--json", config=deployment.config)
    monkeypatch.undo()
    after = cli("check", "--json", config=deployment.config)
    assert after.code == 0 and error_findings(after.json()) == {}  # both deletes landed: clean
    assert error_findings(result.json()) == {}, result.out
    assert result.code == 0


def test_doctor_during_a_run_of_deletes_reports_no_missing_point(
    deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    victims, stack = _deletes_one_after_the_other(deployment, monkeypatch)
    with stack:
        result = cli("doctor", "--json", config=deployment.config)
    monkeypatch.undo()
    assert "missing-point" not in result.out, result.out
    assert result.code == 0, result.out
