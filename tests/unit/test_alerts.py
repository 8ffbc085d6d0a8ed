"""Which runs tell ``[daemon] notify``, and what they say (values in, values out)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memsync.daemon.alerts import Place, plan_notice, redact
from memsync.jobs import Run, record_run
from memsync.notify import Notice, find_url_problem, scheme_of

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PLACE = Place(host="vps-1", deployment="/etc/memsync/memsync.toml (store /srv/q, collection mem0)")
DOWN = {
    "type": "exit_error",
    "code": 11,
    "message": "S3 upload s/manifest.json at s3://b/p at http://<redacted>@s3 failed: endpoint unreachable",
    "hint": "check s3.endpoint_url and the network; nothing local was removed",
}
TRIPPED = {
    "command": "snapshot create",
    "id": "20261201T120000Z",
    "findings": [
        {
            "code": "mass-deletion",
            "severity": "warning",
            "message": "user_id alice: 80 -> 0 memories (-100%)",
        }
    ],
}


def run(code: int, *, output: dict | None = None, name: str = "snapshot") -> Run:
    stderr = json.dumps(DOWN) + "\n" if code not in (0, 3, 130) else ""
    return Run(
        name=name,
        started=NOW,
        duration_s=1.0,
        exit_code=code,
        output=output or {},
        stderr=stderr,
        trigger="schedule",
    )


def outcomes(codes: list[int], output: dict | None = None) -> list[Notice | None]:
    """The notice of each run in turn, judged against the record the runs before left.

    ``output`` is the last run's report.
    """
    record: dict = {}
    notices = []
    for index, code in enumerate(codes):
        this = run(code, output=output if index == len(codes) - 1 else None)
        after = record_run(record, this, retries=True, interval_s=None)
        notices.append(plan_notice(this, record, after, PLACE))
        record = after
    return notices


@pytest.mark.parametrize(
    ("codes", "kinds"),
    [
        ([0, 0], [None, None]),
        ([11, 11, 11], ["failure", None, None]),
        ([11, 12], ["failure", "failure"]),
        ([11, 0, 0], ["failure", "success", None]),
        ([3, 3, 0], ["warning", None, "success"]),
        ([11, 130, 11], ["failure", None, None]),
        ([130], [None]),
    ],
    ids=[
        "ok-after-ok",
        "same-failure-told-once",
        "outcome-changes",
        "recovery",
        "problems-then-fixed",
        "interrupted-keeps-state",
        "interrupted",
    ],
)
def test_a_run_notifies_when_its_job_starts_failing_changes_failure_or_recovers(codes, kinds):
    assert [notice.kind if notice else None for notice in outcomes(codes)] == kinds


def test_a_failure_names_job_outcome_reason_next_step_host_and_deployment():
    [notice] = outcomes([11])
    assert notice is not None and notice.title == "memsync snapshot on vps-1: failed"
    assert notice.body.splitlines() == [
        "job: snapshot (trigger: schedule)",
        "outcome: failed (exit 11)",
        f"reason: {DOWN['message']}",
        f"next step: {DOWN['hint']}",
        "host: vps-1",
        f"deployment: {PLACE.deployment}",
        "at: 2026-12-01T12:00:00Z",
    ]


def test_a_tripped_tripwire_notifies_even_when_the_snapshot_succeeded():
    first, second = outcomes([0, 0], output=TRIPPED)
    assert first is None
    assert second is not None and second.kind == "warning"
    assert second.title == "memsync snapshot on vps-1: mass deletion suspected"
    assert "mass deletion: user_id alice: 80 -> 0 memories (-100%)" in second.body
    assert "snapshot list" in second.body


def test_a_recovery_says_what_failed_before_and_carries_no_stale_reason():
    notices = outcomes([75, 0])
    recovered = notices[1]
    assert recovered is not None and recovered.title.endswith(": recovered")
    assert "before: failing (try-later)" in recovered.body and "reason:" not in recovered.body


def test_redact_removes_every_configured_url_and_url_credentials():
    notice = Notice(
        title="t ntfy://private-topic",
        body="at https://user:pw@host/x and json://h/tok and ntfy://private-topic?x",
        kind="failure",
    )
    clean = redact(notice, ["ntfy://private-topic", "json://h/tok", ""])
    assert "private-topic" not in clean.title + clean.body
    assert "tok" not in clean.body and "user:pw" not in clean.body
    assert clean.body == "at https://<redacted>@host/x and <redacted> and <redacted>?x"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("ntfy://topic", True),
        ("mailto://user:pass@example.com", True),
        ("json://127.0.0.1:8080/path", True),
        ("bogus://x", False),
        ("tgram://not-a-bot-token", False),
        ("https://example.com", False),
        ("not a url", False),
    ],
)
def test_find_url_problem_uses_apprises_own_parser(url, ok):
    problem = find_url_problem(url)
    assert (problem is None) == ok
    assert problem is None or url not in problem


def test_scheme_of_names_the_service_and_nothing_else():
    assert scheme_of("mailtos://user:pass@example.com") == "mailtos"
    assert scheme_of("no url here") == "unknown"
