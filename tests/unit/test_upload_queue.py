"""Pending uploads: when a run captures, what the daemon's job passes, what doctor says (values only)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memsync import config as config_module
from memsync.doctor.s3 import (
    judge_bucket,
    judge_incomplete,
    judge_version_calls,
    lifecycle_command,
)
from memsync.jobs import QueueFigures, job_argv, judge_jobs, render_textfile
from memsync.s3 import BucketSettings, MultipartUpload
from memsync.snapshot.uploads import BOUNDED, CAPTURE, SKIP, plan_capture

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def plan(**given):
    values = {
        "pending_only": False,
        "if_due": None,
        "newest": None,
        "now": NOW,
        "pending": 0,
        "limit": 3,
        "s3_failed": False,
    }
    return plan_capture(**{**values, **given})[0]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, CAPTURE),  # by hand: always
        ({"newest": NOW - timedelta(seconds=5)}, CAPTURE),  # by hand: even right after one
        ({"pending_only": True}, SKIP),
        ({"if_due": HOUR, "newest": NOW - timedelta(minutes=20)}, SKIP),  # a retry
        ({"if_due": HOUR, "newest": NOW - timedelta(minutes=55)}, CAPTURE),  # slot came early
        ({"if_due": HOUR}, CAPTURE),  # no snapshot yet
        ({"s3_failed": True, "pending": 2}, CAPTURE),  # room for one more local copy
        ({"s3_failed": True, "pending": 3}, BOUNDED),
        ({"s3_failed": False, "pending": 3}, CAPTURE),  # S3 answered: they were uploaded
        ({"if_due": HOUR, "newest": NOW, "s3_failed": True, "pending": 3}, SKIP),  # not due first
    ],
)
def test_a_run_captures_only_when_wanted_due_and_within_the_bound(given, expected):
    assert plan(**given) == expected


def load(tmp_path: Path, daemon: str) -> config_module.Config:
    path = tmp_path / "memsync.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[mem0.vector_store.config]\npath = "{tmp_path / "q"}"\n'
        '[s3]\nbucket = "backups"\n'
        f"[daemon]\n{daemon}"
    )
    return config_module.load(path, {})


@pytest.mark.parametrize(
    ("daemon", "argv"),
    [
        ('snapshot_every = "15m"\n', ("--upload", "--if-due", "900s")),
        ('snapshot_at = "03:00"\n', ("--upload", "--if-due", "86400s")),
        ("", ("--upload",)),  # not scheduled: `memsync job snapshot` always captures
        ('snapshot_every = "15m"\nupload = false\n', ()),
    ],
)
def test_the_daemons_snapshot_job_passes_its_schedule(tmp_path, daemon, argv):
    assert job_argv(load(tmp_path, daemon), "snapshot") == ("snapshot", "create", *argv)


def test_the_textfile_always_has_the_pending_gauge_when_there_are_snapshots(tmp_path):
    config = load(tmp_path, 'snapshot_every = "15m"\n')
    state = {"jobs": {}}
    verdict = judge_jobs(config, state, NOW)
    text = render_textfile(verdict, state, QueueFigures(count=0), pending_uploads=2)
    assert "\nmemsync_snapshots_pending_upload 2\n" in text
    assert "memsync_snapshots_pending_upload" not in render_textfile(
        verdict, state, QueueFigures(count=0)
    )


def upload(key: str) -> MultipartUpload:
    return MultipartUpload(key=key, upload_id="u", initiated=datetime(2010, 11, 10, tzinfo=UTC))


def test_incomplete_uploads_are_aged_by_their_snapshot_id_not_by_initiated():
    fresh = upload("p/20261129T113000Z/history.db")  # Initiated says 2010, the id says 30 min
    assert judge_incomplete([fresh], NOW, "p", "s3://b/p").status == "ok"
    stale = upload("p/20261120T000000Z/history.db")
    judged = judge_incomplete([fresh, stale], NOW, "p", "s3://b/p")
    assert judged.status == "warning" and "(9 days)" in judged.message
    assert judged.message.startswith("1 incomplete multipart upload(s) older than a day")
    foreign = upload("p/not-a-snapshot/file")  # no id: Initiated is all there is
    assert judge_incomplete([foreign], NOW, "p", "s3://b/p").status == "warning"


def test_versioning_off_warns_unless_object_lock_protects():
    off = judge_bucket(
        BucketSettings(versioning="Off", object_lock=False, abort_incomplete_days=1), "b", "p"
    )
    assert [r.status for r in off] == ["warning", "ok", "ok"]
    locked = BucketSettings(versioning="Off", object_lock=True, abort_incomplete_days=None)
    assert [r.status for r in judge_bucket(locked, "b", "p")] == ["ok", "ok", "warning"]


def test_a_version_call_that_fails_costs_what_versioning_keeps():
    refused = {"ListObjectVersions": "NotImplemented", "DeleteObjects (a version)": None}
    versioned = judge_version_calls(refused, "Suspended")  # versions made before it are there
    assert [(r.code, r.status) for r in versioned] == [
        ("s3-list-versions", "error"),
        ("s3-delete-version", "ok"),
    ]
    assert "cannot see the noncurrent versions" in versioned[0].message
    never = judge_version_calls(refused, "Off")  # no noncurrent version can exist yet
    assert [r.status for r in never] == ["warning", "ok"]
    assert never[0].message.endswith("once versioning is enabled")


def test_the_recommended_lifecycle_rule_covers_the_prefix():
    command = lifecycle_command("backups", "memsync/prod")
    rule = json.loads(command.split("'")[1])["Rules"][0]
    assert rule["Filter"] == {"Prefix": "memsync/prod/"} and rule["Status"] == "Enabled"
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
