"""``memory.reset()`` in flight while check captures.

mem0's ``reset`` drops history's tables (a new, empty ``history`` at once), then resets the
vector store. A capture between the two sees every point without a history row: one
``orphan-point`` per memory, each dated by its old stamps, so none is in flight by the window.
check captures again once the margin has passed (it does for any pair disagreement), and the
reset, complete by then, leaves both stores empty and clean: no error, exit 0. The app's reset
is held between its two writes by a seam on mem0's vector-store reset; check's re-capture
timing by a seam on its judge (the reset goes on once the first capture is judged).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from mem0.utils.factory import VectorStoreFactory

from memsync import check
from tests.conftest import IN_FLIGHT_MARGIN_S, error_findings


def test_check_during_a_reset_in_flight_reports_no_orphan_points(
    deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)  # the memories are older than the margin
    history_dropped, go_on = threading.Event(), threading.Event()
    reset_vectors = VectorStoreFactory.reset.__func__  # type: ignore[attr-defined]

    def held_between_the_two_writes(cls: Any, instance: Any) -> Any:
        history_dropped.set()
        assert go_on.wait(30)
        return reset_vectors(cls, instance)

    monkeypatch.setattr(VectorStoreFactory, "reset", classmethod(held_between_the_two_writes))
    resetting = threading.Thread(target=deployment.memory.reset)
    resetting.start()
    judge_capture = check.judge_capture

    def reset_goes_on_after_the_first_capture(*args: Any, **kwargs: Any) -> Any:
        report = judge_capture(*args, **kwargs)
        go_on.set()
        resetting.join(30)
        return report

    try:
        assert history_dropped.wait(30)
        monkeypatch.setattr(check, "judge_capture", reset_goes_on_after_the_first_capture)
        result = cli("check", "--json", config=deployment.config)
    finally:
        go_on.set()
        resetting.join(30)
    monkeypatch.undo()
    assert not resetting.is_alive()
    after = cli("check", "--json", config=deployment.config)
    assert after.code == 0 and error_findings(after.json()) == {}, after.out  # reset: clean
    assert after.json()["counts"]["points"] == 0
    assert error_findings(result.json()) == {}, result.out[:2000]
    assert result.code == 0
