"""recover: deleted memories of one scope back from a snapshot, through mem0, and nothing else."""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import s3_section
from tests.helpers.holders import app_holding
from tests.process.test_cli import fingerprint, run_memsync


def stored(deployment) -> dict[str, tuple[dict[str, Any], list[float]]]:
    """Every live point of the memory collection: payload and vector, read through mem0's client."""
    memory = deployment.reopen()
    try:
        listed, _ = memory.vector_store.client.scroll("mem0", limit=100_000, with_vectors=True)
        return {str(p.id): (dict(p.payload), list(p.vector)) for p in listed}
    finally:
        deployment.close()


def verified_snapshot(cli, deployment, *flags: str) -> str:
    deployment.close()
    made = cli("snapshot", "create", "--json", *flags, config=deployment.config)
    assert made.code == 0, made.err
    snapshot_id = made.json()["id"]
    verified = cli("snapshot", "verify", snapshot_id, config=deployment.config)
    assert verified.code == 0, verified.err
    return snapshot_id


def busiest_user(points: dict[str, tuple[dict[str, Any], list[float]]]) -> str:
    return Counter(payload["user_id"] for payload, _ in points.values()).most_common(1)[0][0]


def history_rows(deployment, memory_id: str) -> list[tuple[str, str | None, str | None]]:
    with sqlite3.connect(deployment.paths.history_db) as connection:
        return connection.execute(
            "SELECT event, actor_id, role FROM history WHERE memory_id = ? ORDER BY rowid",
            (memory_id,),
        ).fetchall()


def memsync(deployment, *argv: str) -> tuple[int, dict[str, Any]]:
    """The CLI as a subprocess (``python -m memsync``), its JSON document (stdout or stderr)."""
    done = run_memsync(*argv, "--json", "--config", str(deployment.config))
    return done.returncode, json.loads(done.stdout or done.stderr)


def test_recover_undoes_a_mistaken_forget_of_a_user_and_check_stays_clean(deployment, cli):
    snapshot_id = verified_snapshot(cli, deployment)
    before = stored(deployment)
    victim = busiest_user(before)
    theirs = {m for m, (payload, _) in before.items() if payload["user_id"] == victim}
    code, forgot = memsync(deployment, "forget", "--user", victim, "--yes", "--no-snapshot")
    assert code == 0, forgot
    assert set(forgot["deleted"]) == theirs
    gone = stored(deployment)
    assert not theirs & set(gone)
    untouched = fingerprint(deployment.paths.root)

    code, dry = memsync(deployment, "recover", "--user", victim, "--from", "latest", "--dry-run")
    assert code == 0, dry
    assert dry["dry_run"] is True and dry["route"] == "direct"
    assert dry["chosen"]["snapshot_id"] == snapshot_id and dry["chosen"]["by"] == "latest"
    assert {m["memory_id"] for m in dry["memories"] if m["status"] == "recover"} == theirs
    assert fingerprint(deployment.paths.root) == untouched  # the dry run changed nothing

    code, done = memsync(deployment, "recover", "--user", victim, "--from", "latest")
    assert code == 0, done
    assert done["counts"]["recovered"] == len(theirs) and done["check_after"]["errors"] == 0
    assert {m["memory_id"] for m in done["memories"]} == theirs  # nobody else's memories
    assert stored(deployment) == before  # same ids, payloads and vectors; others untouched
    for memory_id in theirs:
        event, actor, role = history_rows(deployment, memory_id)[-1]
        assert (event, actor, role) == ("ADD", "memsync", f"memsync recover from {snapshot_id}")

    check = cli("check", "--json", config=deployment.config)
    assert check.code == 0 and check.json()["counts"]["errors"] == 0
    reconcile = cli("reconcile", "--dry-run", "--json", config=deployment.config)
    assert reconcile.code == 0, reconcile.out  # nothing to undo: tombstones no longer win here
    memory = deployment.reopen()
    found = memory.get_all(filters={"user_id": victim}, top_k=1000, show_expired=True)["results"]
    assert {item["id"] for item in found} == theirs  # mem0 returns them again
    deployment.close()

    again = cli(
        "recover", "--user", victim, "--from", snapshot_id, "--json", config=deployment.config
    )
    assert again.code == 0 and again.json()["counts"]["present"] == len(theirs)
    assert again.json()["counts"]["recovered"] == 0


@pytest.mark.parametrize("by", ["scope", "ids"])
def test_the_recover_command_a_forget_prints_brings_its_memories_back_as_printed(
    deployment, cli, by
):
    """The forget's text names its safety snapshot and the recover that undoes it: run as
    printed (shell words), that command brings back exactly what the forget deleted."""
    before = stored(deployment)
    victim = busiest_user(before)
    theirs = sorted(m for m, (payload, _) in before.items() if payload["user_id"] == victim)
    deployment.close()
    what = ["--user", victim] if by == "scope" else theirs[:2]
    forgot = cli("forget", *what, "--yes", config=deployment.config)
    assert forgot.code == 0, forgot.out + forgot.err
    (line,) = [x for x in forgot.out.splitlines() if "brings these memories back" in x]
    printed = line.split("memsync ", 1)[1].split(" brings these memories back")[0]
    argv = shlex.split(printed)
    assert argv[0] == "recover", (line, forgot.out)
    done = cli(*argv, "--json", config=deployment.config)
    assert done.code == 0, done.out + done.err
    assert {m["memory_id"] for m in done.json()["memories"]} == set(what if by == "ids" else theirs)
    assert done.json()["counts"]["recovered"] == len(what if by == "ids" else theirs)


def test_recover_after_a_bulk_delete_all_from_a_remote_snapshot(
    make_deployment, cli, s3_endpoint, bucket
):
    deployment = make_deployment(count=60, extra_config=s3_section(s3_endpoint, bucket))
    snapshot_id = verified_snapshot(cli, deployment, "--upload")
    shutil.rmtree(deployment.paths.root / "snapshots")  # only the bucket holds it now
    before = stored(deployment)
    victim = busiest_user(before)
    theirs = {m for m, (payload, _) in before.items() if payload["user_id"] == victim}
    memory = deployment.reopen()
    memory.delete_all(user_id=victim)  # the bulk deletion (mem0ai #3746 wiped every user)
    deployment.close()
    others = {m: v for m, v in stored(deployment).items()}
    assert not theirs & set(others) and len(others) == len(before) - len(theirs)

    source = f"s3://{bucket}/memsync/test/{snapshot_id}"
    result = cli("recover", "--user", victim, "--from", source, "--json", config=deployment.config)
    assert result.code == 0, result.err
    document = result.json()
    assert document["snapshot_id"] == snapshot_id
    assert document["counts"]["recovered"] == len(theirs) and document["check_after"]["errors"] == 0
    after = stored(deployment)
    assert after == before
    assert {m: after[m] for m in others} == others  # the other users' memories, byte for byte
    assert cli("check", "--json", config=deployment.config).json()["counts"]["errors"] == 0


def test_recover_leaves_erased_changed_and_live_memories_alone(deployment, cli):
    snapshot_id = verified_snapshot(cli, deployment)
    before = stored(deployment)
    victim = busiest_user(before)
    theirs = sorted(m for m, (payload, _) in before.items() if payload["user_id"] == victim)
    assert len(theirs) >= 4
    erased, changed, kept, *rest = theirs
    deployment.close()
    erase = cli("forget", erased, "--erase", "--yes", "--no-snapshot", config=deployment.config)
    assert erase.code == 0, erase.err
    memory = deployment.reopen()
    memory.update(changed, "a text written after the snapshot")
    memory.delete(changed)
    for memory_id in rest:
        memory.delete(memory_id)
    deployment.close()

    result = cli(
        "recover", "--user", victim, "--from", snapshot_id, "--json", config=deployment.config
    )
    assert result.code == 0, result.err
    status = {m["memory_id"]: m["status"] for m in result.json()["memories"]}
    assert status == {
        erased: "erased",
        changed: "recovered",  # with the text written after the snapshot (below)
        kept: "present",
        **dict.fromkeys(rest, "recovered"),
    }
    after = stored(deployment)
    assert erased not in after and after[changed][0]["data"] == "a text written after the snapshot"
    assert {m: after[m] for m in rest} == {m: before[m] for m in rest}
    assert result.json()["check_after"]["errors"] == 0


def test_recover_by_memory_id_and_refusals(deployment, cli):
    snapshot_id = verified_snapshot(cli, deployment)
    before = stored(deployment)
    target = sorted(before)[0]
    memory = deployment.reopen()
    memory.delete(target)
    deployment.close()
    untouched = fingerprint(deployment.paths.root)

    no_scope = cli("recover", "--from", snapshot_id, config=deployment.config)
    assert no_scope.code == 2 and "exactly one scope" in no_scope.err
    bad_time = cli("recover", target, "--before", "yesterday", config=deployment.config)
    assert bad_time.code == 2 and "ISO 8601" in bad_time.err
    with app_holding(deployment.paths.qdrant):
        dry = cli("recover", target, "--dry-run", "--json", config=deployment.config)
        assert dry.code == 0 and dry.json()["route"] is None
        refused = cli("recover", target.upper(), "--json", config=deployment.config)
    assert refused.code == 12 and "not queued" in json.loads(refused.err)["hint"]
    assert fingerprint(deployment.paths.root) == untouched

    missing = "00000000-0000-4000-8000-000000000000"
    done = cli(
        "recover",
        target.upper(),
        missing,
        "--from",
        snapshot_id,
        "--json",
        config=deployment.config,
    )
    assert done.code == 0, done.err
    assert {m["memory_id"]: m["status"] for m in done.json()["memories"]} == {
        target: "recovered",
        missing: "not-in-snapshot",
    }
    assert stored(deployment) == before


def test_recover_from_an_unverified_latest_is_refused(deployment, cli):
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code == 0
    result = cli("recover", "--user", "alice", "--json", config=deployment.config)
    assert result.code == 11 and "passed verification" in json.loads(result.err)["message"]
    assert Path(deployment.paths.history_db).is_file()


def test_recover_goes_through_the_running_apps_agent(deployment, cli, tmp_path):
    from tests.helpers.app import AppProcess

    snapshot_id = verified_snapshot(cli, deployment)
    victim = busiest_user(stored(deployment))
    changed = min(m for m, (p, _) in stored(deployment).items() if p["user_id"] == victim)
    memory = deployment.reopen()
    memory.update(changed, "a text written after the snapshot")  # embedded again at recover
    deployment.close()
    before = stored(deployment)
    theirs = {m for m, (payload, _) in before.items() if payload["user_id"] == victim}
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock, users=("agent-app-traffic",)) as app:
        forgot = cli(
            "forget", "--user", victim, "--yes", "--no-snapshot", "--json", config=deployment.config
        )
        assert forgot.code == 0 and forgot.json()["route"] == "agent"
        assert not theirs & app.view()
        result = cli(
            "recover", "--user", victim, "--from", snapshot_id, "--json", config=deployment.config
        )
        assert result.code == 0, result.err
        assert result.json()["route"] == "agent"
        assert result.json()["counts"]["recovered"] == len(theirs)
        again = [m["memory_id"] for m in result.json()["memories"] if m["re_embedded"]]
        assert again == [changed]  # put_back_text, by the app's own embedder in the app
        assert theirs <= app.view()  # the app's own Memory has them back at once
        assert app.process.poll() is None and app.stop()["failures"] == 0
    after = stored(deployment)
    assert {m: after[m] for m in before} == before  # the app's traffic added others; ours equal
    assert cli("check", "--json", config=deployment.config).json()["counts"]["errors"] == 0


def test_delete_all_then_recover_brings_back_every_memory_with_its_last_text(make_deployment, cli):
    """The operator's drill: a user's memories, 2 updated after the snapshot, all deleted by
    mem0's delete_all; recover brings every one back, the 2 with their last text embedded
    again by the app's embedder and the snapshot's id, scope and metadata."""
    deployment = make_deployment(count=60)
    snapshot_id = verified_snapshot(cli, deployment)
    snapped = stored(deployment)
    victim = busiest_user(snapped)
    theirs = sorted(m for m, (payload, _) in snapped.items() if payload["user_id"] == victim)
    assert len(theirs) == 17  # the seed is fixed: the drill's exact count
    memory = deployment.reopen()
    updated = theirs[:2]
    for n, memory_id in enumerate(updated):
        memory.update(memory_id, f"a text written after the snapshot, number {n}")
    added = memory.add("added after the snapshot", user_id=victim, infer=False)["results"][0]["id"]
    deployment.close()
    last = stored(deployment)  # what the app held just before the delete_all
    assert added in last
    memory = deployment.reopen()
    memory.delete_all(user_id=victim)  # mem0's own bulk delete: one DELETE row each
    deployment.close()
    assert not set(theirs) & set(stored(deployment))

    code, dry = memsync(deployment, "recover", "--user", victim, "--from", snapshot_id, "--dry-run")
    assert code == 0, dry
    assert dry["counts"]["recover"] == len(theirs) and dry["route"] == "direct"
    assert sorted(m["memory_id"] for m in dry["memories"] if m["re_embedded"]) == updated

    code, done = memsync(deployment, "recover", "--user", victim, "--from", snapshot_id)
    assert code == 0, done
    assert done["counts"]["recovered"] == len(theirs), done["counts"]
    assert done["counts"]["changed"] == 0 and done["check_after"]["errors"] == 0
    assert all("newer snapshot" not in m["why"] for m in done["memories"])
    assert done["deleted_not_in_snapshot"] == [added]  # lost with the rest: named, not claimed
    after = stored(deployment)
    assert {m: after[m] for m in theirs} == {m: last[m] for m in theirs}  # texts, vectors, payloads
    for n, memory_id in enumerate(updated):
        assert after[memory_id][0]["data"] == f"a text written after the snapshot, number {n}"
        event, actor, role = history_rows(deployment, memory_id)[-1]
        assert (event, actor) == ("ADD", "memsync")
        assert role == f"memsync recover from {snapshot_id} (text from history, embedded again)"
    memory = deployment.reopen()
    found = memory.get_all(filters={"user_id": victim}, top_k=1000, show_expired=True)["results"]
    assert {item["id"]: item["memory"] for item in found} == {
        m: last[m][0]["data"] for m in theirs
    }  # mem0 reads every one back, with its last text
    deployment.close()
    assert cli("check", "--json", config=deployment.config).json()["counts"]["errors"] == 0

    code, again = memsync(
        deployment, "recover", "--user", victim, "--from", snapshot_id, "--dry-run"
    )
    assert code == 0 and again["counts"]["present"] == len(theirs) - 2
    assert again["counts"]["changed"] == 2  # live with a text newer than the snapshot's
    assert again["route"] == "direct"  # named even with nothing to write


def test_recover_by_scope_after_a_collection_reset_brings_the_victim_back_as_reconcile_would(
    make_deployment, cli
):
    """Older mem0's delete_all: one user deleted through mem0, then the whole collection reset,
    so another user's points vanish with no DELETE event; ``recover --user`` brings them back."""
    deployment = make_deployment(count=60)
    snapshot_id = verified_snapshot(cli, deployment)
    before = stored(deployment)
    users = Counter(payload["user_id"] for payload, _ in before.values()).most_common()
    deleted_user, victim = users[0][0], users[1][0]
    victims = {m for m, (payload, _) in before.items() if payload["user_id"] == victim}
    with sqlite3.connect(deployment.paths.history_db) as connection:
        rows_before = connection.execute("SELECT count(*) FROM history").fetchone()[0]
    memory = deployment.reopen()
    memory.delete_all(user_id=deleted_user)
    memory.vector_store.reset()  # the collection dropped and made again: every point gone
    deployment.close()
    assert stored(deployment) == {}
    with sqlite3.connect(deployment.paths.history_db) as connection:
        rows_after_reset = connection.execute("SELECT count(*) FROM history").fetchone()[0]

    code, dry = memsync(deployment, "recover", "--user", victim, "--from", snapshot_id, "--dry-run")
    assert code == 0, dry
    assert dry["route"] == "direct"
    assert dry["counts"]["recover"] == len(victims) and len(dry["memories"]) == len(victims)
    assert all("vanished without a DELETE event" in m["why"] for m in dry["memories"])
    said = cli(
        "recover", "--user", victim, "--from", snapshot_id, "--dry-run", config=deployment.config
    )
    assert f"{len(victims)} would come back (route: direct)" in said.out, said.out
    assert "holds the store" not in said.out

    code, done = memsync(deployment, "recover", "--user", victim, "--from", snapshot_id)
    assert code == 0, done
    assert done["counts"]["recovered"] == len(victims), done["counts"]
    after = stored(deployment)
    assert after == {m: before[m] for m in victims}  # same ids, payloads, vectors; only theirs
    with sqlite3.connect(deployment.paths.history_db) as connection:
        rows_now = connection.execute("SELECT count(*) FROM history").fetchone()[0]
    # reconcile's repair of a missing-point: the point back, no history row written
    assert rows_now == rows_after_reset and rows_before < rows_after_reset
    findings = cli("check", "--json", config=deployment.config).json()["findings"]
    assert not [
        (f["code"], f["memory_id"])
        for f in findings
        if f["memory_id"] in victims and f["severity"] == "error"
    ]
    reconcile = cli("reconcile", "--dry-run", "--json", config=deployment.config)
    planned = {a["memory_id"] for a in reconcile.json()["actions"]}
    assert not planned & victims  # nothing left for reconcile to do for them
