"""Breaker: the tripwire must not count a real vanish as deleted because the last capture alone saw it.

``snapshot create`` during a ``delete_all(user_id="zed")`` (a delete in flight at each of its 5
captures, as in test_live_snapshot_settle_breaks.py) keeps the last pair with the delete in
flight unsettled: right. Every ``missing-point`` the last capture alone shows is ``in-flight``
and its memory id goes into the manifest's ``check.unsettled``. When bob's memories vanish
without any DELETE event (a ``delete_all`` bug that bypasses history, a vector store wiped:
here the vector store's own delete, history untouched) between the 4th and the 5th capture, the
tripwire counts an unsettled memory as deleted only once the live history holds its DELETE:
bob's loss is a ``vanished-memories`` error. The captures' timing by a seam on create's judge;
mem0's real writes.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from memsync.snapshot import create
from tests.breaker.test_live_snapshot_settle_breaks import _judged_with
from tests.conftest import IN_FLIGHT_MARGIN_S
from tests.helpers.holders import one_delete_in_flight_per_capture


def test_a_vanish_at_the_last_capture_of_a_delete_all_is_no_deletion_through_mem0(
    deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    memory = deployment.memory
    zed = [
        memory.add(f"zed keeps note number {n}", user_id="zed", infer=False)["results"][0]["id"]
        for n in range(60)
    ]
    bob = [
        memory.add(f"bob keeps note number {n}", user_id="bob", infer=False)["results"][0]["id"]
        for n in range(60)
    ]
    assert cli("snapshot", "create", config=deployment.config).code == 0  # the baseline
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)
    last = zed[-create.SETTLE_ATTEMPTS :]
    for memory_id in zed[: -len(last)]:  # delete_all(user_id="zed"): these landed
        memory.delete(memory_id)
    history = deployment.paths.history_db
    with ExitStack() as stack:

        def bob_vanishes(n: int) -> None:
            if n == len(last) - 1:  # bob's points vanish, no DELETE event ever written
                for memory_id in bob:
                    memory.vector_store.delete(vector_id=memory_id)

        next_delete = one_delete_in_flight_per_capture(
            stack, memory, history, last, last_lands=False, also=bob_vanishes
        )
        _judged_with(monkeypatch, next_delete)
        created = cli("snapshot", "create", "--json", config=deployment.config)
    monkeypatch.undo()
    after = cli("check", "--json", config=deployment.config)
    missing = {f["memory_id"] for f in after.json()["findings"] if f["code"] == "missing-point"}
    assert missing == set(bob)  # the damage is real: check names every one of bob's memories
    assert set(bob) <= set(created.json()["check"]["unsettled"])  # create called them in flight
    assert '"vanished-memories"' in created.out, created.out[-3000:]
