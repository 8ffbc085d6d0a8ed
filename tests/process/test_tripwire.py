"""The mass-deletion tripwire as an operator meets it: real mem0 deletions between two
``snapshot create`` processes, the report, the pin beside the snapshot, the textfile."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from memsync import repository
from memsync.config import load
from memsync.repository import LocalRepository
from memsync.snapshot.pins import pin_of
from tests.conftest import s3_section
from tests.process.test_cli import run_memsync

USER = "zoe"


def add_memories(memory, user_id: str, count: int) -> list[str]:
    """Add ``count`` memories of ``user_id`` through mem0 (echo LLM: one memory per message)."""
    ids: list[str] = []
    while len(ids) < count:
        size = min(20, count - len(ids))
        messages = [
            {"role": "user", "content": f"{user_id} fact {len(ids) + i}: likes {len(ids) * 31 + i}"}
            for i in range(size)
        ]
        ids += [item["id"] for item in memory.add(messages, user_id=user_id, infer=True)["results"]]
    return ids


def create(config, *extra: str) -> dict:
    """``memsync snapshot create --json`` as a process; its report (exit 0 required)."""
    result = run_memsync("snapshot", "create", "--json", "--config", str(config), *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def events(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


@pytest.fixture
def zoe(make_deployment):
    """A deployment of 40 seeded memories plus 64 of user ``zoe``, its Memory closed."""

    def build(extra_config: str = ""):
        deployment = make_deployment(count=40, extra_config=extra_config)
        ids = add_memories(deployment.memory, USER, 64)
        deployment.close()
        return deployment, ids

    return build


def test_delete_all_of_one_user_trips_and_pins_the_snapshot_before(zoe, tmp_path):
    deployment, _ = zoe()
    first = create(deployment.config)
    assert first["tripwire"]["no_baseline"] == "no earlier complete snapshot"
    assert first["tripwire"]["tripped"] is False and first["findings"] == []
    manifest = json.loads(
        (deployment.paths.root / "snapshots" / first["id"] / "manifest.json").read_text()
    )
    assert manifest["scopes"]["user_id"][USER] == 64
    total_before = manifest["scopes"]["total"]
    assert total_before == sum(manifest["scopes"]["user_id"].values())  # every memory has a user

    memory = deployment.reopen()
    memory.delete_all(user_id=USER)  # the bulk deletion mem0 has shipped bugs in
    deployment.close()
    textfile = tmp_path / "memsync.prom"
    deployment.config.write_text(
        deployment.config.read_text() + f'\n[daemon]\ntextfile_path = "{textfile}"\n'
    )
    result = run_memsync("job", "snapshot", "--json", "--config", str(deployment.config))
    assert result.returncode == 0, result.stderr  # the snapshot itself succeeded
    second = json.loads(result.stdout)

    found = {f["scope"]: f for f in second["findings"]}
    assert set(found) == {f"user_id={USER}", None}  # the user, and the whole store
    assert {f["code"] for f in found.values()} == {"mass-deletion"}
    assert {f["severity"] for f in found.values()} == {"warning"}
    assert (found[f"user_id={USER}"]["expected"], found[f"user_id={USER}"]["observed"]) == (64, 0)
    assert "64 -> 0" in found[f"user_id={USER}"]["message"]
    assert found[None]["expected"] == total_before
    assert found[None]["observed"] == total_before - 64
    tripwire = second["tripwire"]
    assert tripwire["tripped"] is True and tripwire["previous"] == first["id"]
    assert tripwire["pinned"] == first["id"] and tripwire["pinned_on"] == ["local"]
    assert {d["scope"] for d in tripwire["drops"]} == {f"user_id={USER}", None}

    entries = {e.id: e for e in LocalRepository(deployment.paths.root / "snapshots").list()}
    pin = pin_of(entries[first["id"]])
    assert pin is not None and pin["by"] == "tripwire"
    assert "1 user_id scope(s) dropped" in pin["reason"] and second["id"] in pin["reason"]
    assert USER not in pin["reason"]  # a pin outlives erasures: it never names a user
    assert pin_of(entries[second["id"]]) is None
    warned = [e for e in events(result.stderr) if e.get("event") == "mass_deletion_suspected"]
    assert warned and warned[0]["level"] == "warning" and USER not in json.dumps(warned)
    text = textfile.read_text()
    series = f'memsync_tripwire_tripped{{snapshot_id="{second["id"]}",pinned="{first["id"]}"}} 1'
    assert series in text.splitlines()


def test_a_deletion_below_the_thresholds_does_not_trip(zoe):
    deployment, ids = zoe()
    first = create(deployment.config)
    memory = deployment.reopen()
    for memory_id in ids[:20]:  # 31% of zoe's memories, but not more than 50
        memory.delete(memory_id)
    deployment.close()
    second = create(deployment.config)
    assert second["findings"] == []
    assert second["tripwire"]["tripped"] is False and second["tripwire"]["previous"] == first["id"]
    assert second["tripwire"]["no_baseline"] is None and second["tripwire"]["pinned"] is None
    assert not (deployment.paths.root / "snapshots" / first["id"] / "pinned.json").exists()


def test_an_erasure_of_a_user_is_not_taken_for_a_mass_deletion(zoe):
    deployment, _ = zoe()
    create(deployment.config)  # the snapshot before: zoe has 64 memories
    erased = run_memsync(
        "forget", "--user", USER, "--erase", "--yes", "--config", str(deployment.config)
    )
    assert erased.returncode == 0, erased.stderr
    second = create(deployment.config)
    tripwire = second["tripwire"]
    assert second["findings"] == [] and tripwire["tripped"] is False, tripwire
    assert tripwire["erased_memories"] == 64 and tripwire["pinned"] is None
    snapshots = deployment.paths.root / "snapshots"
    assert not any(snapshots.glob("*/pinned.json"))  # nothing keeps the erased user's copies
    ledger = (deployment.paths.state / "erasures.json").read_text()
    assert USER not in ledger  # the ledger knows the scope only by its sha256


@pytest.mark.parametrize(
    ("config", "tripped", "enabled"),
    [
        ("tripwire_percent = 25\ntripwire_memories = 10\n", True, True),
        ("tripwire_percent = 40\ntripwire_memories = 10\n", False, True),
        ("tripwire_percent = 0\ntripwire_memories = 10\n", False, False),
        ("tripwire_percent = 25\ntripwire_memories = 0\n", False, False),
    ],
    ids=[
        "tripped-by-lower-thresholds",
        "below-percent",
        "percent-0-disables",
        "memories-0-disables",
    ],
)
def test_thresholds_come_from_the_config(zoe, config, tripped, enabled):
    deployment, ids = zoe(config)
    first = create(deployment.config)
    memory = deployment.reopen()
    for memory_id in ids[:20]:  # 20 of 64 (31%)
        memory.delete(memory_id)
    deployment.close()
    result = run_memsync("snapshot", "create", "--config", str(deployment.config))
    assert result.returncode == 0, result.stderr
    pinned = deployment.paths.root / "snapshots" / first["id"] / "pinned.json"
    assert pinned.exists() is tripped
    if tripped:
        assert re.search(rf"WARNING mass-deletion .*user_id={USER} 64 -> 44", result.stdout)
        assert f"pinned {first['id']} (local)" in result.stdout
    elif enabled:
        assert f"tripwire: no mass deletion since snapshot {first['id']}" in result.stdout
    else:
        assert "tripwire: disabled" in result.stdout


def test_the_snapshot_before_the_drop_is_pinned_in_the_bucket_too(zoe, s3_endpoint, bucket):
    deployment, _ = zoe(s3_section(s3_endpoint, bucket))
    first = create(deployment.config, "--upload")
    memory = deployment.reopen()
    memory.delete_all(user_id=USER)
    deployment.close()
    second = create(deployment.config, "--upload")
    assert second["tripwire"]["pinned_on"] == ["local", "remote"]
    assert second["tripwire"]["pin_errors"] == []
    remote = repository.remote(load(deployment.config, os.environ))
    entries = {e.id: e for e in remote.list()}
    assert pin_of(entries[first["id"]])["by"] == "tripwire"
    assert pin_of(entries[second["id"]]) is None


def test_a_bucket_that_refuses_the_pin_is_reported_and_the_snapshot_still_succeeds(
    zoe, s3_endpoint, bucket
):
    deployment, _ = zoe(s3_section(s3_endpoint, bucket))
    first = create(deployment.config, "--upload")
    memory = deployment.reopen()
    memory.delete_all(user_id=USER)
    deployment.close()
    broken = deployment.config.read_text().replace(
        f'bucket = "{bucket}"', 'bucket = "no-such-bucket-xyz"'
    )
    deployment.config.write_text(broken)
    second = create(deployment.config)  # no --upload: only the pin touches the (missing) bucket
    tripwire = second["tripwire"]
    assert tripwire["tripped"] is True and tripwire["previous"] == first["id"]
    assert tripwire["pinned_on"] == ["local"] and tripwire["pinned"] == first["id"]
    assert len(tripwire["pin_errors"]) == 1 and tripwire["pin_errors"][0].startswith("remote ")


def test_a_previous_snapshot_without_scope_counts_is_no_baseline(zoe):
    deployment, _ = zoe()
    first = create(deployment.config)
    path = deployment.paths.root / "snapshots" / first["id"] / "manifest.json"
    document = json.loads(path.read_text())
    del document["scopes"]  # as an older memsync wrote it (unsigned: nothing else changes)
    path.write_text(json.dumps(document))
    memory = deployment.reopen()
    memory.delete_all(user_id=USER)
    deployment.close()
    second = create(deployment.config)
    assert second["tripwire"]["previous"] == first["id"] and second["tripwire"]["tripped"] is False
    assert second["tripwire"]["no_baseline"] == (
        f"snapshot {first['id']} has no scope counts (made by an older memsync)"
    )
    assert second["findings"] == []


def test_a_delete_all_then_a_collection_reset_names_both_users_and_tells_them_apart(
    make_deployment, tmp_path
):
    """The bulk deletion older mem0 made: one user's memories deleted through mem0 (DELETE
    events), then the collection reset, so the other user's points vanish with no event."""
    deployment = make_deployment(count=0)
    add_memories(deployment.memory, "ben", 60)
    add_memories(deployment.memory, "ann", 50)  # exactly tripwire_memories: "not more than" 50
    deployment.close()
    first = create(deployment.config)
    memory = deployment.reopen()
    memory.delete_all(user_id="ben")  # through mem0: a DELETE history event per memory
    memory.vector_store.reset()  # the collection dropped and made again: no event at all
    deployment.close()
    textfile = tmp_path / "memsync.prom"
    deployment.config.write_text(
        deployment.config.read_text() + f'\n[daemon]\ntextfile_path = "{textfile}"\n'
    )

    result = run_memsync("job", "snapshot", "--json", "--config", str(deployment.config))

    assert result.returncode == 3, result.stderr  # memories vanished: an error, snapshot kept
    second = json.loads(result.stdout)
    tripwire = second["tripwire"]
    assert tripwire["previous"] == first["id"] and tripwire["pinned"] == first["id"]
    drops = {d["scope"]: d for d in tripwire["drops"]}
    assert set(drops) == {None, "user_id=ben", "user_id=ann"}  # the victim is named
    assert {
        s: (d["before"], d["after"], d["deleted"], d["vanished"]) for s, d in drops.items()
    } == {
        None: (110, 0, 60, 50),
        "user_id=ben": (60, 0, 60, 0),
        "user_id=ann": (50, 0, 0, 50),  # the victim, named though 50 is not beyond 50
    }
    assert drops["user_id=ann"]["emptied"] is True
    assert (tripwire["deleted_memories"], tripwire["vanished_memories"]) == (60, 50)
    assert tripwire["split_unknown"] is None
    codes = {(f["code"], f["scope"]) for f in second["findings"]}
    assert codes == {
        ("mass-deletion", None),
        ("vanished-memories", None),
        ("mass-deletion", "user_id=ben"),
        ("vanished-memories", "user_id=ann"),
    }
    vanished = next(f for f in second["findings"] if f["scope"] == "user_id=ann")
    assert vanished["severity"] == "error" and "50 vanished with no DELETE" in vanished["message"]
    assert {f["code"] for f in second["check"]["error_findings"]} == {"missing-point"}
    pinned = json.loads(
        (deployment.paths.root / "snapshots" / first["id"] / "pinned.json").read_text()
    )
    assert "50 memories vanished with no DELETE event" in pinned["reason"]
    assert "ann" not in pinned["reason"] and "ben" not in pinned["reason"]
    lines = textfile.read_text().splitlines()
    sid = second["id"]
    assert f'memsync_tripwire_gone_memories{{snapshot_id="{sid}",how="deleted"}} 60' in lines
    assert f'memsync_tripwire_gone_memories{{snapshot_id="{sid}",how="vanished"}} 50' in lines
    assert f'memsync_tripwire_tripped{{snapshot_id="{sid}",pinned="{first["id"]}"}} 1' in lines

    # what the error's fix says: reconcile brings the victim back from the pinned snapshot
    fixed = run_memsync("reconcile", "--json", "--no-snapshot", "--config", str(deployment.config))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    actions = json.loads(fixed.stdout)["actions"]
    assert len(actions) == 50 and {a["kind"] for a in actions} == {"restore-point"}
    memory = deployment.reopen()
    assert len(memory.get_all(filters={"user_id": "ann"}, top_k=1000)["results"]) == 50
    assert memory.get_all(filters={"user_id": "ben"}, top_k=1000)["results"] == []
    deployment.close()


def test_a_remote_baseline_is_read_for_the_split_and_nothing_it_downloads_stays(
    make_deployment, s3_endpoint, bucket
):
    deployment = make_deployment(count=0, extra_config=s3_section(s3_endpoint, bucket))
    add_memories(deployment.memory, "ben", 60)
    add_memories(deployment.memory, "ann", 10)
    deployment.close()
    first = create(deployment.config, "--upload")
    snapshots = deployment.paths.root / "snapshots"
    shutil.rmtree(snapshots / first["id"])  # only the bucket has it: the baseline is remote
    memory = deployment.reopen()
    memory.delete_all(user_id="ben")
    memory.vector_store.reset()
    deployment.close()
    work_dir = load(deployment.config, os.environ).work_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    work_before = sorted(os.listdir(work_dir))

    result = run_memsync("snapshot", "create", "--json", "--config", str(deployment.config))

    assert result.returncode == 3, result.stderr
    tripwire = json.loads(result.stdout)["tripwire"]
    assert tripwire["previous_side"] == "remote" and tripwire["pinned_on"] == ["remote"]
    split = {d["scope"]: (d["deleted"], d["vanished"]) for d in tripwire["drops"]}
    assert split == {None: (60, 10), "user_id=ben": (60, 0), "user_id=ann": (0, 10)}
    assert sorted(os.listdir(work_dir)) == work_before  # the downloaded collection is gone
    assert not (snapshots / first["id"]).exists()  # nothing fetched into the snapshot directory
