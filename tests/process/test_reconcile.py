"""reconcile on real damaged deployments: a clean check after, the right memories present or absent."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from memsync.demo import deployment as build
from memsync.deployment import Deployment
from tests.conftest import error_findings, findings_of
from tests.helpers.holders import app_holding

ROOT = Path(__file__).resolve().parents[2]


def reconcile(cli, deployment, *extra):
    deployment.close()
    result = cli("reconcile", "--json", *extra, config=deployment.config)
    return result.code, (result.json() if result.out else json.loads(result.err))


def clean(cli, deployment):
    report = cli("check", "--json", config=deployment.config).json()
    assert report["counts"]["errors"] == 0, error_findings(report)
    return report


def live_texts(deployment) -> dict[str, str]:
    memory = deployment.reopen()
    try:
        points, _ = memory.vector_store.client.scroll("mem0", limit=100_000)
        return {str(p.id): p.payload.get("data") for p in points}
    finally:
        deployment.close()


def test_resurrected_points_are_deleted_through_mem0_and_stay_deleted(deployment, cli, tmp_path):
    deployment.close()
    older = build.copy_qdrant(deployment.paths, tmp_path / "older")
    memory = deployment.reopen()
    deleted = deployment.seeded.live[:3]
    for memory_id in deleted:
        memory.delete(memory_id)
    deployment.close()
    build.put_back_qdrant(deployment.paths, older)
    code, outcome = reconcile(cli, deployment)
    assert code == 0, outcome
    assert {a["kind"] for a in outcome["actions"]} == {"delete-point"}
    assert outcome["safety_snapshot"] is not None
    clean(cli, deployment)
    texts = live_texts(deployment)
    assert not set(deleted) & set(texts)
    memory = deployment.reopen()
    listed = memory.get_all(filters={"user_id": "alice"}, top_k=1000)["results"]
    assert not {m["id"] for m in listed} & set(deleted)


def test_missing_point_comes_back_from_the_newest_snapshot_with_its_vector(deployment, cli):
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code == 0
    memory = deployment.reopen()
    victim = deployment.seeded.live[0]
    before = memory.vector_store.client.retrieve("mem0", [victim], with_vectors=True)[0]
    build.delete_with_failing_history(memory, deployment.paths, victim)
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, outcome
    assert [a["kind"] for a in outcome["actions"]] == ["restore-point"]
    clean(cli, deployment)
    memory = deployment.reopen()
    after = memory.vector_store.client.retrieve("mem0", [victim], with_vectors=True)[0]
    assert after.payload == before.payload and after.vector == before.vector


def test_missing_point_without_a_snapshot_is_reported_not_invented(deployment, cli):
    victim = build.delete_with_failing_history(
        deployment.memory, deployment.paths, deployment.seeded.live[0]
    )
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 4 and [a["status"] for a in outcome["actions"]] == ["unrecoverable"]
    assert error_findings(cli("check", "--json", config=deployment.config).json()) == {
        "missing-point": {victim}
    }
    code, outcome = reconcile(cli, deployment, "--no-snapshot", "--record-lost")
    assert code == 0 and [a["kind"] for a in outcome["actions"]] == ["record-event"]
    clean(cli, deployment)


def test_orphan_point_is_kept_and_its_add_recorded(deployment, cli):
    orphan = build.add_with_failing_history(
        deployment.memory, deployment.paths, "plays the oboe", "bob"
    )
    code, outcome = reconcile(cli, deployment)
    assert code == 0 and [a["kind"] for a in outcome["actions"]] == ["record-event"]
    clean(cli, deployment)
    assert live_texts(deployment)[orphan] == "plays the oboe"
    memory = deployment.reopen()
    events = memory.history(orphan)
    assert events[-1]["event"] == "ADD" and events[-1]["actor_id"] == "memsync"


def test_text_mismatch_newer_point_wins_and_its_update_is_recorded(deployment, cli):
    target = deployment.seeded.live[1]
    build.update_with_failing_history(
        deployment.memory, deployment.paths, target, "moved to Tromsø"
    )
    code, outcome = reconcile(cli, deployment)
    assert code == 0 and [a["kind"] for a in outcome["actions"]] == ["record-event"]
    clean(cli, deployment)
    assert live_texts(deployment)[target] == "moved to Tromsø"


def test_text_mismatch_newer_history_wins_and_the_point_is_updated_through_mem0(
    deployment, cli, tmp_path
):
    deployment.close()
    older = build.copy_qdrant(deployment.paths, tmp_path / "older")
    memory = deployment.reopen()
    target = deployment.seeded.live[2]
    memory.update(target, "now drinks rooibos")
    deployment.close()
    build.put_back_qdrant(deployment.paths, older)
    code, outcome = reconcile(cli, deployment)
    assert code == 0 and [a["kind"] for a in outcome["actions"]] == ["update-point"]
    clean(cli, deployment)
    assert live_texts(deployment)[target] == "now drinks rooibos"


def test_hash_and_payload_damage_are_rewritten_through_mem0(deployment, cli):
    client = deployment.memory.vector_store.client
    hashed, emptied = deployment.seeded.live[3], deployment.seeded.live[4]
    expected = deployment.memory.get(emptied)["memory"]
    client.set_payload("mem0", payload={"hash": "0" * 32}, points=[hashed])
    client.overwrite_payload("mem0", payload={"user_id": "alice"}, points=[emptied])
    code, outcome = reconcile(cli, deployment)
    assert code == 0, outcome
    clean(cli, deployment)
    assert live_texts(deployment)[emptied] == expected


def test_dangling_entity_links_are_dropped(deployment, cli):
    kept, gone = deployment.seeded.live[5], deployment.seeded.live[6]
    store = deployment.memory.entity_store
    store.insert(
        vectors=[[0.1] * 384, [0.2] * 384],
        ids=["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"],
        payloads=[
            {"data": "Oslo", "linked_memory_ids": [kept, gone]},
            {"data": "Bergen", "linked_memory_ids": [gone]},
        ],
    )
    memory = deployment.reopen()
    memory.delete(gone)  # a fresh process: mem0 skips the entity cleanup
    assert findings_of(cli("check", "--json", config=deployment.config).json(), "warning")[
        "dangling-entity-link"
    ]
    code, outcome = reconcile(cli, deployment)
    assert code == 0, outcome
    report = cli("check", "--json", config=deployment.config).json()
    assert "dangling-entity-link" not in findings_of(report, "warning")
    memory = deployment.reopen()
    assert memory.entity_store.get(vector_id="00000000-0000-4000-8000-000000000002") is None
    remaining = memory.entity_store.get(vector_id="00000000-0000-4000-8000-000000000001")
    assert remaining.payload["linked_memory_ids"] == [kept]


def test_policy_codes_only_with_only(deployment, cli):
    first = deployment.memory.add("owns a kayak", user_id="eve", infer=False)["results"][0]["id"]
    second = deployment.memory.add("owns a kayak", user_id="eve", infer=False)["results"][0]["id"]
    code, outcome = reconcile(cli, deployment, "--dry-run")
    assert code == 0 and outcome["actions"] == []  # warnings are policy: nothing by default
    code, outcome = reconcile(
        cli, deployment, "--only", "duplicate-memory,expired-memory,orphan-messages"
    )
    assert code == 0, outcome
    texts = live_texts(deployment)
    assert first in texts and second not in texts
    assert set(deployment.seeded.expired).isdisjoint(texts)
    report = cli("check", "--json", config=deployment.config).json()
    assert not {"duplicate-memory", "expired-memory", "orphan-messages"} & set(
        findings_of(report, "warning")
    )


def test_second_reconcile_does_nothing(deployment, cli):
    build.add_with_failing_history(deployment.memory, deployment.paths, "likes jazz", "bob")
    assert reconcile(cli, deployment)[0] == 0
    code, outcome = reconcile(cli, deployment)
    assert code == 0 and outcome["actions"] == [] and outcome["counts"]["done"] == 0


def test_dry_run_exits_3_with_work_and_changes_nothing(deployment, cli):
    from tests.process.test_cli import fingerprint

    build.delete_history_rows(deployment.paths, deployment.seeded.live[0])
    deployment.close()
    before = fingerprint(deployment.paths.root)
    result = cli("reconcile", "--dry-run", config=deployment.config)
    assert result.code == 3 and "record-event" in result.out
    assert fingerprint(deployment.paths.root) == before


def test_reconcile_refuses_while_the_app_holds_the_store(deployment, cli):
    build.delete_history_rows(deployment.paths, deployment.seeded.live[0])
    deployment.close()
    with app_holding(deployment.paths.qdrant) as app:
        result = cli("reconcile", "--json", config=deployment.config)
    assert result.code == 12 and f"pid {app.pid}" in json.loads(result.err)["message"]


def test_older_history_over_newer_vectors_never_brings_deleted_memories_back(
    deployment, cli, tmp_path
):
    deployment.close()
    old_history = tmp_path / "history-old.db"
    old_history.write_bytes(deployment.paths.history_db.read_bytes())
    memory = deployment.reopen()
    gone = deployment.seeded.live[:2]
    for memory_id in gone:
        memory.delete(memory_id)
    newer = memory.add("started a pottery class", user_id="ana", infer=False)["results"][0]["id"]
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code == 0  # has the deletes too
    deployment.paths.history_db.write_bytes(
        old_history.read_bytes()
    )  # history restored from the old file
    time.sleep(0.1)
    code, outcome = reconcile(cli, deployment)
    assert code in (0, 4), outcome
    texts = live_texts(deployment)
    assert newer in texts and not set(gone) & set(texts)
    memory = deployment.reopen()
    assert all(memory.get(m) is None for m in gone)


def test_sigkill_during_reconcile_resumes_without_repeating(make_deployment, cli):
    deployment = make_deployment(count=60)
    orphans = [
        build.add_with_failing_history(deployment.memory, deployment.paths, f"orphan {i}", "bob")
        for i in range(40)
    ]
    deployment.close()
    journal = deployment.paths.state / "reconcile-journal.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memsync",
            "reconcile",
            "--no-snapshot",
            "--config",
            str(deployment.config),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            text = journal.read_text()
        except FileNotFoundError:
            text = ""
        if '"done"' in text:
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.001)
    process.wait()
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, outcome
    clean(cli, deployment)
    memory = deployment.reopen()
    for orphan in orphans:
        adds = [e for e in memory.history(orphan) if e["event"] == "ADD"]
        assert len(adds) == 1, orphan  # recorded exactly once, never twice


def test_missing_point_comes_back_from_a_remote_snapshot(make_deployment, cli, s3_endpoint, bucket):
    from tests.conftest import s3_section

    deployment = make_deployment(count=20, extra_config=s3_section(s3_endpoint, bucket))
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config).json()
    import shutil

    shutil.rmtree(deployment.paths.root / "snapshots" / made["id"])  # only the bucket has it now
    memory = deployment.reopen()
    victim = build.delete_with_failing_history(memory, deployment.paths, deployment.seeded.live[0])
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, outcome
    assert [a["kind"] for a in outcome["actions"]] == ["restore-point"]
    clean(cli, deployment)
    assert victim in live_texts(deployment)


def test_missing_point_comes_back_from_an_encrypted_snapshot(make_deployment, cli, tmp_path):
    import os

    key = tmp_path / "snapshot.key"
    key.write_text(os.urandom(32).hex())
    deployment = make_deployment(count=10)
    deployment.config.write_text(
        deployment.config.read_text().replace(
            "keep_last = 3", f'keep_last = 3\nencrypt_key_file = "{key}"'
        )
    )
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code == 0
    memory = deployment.reopen()
    victim = build.delete_with_failing_history(memory, deployment.paths, deployment.seeded.live[0])
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, outcome
    clean(cli, deployment)
    assert victim in live_texts(deployment)


def test_a_resumed_plan_never_undoes_what_the_app_did_meanwhile(deployment, cli):
    orphan = build.add_with_failing_history(
        deployment.memory, deployment.paths, "short-lived orphan", "bob"
    )
    deployment.close()
    journal = deployment.paths.state / "reconcile-journal.json"
    from memsync import config as config_module
    from memsync.reconcile import apply as reconcile_module

    loaded = config_module.load(deployment.config, {"HOME": str(deployment.paths.root)})
    from datetime import UTC, datetime

    from memsync import check

    inventory, report = check.settled_inventory(Deployment.open(loaded), datetime.now(UTC))
    actions = reconcile_module.plan_reconcile(
        report.findings,
        inventory,
        {},
        only=None,
        record_lost=False,
        now=datetime.now(UTC),
        new_id=lambda: "memsync-fixed-id",
    )
    reconcile_module.save_journal(loaded, "died-here", actions, "running")  # as a SIGKILL leaves it
    assert journal.exists()
    memory = deployment.reopen()
    memory.delete(orphan)  # the app deleted the memory before anyone resumed
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, outcome
    assert outcome["resumed"] is True and [a["status"] for a in outcome["actions"]] == [
        "superseded"
    ]
    clean(cli, deployment)
    memory = deployment.reopen()
    assert memory.get(orphan) is None
    assert [e["event"] for e in memory.history(orphan)] == ["DELETE"]


def test_reconcile_refuses_while_another_memsync_operation_runs(deployment, cli):
    import fcntl

    build.delete_history_rows(deployment.paths, deployment.seeded.live[0])
    deployment.close()
    deployment.paths.state.mkdir(parents=True, exist_ok=True)
    with (deployment.paths.state / "operation.lock").open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write("pid 4242 (memsync restore)\n")
        handle.flush()
        result = cli("reconcile", "--json", config=deployment.config)
    assert result.code == 12 and "4242" in json.loads(result.err)["message"]


def test_history_missing_records_the_add_of_every_point(deployment, cli):
    deployment.close()
    deployment.paths.history_db.unlink()
    code, outcome = reconcile(cli, deployment, "--no-snapshot", "--create-history")
    assert code == 0, outcome
    assert {a["kind"] for a in outcome["actions"]} == {"record-event"}
    assert len(outcome["actions"]) == len(deployment.seeded.live)
    clean(cli, deployment)


def test_collection_missing_is_reported_unrecoverable_with_restore_as_the_way(deployment, cli):
    deployment.close()
    import shutil

    shutil.rmtree(deployment.paths.qdrant)
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 4
    assert [(a["code"], a["status"]) for a in outcome["actions"]] == [
        ("collection-missing", "unrecoverable")
    ]
    assert "restore" in outcome["actions"][0]["why"]


def test_a_point_with_a_wrong_size_vector_is_unrecoverable_by_reconcile(deployment, cli):
    import pickle
    import sqlite3

    from qdrant_client.http import models

    deployment.close()
    target = deployment.seeded.live[0]
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    with sqlite3.connect(storage) as connection:
        for rowid, blob in connection.execute("SELECT rowid, point FROM points").fetchall():
            point = pickle.loads(blob)
            if str(point.id) == target:
                short = models.PointStruct(
                    id=point.id, vector={"": [0.1] * 5}, payload=point.payload
                )
                connection.execute(
                    "UPDATE points SET point = ? WHERE rowid = ?", (pickle.dumps(short), rowid)
                )
    assert error_findings(cli("check", "--json", config=deployment.config).json()) == {
        "dimension-mismatch": {target}
    }
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 4, outcome
    assert [(a["kind"], a["status"]) for a in outcome["actions"]] == [("report", "unrecoverable")]
    assert "restore" in outcome["actions"][0]["why"]


def test_a_forget_that_died_is_closed_by_reconcile_never_restored(deployment, cli):
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code == 0  # holds the memory
    memory = deployment.reopen()
    victim = deployment.seeded.live[0]
    from memsync.state import write_json_atomic

    deployment.paths.state.mkdir(parents=True, exist_ok=True)
    write_json_atomic(deployment.paths.state / "forget-journal.json", {"memory_ids": [victim]})
    build.delete_with_failing_history(
        memory, deployment.paths, victim
    )  # killed between the two writes
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, outcome
    assert [a["kind"] for a in outcome["actions"]] == ["record-event"]
    clean(cli, deployment)
    assert victim not in live_texts(deployment)


def test_a_journal_from_0_1_naming_the_storage_file_still_puts_the_point_back(deployment, cli):
    from datetime import UTC, datetime

    from memsync import check
    from memsync import config as config_module
    from memsync.model import Recovery
    from memsync.reconcile import apply as reconcile_module

    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config).json()
    memory = deployment.reopen()
    victim = deployment.seeded.live[0]
    before = memory.vector_store.client.retrieve("mem0", [victim], with_vectors=True)[0]
    build.delete_with_failing_history(memory, deployment.paths, victim)
    deployment.close()
    loaded = config_module.load(deployment.config, {"HOME": str(deployment.paths.root)})
    inventory, report = check.settled_inventory(Deployment.open(loaded), datetime.now(UTC))
    old_storage = Path(made["path"]) / "qdrant/collection/mem0/storage.sqlite"  # what 0.1 journaled
    actions = reconcile_module.plan_reconcile(
        report.findings,
        inventory,
        {victim: Recovery(snapshot_id=made["id"], storage=old_storage)},
        only=None,
        record_lost=False,
        now=datetime.now(UTC),
        new_id=lambda: "memsync-fixed-id",
    )
    assert [(a.kind, a.params["storage"]) for a in actions] == [("restore-point", str(old_storage))]
    reconcile_module.save_journal(loaded, "died-here", actions, "running")  # as a SIGKILL leaves it
    code, outcome = reconcile(cli, deployment, "--no-snapshot")
    assert code == 0, outcome
    assert outcome["resumed"] is True and [a["status"] for a in outcome["actions"]] == ["done"]
    clean(cli, deployment)
    memory = deployment.reopen()
    after = memory.vector_store.client.retrieve("mem0", [victim], with_vectors=True)[0]
    assert after.payload == before.payload and after.vector == before.vector
