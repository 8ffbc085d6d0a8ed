"""Pre-restore copies: kept by default, the newest N with [restore] keep_pre_restore; doctor sizes them.

Real restores of a real deployment, each moving the stores it replaces aside; the retention
removes the oldest copies (by when they were moved aside) after a later restore's swap.
"""

from __future__ import annotations

from pathlib import Path


def _restore_three_times(cli, deployment) -> tuple[str, list[dict]]:
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    snapshot_id = made.json()["id"]
    reports = []
    for _ in range(3):
        restored = cli("restore", snapshot_id, "--force", "--json", config=deployment.config)
        assert restored.code == 0, restored.err
        reports.append(restored.json())
    return snapshot_id, reports


def _copies(target: Path) -> list[str]:
    return sorted(path.name for path in target.parent.glob(f"{target.name}.pre-restore-*"))


def test_every_pre_restore_copy_is_kept_by_default_and_doctor_gives_its_size(deployment, cli):
    snapshot_id, reports = _restore_three_times(cli, deployment)
    assert [report["pre_restore_removed"] for report in reports] == [[], [], []]
    names = [f"pre-restore-{snapshot_id}{suffix}" for suffix in ("", "-1", "-2")]
    assert _copies(deployment.paths.qdrant) == [f"qdrant.{name}" for name in names]
    assert _copies(deployment.paths.history_db) == [f"history.db.{name}" for name in names]
    doctor = cli("doctor", "--json", config=deployment.config).json()
    listed = {r["path"]: r["message"] for r in doctor["results"] if r["code"] == "pre-restore-copy"}
    assert len(listed) == 6
    history_copy = Path(f"{deployment.paths.history_db}.pre-restore-{snapshot_id}")
    size = history_copy.stat().st_size + sum(
        Path(f"{history_copy}{side}").stat().st_size
        for side in ("-journal", "-wal", "-shm")
        if Path(f"{history_copy}{side}").exists()
    )
    assert f"{size / 1e6:,.1f} MB" in listed[str(history_copy)]
    assert "[restore] keep_pre_restore sets a retention" in listed[str(history_copy)]


def test_keep_pre_restore_keeps_the_newest_copies_of_each_store(deployment, cli):
    deployment.config.write_text(
        deployment.config.read_text() + "\n[restore]\nkeep_pre_restore = 2\n"
    )
    snapshot_id, reports = _restore_three_times(cli, deployment)
    oldest = [
        f"{deployment.paths.qdrant}.pre-restore-{snapshot_id}",
        f"{deployment.paths.history_db}.pre-restore-{snapshot_id}",
    ]
    assert reports[0]["pre_restore_removed"] == reports[1]["pre_restore_removed"] == []
    assert set(oldest) <= set(reports[2]["pre_restore_removed"])
    names = [f"pre-restore-{snapshot_id}{suffix}" for suffix in ("-1", "-2")]
    assert _copies(deployment.paths.qdrant) == [f"qdrant.{name}" for name in names]
    assert _copies(deployment.paths.history_db) == [f"history.db.{name}" for name in names]
    doctor = cli("doctor", "--json", config=deployment.config).json()
    listed = [r for r in doctor["results"] if r["code"] == "pre-restore-copy"]
    assert len(listed) == 4 and all("the newest 2 per store kept" in r["message"] for r in listed)
    assert deployment.reopen().get(deployment.seeded.live[0]) is not None
