"""A safety snapshot holds the damage it was taken to keep: verify says so, never "FAILED".

A real deployment damaged as a restore mix-up leaves it (an older Qdrant copy put back under
newer history: resurrected points), reconciled through the app's interpreter; its safety
snapshot verified by ``snapshot verify``, the daemon's ``verify`` job (``memsync job verify``,
the scheduled run) and read by ``status``, beside an ordinary snapshot of the same damage.
"""

from __future__ import annotations

import json

from memsync.demo import deployment as build

SCHEDULE = 'verify_cycle = "6h"\n\n[daemon]\nverify_every = "1h"\n'


def resurrect(deployment, tmp_path, name: str, first: int = 0) -> None:
    """Delete 3 memories (from ``first``) through mem0, then put the Qdrant copy from before back."""
    deployment.close()
    older = build.copy_qdrant(deployment.paths, tmp_path / name)
    memory = deployment.reopen()
    for memory_id in deployment.seeded.live[first : first + 3]:
        memory.delete(memory_id)
    deployment.close()
    build.put_back_qdrant(deployment.paths, older)


def verify_job(cli, deployment) -> tuple[int, dict, dict]:
    """``memsync job verify``, then the verify row of ``status --json`` and status's exit."""
    job = cli("job", "verify", "--json", config=deployment.config)
    status = cli("status", "--json", config=deployment.config)
    row = next(r for r in status.json()["jobs"] if r["job"] == "verify")
    return job.code, job.json(), {**row, "status_exit": status.code}


def test_a_reconcile_safety_snapshot_verifies_with_its_damage_expected_but_a_damaged_ordinary_one_fails(
    make_deployment, cli, tmp_path
):
    deployment = make_deployment(count=12, extra_config=SCHEDULE)
    resurrect(deployment, tmp_path, "first")
    reconciled = cli("reconcile", "--json", config=deployment.config)
    assert reconciled.code == 0, reconciled.err
    safety = reconciled.json()["safety_snapshot"]
    manifest = json.loads(
        (deployment.paths.root / "snapshots" / safety / "manifest.json").read_text()
    )
    assert manifest["label"] == {"kind": "safety", "by": "reconcile"}
    listed = cli("snapshot", "list", config=deployment.config).out.splitlines()
    assert [line for line in listed if line.startswith(safety)][0].endswith("safety (reconcile)")

    verified = cli("snapshot", "verify", safety, "--json", config=deployment.config)
    assert verified.code == 0, verified.out
    report = verified.json()
    assert report["ok"] is True and report["label"]["kind"] == "safety"
    assert not [f for f in report["findings"] if f["severity"] == "error"], report["findings"]
    assert {f["code"] for f in report["expected"]} == {"resurrected-point"}
    assert len(report["expected"]) == 3
    text = cli("snapshot", "verify", safety, config=deployment.config)
    assert "holds the damage it was taken to keep" in text.out and "FAILED" not in text.out

    # the daemon's verify job reads the newest, the safety snapshot, in full: no failure
    code, run, row = verify_job(cli, deployment)
    assert code == 0, json.dumps(run["sides"], indent=1)
    assert run["ok"] is True and run["counts"]["errors"] == 0 and run["counts"]["expected"] == 3
    (full,) = [s for s in run["sides"][0]["snapshots"] if s["scope"] == "full"]
    assert full["id"] == safety and full["ok"] is True
    assert row["last_outcome"] == "ok" and row["failing"] is False and row["status_exit"] == 0
    # restore latest never takes the safety snapshot (it holds the damage)
    latest = cli("restore", "latest", "--dry-run", config=deployment.config)
    assert latest.code == 11 and "1 of them safety snapshots" in latest.err, latest.err
    # nor does doctor count it as the backup
    doctor = cli("doctor", "--json", config=deployment.config).json()
    (last,) = [r for r in doctor["results"] if r["code"] == "last-snapshot"]
    assert (
        safety not in last["message"]
        and last["message"] == "no complete snapshot of this deployment found"
    )

    # an ordinary snapshot of the same damage, the newest now: the job fails, status shows it
    resurrect(deployment, tmp_path, "second", first=3)
    ordinary = cli("snapshot", "create", "--json", config=deployment.config)
    assert ordinary.code == 3, ordinary.err  # a damaged pair: kept, and said
    damaged = cli("snapshot", "verify", ordinary.json()["id"], "--json", config=deployment.config)
    assert damaged.code == 3
    codes = {f["code"] for f in damaged.json()["findings"] if f["severity"] == "error"}
    assert codes == {"resurrected-point", "restore-unclean"} and damaged.json()["expected"] == []
    code, run, row = verify_job(cli, deployment)
    assert code == 3 and run["counts"]["errors"] >= 2
    assert row["last_outcome"] == "problems" and row["failing"] is True and row["status_exit"] == 3
