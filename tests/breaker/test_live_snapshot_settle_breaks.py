"""``snapshot create`` while the app deletes: no pair kept unclean for deletes in flight.

A delete in flight looks like a ``missing-point`` (mem0 removes the point, then writes the
DELETE event). create captures again once the in-flight margin has passed since its last
capture (``check.wait_out_the_margin``), so a delete whose DELETE event waits on history.db's
lock for less than the margin has landed by then; a ``missing-point`` a capture alone shows (a
``delete_all`` whose next delete is in flight at each capture) is ``in-flight``, the pair kept
as unsettled, never an error; and the tripwire counts such a delete as deleted, not vanished.
The app is held between its two writes by a lock on history.db (``holders.delete_in_flight``),
the captures' timing by seams on create's judge and on check's wait.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

import pytest

from memsync import check
from memsync.snapshot import create
from tests.conftest import IN_FLIGHT_MARGIN_S, error_findings
from tests.helpers.holders import (
    delete_in_flight,
    deployment_in_mode,
    one_delete_in_flight_per_capture,
)


@pytest.fixture
def any_deployment(request: Any, make_deployment: Any) -> Any:
    """The seeded deployment on each vector store, its SQLite files in each journal mode."""
    return deployment_in_mode(make_deployment, request.param)


def _judged_with(monkeypatch: Any, after_each: Any) -> list[Any]:
    judged: list[Any] = []
    judge_copy = create.judge_copy

    def seam(*args: Any, **kwargs: Any) -> Any:  # the captures' timing, nothing faked
        judgement = judge_copy(*args, **kwargs)
        judged.append(judgement)
        after_each(len(judged))
        return judgement

    monkeypatch.setattr(create, "judge_copy", seam)
    return judged


def _lands_while_create_waits(monkeypatch: Any, land: Any, held_s: float) -> list[float]:
    """The delete lands ``held_s`` into create's wait (if it waits that long): a delete whose
    DELETE event waited that long on history.db's lock. Returns the waits."""
    waits: list[float] = []
    wait_out_the_margin = check.wait_out_the_margin

    def seam(window: Any) -> None:
        started = time.monotonic()
        wait_out_the_margin(window)
        waits.append(time.monotonic() - started)
        if waits[-1] >= held_s:
            land()

    monkeypatch.setattr(check, "wait_out_the_margin", seam)
    return waits


def _create_and_verify(deployment: Any, cli: Any) -> tuple[Any, Any]:
    created = cli("snapshot", "create", "--json", config=deployment.config)
    verified = cli("snapshot", "verify", created.json()["id"], "--json", config=deployment.config)
    return created, verified


@pytest.mark.parametrize(
    "any_deployment",
    ["embedded-rollback", "embedded-wal", "pgvector-rollback", "pgvector-wal"],
    indirect=True,
)
def test_a_delete_in_flight_for_two_captures_is_no_unclean_snapshot(
    any_deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    deployment = any_deployment
    victim = deployment.seeded.live[0]
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)  # its ADD is older than the margin
    with ExitStack() as stack:
        land = stack.enter_context(
            delete_in_flight(deployment.memory, deployment.paths.history_db, victim)
        )
        judged = _judged_with(monkeypatch, lambda n: None)
        waits = _lands_while_create_waits(monkeypatch, land, IN_FLIGHT_MARGIN_S - 0.1)
        created, verified = _create_and_verify(deployment, cli)
    monkeypatch.undo()
    assert len(judged) == 2  # the missing point made create capture again
    assert waits and waits[0] >= IN_FLIGHT_MARGIN_S - 0.1, waits  # the margin, waited out
    after = cli("check", "--json", config=deployment.config)
    assert after.code == 0 and error_findings(after.json()) == {}  # the delete landed: clean
    assert '"missing-point"' not in created.out, created.out
    assert '"restore-unclean"' not in verified.out, verified.out
    assert verified.code == 0, verified.out


def test_a_run_of_deletes_in_flight_at_every_capture_is_kept_unsettled_not_in_error(
    deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    victims = deployment.seeded.live[:6]
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)  # their ADDs are older than the margin
    history = deployment.paths.history_db
    with ExitStack() as stack:  # as delete_all goes on: this one lands, the next flies
        next_delete = one_delete_in_flight_per_capture(
            stack, deployment.memory, history, victims[: create.SETTLE_ATTEMPTS], last_lands=True
        )
        judged = _judged_with(monkeypatch, next_delete)
        created, verified = _create_and_verify(deployment, cli)
    monkeypatch.undo()
    assert len(judged) == create.SETTLE_ATTEMPTS
    after = cli("check", "--json", config=deployment.config)
    assert after.code == 0 and error_findings(after.json()) == {}  # every delete landed: clean
    assert created.code == 0 and '"missing-point"' not in created.out, created.out
    # the pair kept is split by the last capture's delete in flight: said, not an error
    assert created.json()["check"]["unsettled"] == [victims[create.SETTLE_ATTEMPTS - 1]]
    assert '"restore-unclean"' in verified.out, verified.out


def test_a_delete_all_with_its_last_delete_in_flight_vanishes_no_memory(
    deployment: Any, cli: Any, monkeypatch: Any
) -> None:
    memory = deployment.memory
    added = [
        memory.add(f"zed keeps note number {n}", user_id="zed", infer=False)["results"][0]["id"]
        for n in range(60)
    ]
    assert cli("snapshot", "create", config=deployment.config).code == 0  # the baseline
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)
    last = added[-create.SETTLE_ATTEMPTS :]
    for memory_id in added[: -len(last)]:  # delete_all(user_id="zed"), one by one: these landed
        memory.delete(memory_id)
    history = deployment.paths.history_db
    with ExitStack() as stack:  # the rest: one in flight at each capture, the last one too
        # the delete each capture caught lands (the last before the tripwire looks)
        next_delete = one_delete_in_flight_per_capture(
            stack, memory, history, last, last_lands=True
        )
        _judged_with(monkeypatch, next_delete)
        created = cli("snapshot", "create", "--json", config=deployment.config)
    monkeypatch.undo()
    after = cli("check", "--json", config=deployment.config)
    assert after.code == 0 and error_findings(after.json()) == {}  # every delete landed: clean
    assert created.json()["check"]["unsettled"] == [last[-1]]
    assert '"vanished-memories"' not in created.out, created.out[-3000:]
    assert '"mass-deletion"' in created.out, created.out[-3000:]  # deleted through mem0: said
