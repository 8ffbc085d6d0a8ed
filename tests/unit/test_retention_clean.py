"""plan_retention and Manifest.restores_clean: "newest verified" means its pair was clean too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memsync.config import SnapshotConfig
from memsync.model import CaptureWindow
from memsync.snapshot import Candidate, plan_retention
from memsync.stores.manifest import FileEntry, Manifest

START = datetime(2026, 3, 1, 3, 30, tzinfo=UTC)


def candidate(hours: int, *, verified: bool, clean: bool) -> Candidate:
    moment = START + timedelta(hours=hours)
    return Candidate(
        id=moment.strftime("%Y%m%dT%H%M%SZ"),
        time=moment,
        complete=True,
        verified=verified,
        clean=clean,
    )


def test_a_newer_verified_snapshot_whose_pair_was_not_clean_is_not_the_newest_verified():
    older = candidate(0, verified=True, clean=True)
    newer = candidate(1, verified=True, clean=False)
    decisions = {d.id: d for d in plan_retention([older, newer], SnapshotConfig(keep_last=1))}
    assert decisions[newer.id].reasons == ("keep-last 1",)
    assert decisions[older.id].keep and decisions[older.id].reasons == ("newest verified",)


def manifest(check: dict) -> Manifest:
    moment = START
    window = CaptureWindow(
        vectors_at=moment,
        vectors_finished_at=moment,
        history_at=moment,
        history_finished_at=moment,
        longest_read_s=0.0,
    )
    entry = FileEntry(path="history.db", size=1, sha256="0" * 64)
    return Manifest(
        id="20260301T033000Z",
        created_at=moment,
        collection="mem0",
        capture=window,
        files=(entry,),
        check=check,
    )


def test_restores_clean_reads_errors_unsettled_and_in_flight_of_older_manifests():
    assert manifest({"errors": 0, "findings": [], "unsettled": []}).restores_clean
    assert manifest({}).restores_clean  # a manifest older than the check field
    assert not manifest({"errors": 2, "findings": []}).restores_clean
    assert not manifest({"errors": 0, "unsettled": ["m1"]}).restores_clean
    assert not manifest({"errors": 0, "findings": [{"code": "in-flight"}]}).restores_clean
