"""Breaker: reconcile brings back a memory the app deleted through mem0 (pgvector, direct route).

A delete whose DELETE event waits on history.db's lock longer than the in-flight margin
(2 s by default; mem0's own busy timeout is 5 s, so the delete still lands) is seen by both of
check's captures, a margin apart: ``check.seen_twice`` calls it a real ``missing-point``, and
reconcile plans to put the point back from a snapshot. The delete lands right after the check
(here: as soon as reconcile's check returns). On pgvector the route is ``direct`` while the app
runs (the server lets both write), so ``_apply_on_route`` revalidates the plan there too: the
delete has landed, the put-back is superseded, and the memory the app deleted stays deleted. Deterministic: the delete held by a lock on history.db
(``holders.delete_in_flight``), landed by a seam on reconcile's own check.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from memsync import check
from memsync.demo import deployment as build
from tests.conftest import IN_FLIGHT_MARGIN_S
from tests.helpers.holders import delete_in_flight


def test_reconcile_does_not_put_back_a_memory_whose_delete_landed_after_its_check(
    pg_deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    deployment = pg_deployment
    victim = deployment.seeded.live[0]
    assert cli("snapshot", "create", config=deployment.config).code == 0  # it holds the victim
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)  # the victim's ADD is older than the margin
    history = deployment.paths.history_db
    with ExitStack() as stack:
        land = stack.enter_context(delete_in_flight(deployment.memory, history, victim))
        settled_named = check.settled_named

        def seam(*args: Any, **kwargs: Any) -> Any:  # the delete lands once the check is done
            found = settled_named(*args, **kwargs)
            land()
            return found

        monkeypatch.setattr(check, "settled_named", seam)
        done = cli("reconcile", "--json", config=deployment.config)
    monkeypatch.undo()
    assert done.json()["route"] == "direct", done.out + done.err
    after = cli("check", "--json", config=deployment.config)
    resurrected = [
        f["memory_id"] for f in after.json()["findings"] if f["code"] == "resurrected-point"
    ]
    assert victim not in build.point_ids(deployment.reopen()), (resurrected, done.out[-2000:])
    assert resurrected == []
