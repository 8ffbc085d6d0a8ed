"""Every finding code, produced on a real deployment the way the field produces it."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from datetime import UTC, datetime, timedelta

import pytest

from memsync.demo import deployment as build
from memsync.deployment import Deployment
from memsync.stores import journal_mode
from tests.conftest import HASH, IN_FLIGHT_MARGIN_S, error_findings, findings_of
from tests.helpers.holders import delete_in_flight


@pytest.fixture(params=["rollback", "wal"])
def deployment(request, make_deployment):
    """The seeded deployment, in each journal mode: in WAL mode, while this process's mem0 holds
    the files open (each with its ``-shm``), check reads them in place instead of copying them,
    and must find exactly what it finds in a copy."""
    made = make_deployment()
    if request.param == "wal":
        paths = made.paths
        for path in [paths.history_db, *paths.qdrant.glob("collection/*/storage.sqlite")]:
            assert journal_mode.switch(path, journal_mode.WAL) == "wal"
    return made


def test_clean_deployment_has_no_findings_when_nothing_drifted(deployment, cli):
    result = cli("check", "--json", config=deployment.config)
    report = result.json()
    assert result.code == 0, report
    assert report["ok"] is True
    assert error_findings(report) == {}
    assert report["counts"]["points"] == len(deployment.seeded.live)
    assert report["counts"]["history_memories"] == len(deployment.seeded.live) + len(
        deployment.seeded.deleted
    )


def test_missing_point_when_history_write_fails_during_delete(deployment, cli):
    victim = build.delete_with_failing_history(
        deployment.memory, deployment.paths, deployment.seeded.live[0]
    )
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 3
    assert error_findings(result.json()) == {"missing-point": {victim}}


def test_a_delete_in_flight_is_waited_out_not_reported_as_a_missing_point(deployment):
    """mem0 deletes the point, then writes the DELETE event; a capture between the two sees a
    ``missing-point`` dated by the memory's old ADD, outside any window. Check waits the margin
    out and captures once more, and the delete, landed by then, is no finding.
    """
    from memsync import config as memsync_config
    from memsync.check import run_check, settled_report

    victim = deployment.seeded.live[0]
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)  # its ADD is older than the margin: no window explains it
    opened = Deployment.open(memsync_config.load(deployment.config, os.environ))
    captures = []
    with delete_in_flight(deployment.memory, deployment.paths.history_db, victim) as land:
        unsettled = run_check(opened, datetime.now(UTC), settle=False)
        assert _not_warnings(unsettled) == {("missing-point", victim)}

        def land_after_the_first(captured):
            captures.append(captured.root)
            if len(captures) == 1:
                land()

        report, _ = settled_report(opened, datetime.now(UTC), inspect=land_after_the_first)
    assert len(captures) == 2  # the missing point made check capture once more
    assert _not_warnings(report) == set()
    assert report.points == len(deployment.seeded.live) - 1


def test_a_snapshot_taken_during_a_delete_in_flight_captures_again_and_keeps_a_clean_pair(
    deployment, monkeypatch
):
    """``snapshot create`` keeps no pair a delete in flight split (it would restore with a
    ``missing-point`` that reconcile answers by bringing the deleted memory back)."""
    from memsync import config as memsync_config
    from memsync.snapshot import create

    victim = deployment.seeded.live[0]
    time.sleep(IN_FLIGHT_MARGIN_S + 0.1)
    opened = Deployment.open(memsync_config.load(deployment.config, os.environ))
    judged = []
    judge_copy = create.judge_copy

    with delete_in_flight(deployment.memory, deployment.paths.history_db, victim) as land:

        def land_after_the_first(*args, **kwargs):  # a seam: the capture's timing, nothing faked
            judgement = judge_copy(*args, **kwargs)
            judged.append(_not_warnings(judgement.report))
            if len(judged) == 1:
                land()
            return judgement

        monkeypatch.setattr(create, "judge_copy", land_after_the_first)
        created = create.create_snapshot(opened, datetime.now(UTC))
    assert judged == [{("missing-point", victim)}, set()]
    assert create.error_findings(created.manifest.check) == []
    assert created.manifest.check["unsettled"] == []


def _not_warnings(report):
    return {(f.code, f.memory_id) for f in report.findings if f.severity.value != "warning"}


def test_orphan_point_when_history_write_fails_during_add(deployment, cli):
    orphan = build.add_with_failing_history(
        deployment.memory, deployment.paths, "likes rain", "zoe"
    )
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 3
    assert error_findings(result.json()) == {"orphan-point": {orphan}}


def test_text_mismatch_when_history_write_fails_during_update(deployment, cli):
    target = deployment.seeded.live[1]
    build.update_with_failing_history(
        deployment.memory, deployment.paths, target, "now lives in Oslo"
    )
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 3
    assert error_findings(result.json()) == {"text-mismatch": {target}}


def test_orphan_point_when_history_rows_deleted_by_hand(deployment, cli):
    target = deployment.seeded.live[2]
    assert build.delete_history_rows(deployment.paths, target) >= 1
    result = cli("check", "--json", config=deployment.config)
    assert error_findings(result.json()) == {"orphan-point": {target}}


def test_resurrected_missing_and_mismatch_when_older_qdrant_copy_is_put_back(
    deployment, cli, tmp_path
):
    deployment.close()
    older = build.copy_qdrant(deployment.paths, tmp_path / "older-qdrant")
    memory = deployment.reopen()
    deleted = deployment.seeded.live[:2]
    for memory_id in deleted:
        memory.delete(memory_id)
    updated = deployment.seeded.live[2]
    memory.update(updated, "changed after the copy")
    added = memory.add("added after the copy", user_id="alice", infer=False)["results"][0]["id"]
    deployment.close()
    build.put_back_qdrant(deployment.paths, older)
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 3
    assert error_findings(result.json()) == {
        "resurrected-point": set(deleted),
        "missing-point": {added},
        "text-mismatch": {updated},
    }


def test_collection_missing_when_qdrant_directory_is_wiped(deployment, cli):
    deployment.close()
    build.wipe_qdrant(deployment.paths)
    result = cli("check", "--json", config=deployment.config)
    report = result.json()
    assert result.code == 3
    assert error_findings(report) == {"collection-missing": {"mem0"}}
    assert report["counts"]["points"] == 0


def test_history_missing_when_history_db_is_lost(deployment, cli):
    deployment.close()
    deployment.paths.history_db.unlink()
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 3
    assert error_findings(result.json()) == {"history-missing": {"mem0"}}


def test_history_missing_when_history_table_is_dropped(deployment, cli):
    deployment.close()
    with sqlite3.connect(deployment.paths.history_db) as connection:
        connection.execute("DROP TABLE history")
    result = cli("check", "--json", config=deployment.config)
    assert error_findings(result.json()) == {"history-missing": {"mem0"}}


def test_dimension_mismatch_when_config_dims_differ_from_the_collection(deployment, cli):
    deployment.close()
    # The app is reconfigured for a 1536-dimension embedder; mem0 accepts the old
    # 384-dimension collection at start (mem0ai 2.2.1) and fails on the first insert.
    build.write_memsync_config(deployment.paths, embedder=HASH, dims=1536)
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 3
    assert error_findings(result.json()) == {"dimension-mismatch": {"mem0"}}


def test_hash_mismatch_when_payload_text_is_edited_outside_mem0(deployment, cli):
    target = deployment.seeded.live[3]
    client = deployment.memory.vector_store.client
    client.set_payload("mem0", payload={"data": "edited in the Qdrant console"}, points=[target])
    result = cli("check", "--json", config=deployment.config)
    found = error_findings(result.json())
    assert found["hash-mismatch"] == {target}
    assert found["text-mismatch"] == {target}


def test_missing_payload_when_a_script_overwrites_the_payload(deployment, cli):
    target = deployment.seeded.live[4]
    client = deployment.memory.vector_store.client
    client.overwrite_payload("mem0", payload={"user_id": "alice"}, points=[target])
    result = cli("check", "--json", config=deployment.config)
    assert error_findings(result.json()) == {"missing-payload": {target}}


def test_dangling_entity_link_when_a_fresh_process_deletes_a_linked_memory(deployment, cli):
    target = deployment.seeded.live[5]
    entity_id = "00000000-0000-4000-8000-000000000001"
    deployment.memory.entity_store.insert(
        vectors=[[0.1] * 384],
        ids=[entity_id],
        payloads=[
            {
                "data": "Lisbon",
                "entity_type": "GPE",
                "linked_memory_ids": [target],
                "user_id": "alice",
            }
        ],
    )
    # A maintenance process that never touched entity_store: mem0 skips entity cleanup.
    memory = deployment.reopen()
    memory.delete(target)
    result = cli("check", "--json", config=deployment.config)
    report = result.json()
    assert result.code == 0
    assert findings_of(report, "warning")["dangling-entity-link"] == {target}


def test_expired_memory_when_expiration_date_has_passed(deployment, cli):
    past = (datetime.now(UTC).date() - timedelta(days=3)).isoformat()
    added = deployment.memory.add(
        "temporary door code 4711", user_id="bob", infer=False, expiration_date=past
    )["results"][0]["id"]
    report = cli("check", "--json", config=deployment.config).json()
    assert added in findings_of(report, "warning")["expired-memory"]


def test_duplicate_memory_when_same_text_is_added_twice_in_one_scope(deployment, cli):
    first = deployment.memory.add("owns a red bicycle", user_id="carol", infer=False)["results"][0][
        "id"
    ]
    second = deployment.memory.add("owns a red bicycle", user_id="carol", infer=False)["results"][
        0
    ]["id"]
    other_scope = deployment.memory.add("owns a red bicycle", user_id="dan", infer=False)[
        "results"
    ][0]["id"]
    report = cli("check", "--json", config=deployment.config).json()
    duplicates = findings_of(report, "warning")["duplicate-memory"]
    assert duplicates == {second}
    assert first not in duplicates and other_scope not in duplicates


def test_orphan_messages_when_every_memory_of_a_scope_is_deleted(deployment, cli):
    result = deployment.memory.add(
        [{"role": "user", "content": "my locker is 42"}],
        user_id="frank",
        agent_id="gym-bot",
        infer=True,
    )
    for item in result["results"]:
        deployment.memory.delete(item["id"])
    report = cli("check", "--json", config=deployment.config).json()
    orphans = [f for f in report["findings"] if f["code"] == "orphan-messages"]
    assert len(orphans) == 1
    assert "agent_id=gym-bot&user_id=frank" in orphans[0]["message"]


def test_no_error_findings_on_tricky_but_healthy_deployments(make_deployment, cli):
    deployment = make_deployment(count=10)
    memory = deployment.memory
    future = (datetime.now(UTC).date() + timedelta(days=30)).isoformat()
    churned = memory.add("first draft", user_id="ana", infer=False)["results"][0]["id"]
    for round_number in range(25):
        memory.update(churned, f"draft number {round_number}")
    gone = memory.add("deleted then re-added", user_id="ana", infer=False)["results"][0]["id"]
    memory.delete(gone)
    back = memory.add("deleted then re-added", user_id="ana", infer=False)["results"][0]["id"]
    unicode_id = memory.add(
        "Zoë mag 寿司 und Crème brûlée 🍣 — «très» bien", user_id="zoë", infer=False
    )["results"][0]["id"]
    big_id = memory.add("long note " + "x" * 10_240, user_id="ana", infer=False)["results"][0]["id"]
    later = memory.add("dentist next month", user_id="ana", infer=False, expiration_date=future)[
        "results"
    ][0]["id"]
    result = cli("check", "--json", config=deployment.config)
    report = result.json()
    assert result.code == 0, error_findings(report)
    assert report["counts"]["errors"] == 0 and report["counts"]["infos"] == 0
    ids = {churned, back, unicode_id, big_id, later}
    assert not [f for f in report["findings"] if f["memory_id"] in ids]
    assert gone != back


def test_empty_store_is_clean(make_deployment, cli):
    deployment = make_deployment(count=0)
    report = cli("check", "--json", config=deployment.config).json()
    assert report["ok"] is True and report["findings"] == []
    assert report["counts"]["points"] == 0 and report["counts"]["history_memories"] == 0


def test_history_db_without_points_is_clean_when_every_memory_was_deleted(make_deployment, cli):
    deployment = make_deployment(count=0)
    added = deployment.memory.add("short-lived", user_id="ana", infer=False)["results"][0]["id"]
    deployment.memory.delete(added)
    deployment.close()
    shutil.rmtree(deployment.paths.qdrant)  # nothing live: a missing store is no finding
    result = cli("check", "--json", config=deployment.config)
    assert result.code == 0 and result.json()["findings"] == []


def test_the_default_in_flight_margin_is_two_seconds_and_the_setting_moves_it(make_deployment, cli):
    """A failure one second old is in flight under the default margin and an error under 0.5 s.

    The fixtures' deployments use ``[check] in_flight_margin_s = 0.5`` so that their checks
    wait less; this test holds the production value (2 s) and the seam itself.
    """
    from memsync import config as memsync_config
    from memsync.check import run_check

    default = make_deployment(count=5, name="default", in_flight_margin_s=None)
    short = make_deployment(count=5, name="short", in_flight_margin_s=0.5)
    assert "[check]" not in default.config.read_text()
    orphans = {}
    for each in (default, short):
        orphans[each.paths.root.name] = build.add_with_failing_history(
            each.memory, each.paths, "likes rain", "zoe"
        )
    start = datetime.now(UTC)
    while datetime.now(UTC) - start < timedelta(seconds=1):
        pass  # the failures are now one second old (a busy wait: the clock is the subject)
    loaded = memsync_config.load(default.config, os.environ)
    assert loaded.check.in_flight_margin_s == 2.0
    first = run_check(Deployment.open(loaded), datetime.now(UTC), settle=False)
    assert {(f.code, f.memory_id) for f in first.findings if f.severity.value != "warning"} == {
        ("in-flight", orphans["default"])
    }
    result = cli("check", "--json", config=default.config)  # waits the margin out, then errors
    assert result.code == 3 and error_findings(result.json()) == {
        "orphan-point": {orphans["default"]}
    }
    quick = run_check(
        Deployment.open(memsync_config.load(short.config, os.environ)),
        datetime.now(UTC),
        settle=False,
    )
    assert {(f.code, f.memory_id) for f in quick.findings if f.severity.value != "warning"} == {
        ("orphan-point", orphans["short"])
    }
