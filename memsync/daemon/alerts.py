"""What a job run tells ``[daemon] notify``, and sending it: the daemon's runs and ``memsync job``'s.

A run is worth a notification when its job starts failing (its outcome is ``failed``,
``locked``, ``queued``, ``try-later`` or ``problems`` and the run before was not failing, or
failed with another outcome; an ``interrupted`` run in between changes nothing), when its report carries a ``mass-deletion`` or ``vanished-memories`` finding (the
tripwire of ``snapshot create``), or when it recovers (failing before, ``ok`` now). A job that
keeps failing the same way is told once, not at every retry; an ``interrupted`` run never.
The notification names the job, the outcome, the reason and the next step
(``memsync.jobs.explain``), the host and the deployment (config file, store, collection);
never a memory's text, and never a secret: URL credentials and every configured notify and
ping URL are redacted from it. Delivery runs in background threads (``memsync.notify``): a
notification that fails is one ``notify_failed`` warning and never changes the job's outcome.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from memsync import jobs, notify
from memsync.config import Config
from memsync.config.redact import REDACTED, scrub_url
from memsync.deployment import Deployment
from memsync.notify import Kind, Notice
from memsync.utc import iso

logger = structlog.get_logger(__name__)

TRIPWIRE_CODES = ("mass-deletion", "vanished-memories")
NOTIFY_WAIT_S = 10.0  # how long `memsync job` waits for its notifications before exiting
_LONGEST_LINE = 500
_FAILED_TITLE = {
    "failed": "failed",
    "locked": "could not run (store locked)",
    "queued": "could not write (request queued)",
    "try-later": "could not run (try later)",
    "problems": "found problems",
}
_TEST_HINT = "send a test by hand: apprise -vv -t test -b test 'URL' (the URL from [daemon] notify)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """Where the run happened, for the notification: the host name and the deployment."""

    host: str
    deployment: str


def place_of(deployment: Deployment) -> Place:
    """This host's name and the deployment's config file, store and collection. Reads only."""
    config = deployment.config
    return Place(
        host=socket.gethostname(),
        deployment=f"{config.source} (store {deployment.vector_store.where}, collection {config.collection})",
    )


def find_tripwire(output: Mapping[str, Any]) -> list[str]:
    """The messages of the tripwire's findings in a job's JSON report, in order. Pure."""
    findings = output.get("findings")
    if not isinstance(findings, list):
        return []
    return [
        str(finding.get("message") or "memories dropped beyond the tripwire")
        for finding in findings
        if isinstance(finding, Mapping) and finding.get("code") in TRIPWIRE_CODES
    ]


def plan_notice(
    run: jobs.Run, before: Mapping[str, Any], record: Mapping[str, Any], place: Place
) -> Notice | None:
    """The notification ``run`` calls for, or None (the rules in this module's docstring). Pure.

    Args:
        run: the finished run.
        before: the job's state record before the run (``{}`` for none).
        record: its record after the run (``jobs.record_run``).
        place: the host and deployment named in the body.
    """
    outcome = run.outcome
    if outcome == "interrupted":
        return None
    tripped = find_tripwire(run.output)
    was_failing, failing = jobs.is_failing(before), bool(record.get("failing"))
    told = before.get("last_outcome") in (outcome, "interrupted")  # kept failing as it was
    starts_failing = failing and not (was_failing and told)
    recovered = was_failing and not failing and outcome == "ok"
    kind: Kind
    if tripped:
        what, kind = "mass deletion suspected", "warning"
    elif starts_failing:
        what = _FAILED_TITLE.get(outcome, outcome)
        kind = "warning" if outcome == "problems" else "failure"
    elif recovered:
        what, kind = "recovered", "success"
    else:
        return None
    lines = [
        f"job: {run.name} (trigger: {run.trigger})",
        f"outcome: {outcome} (exit {run.exit_code})",
        *(f"mass deletion: {message}" for message in tripped),
    ]
    if recovered:
        lines.append(f"before: failing ({before.get('last_outcome') or 'failed'})")
    for label, field in (("reason", "reason"), ("next step", "next_step")):
        if failing and record.get(field):
            lines.append(f"{label}: {record[field]}")
    if tripped:
        lines.append(
            "next step: memsync snapshot list (the snapshot before the drop is pinned); "
            "if the deletion was a mistake, bring the memories back from it"
        )
    lines += [f"host: {place.host}", f"deployment: {place.deployment}", f"at: {iso(run.started)}"]
    return Notice(
        title=f"memsync {run.name} on {place.host}: {what}",
        body="\n".join(line[:_LONGEST_LINE] for line in lines),
        kind=kind,
    )


def protect_notice(exit_code: int, restart_in_s: float, pid: int, place: Place) -> Notice:
    """Litestream exited on its own (``[protect]``): the daemon restarts it. Pure.

    Told at the first exit of a run of exits, not at every restart.
    """
    lines = [
        f"Litestream (pid {pid}) exited with status {exit_code}: the SQLite files' writes are "
        "not replicated until it runs again",
        f"memsync's daemon starts it again in {restart_in_s:g} s (then 2, 4 ... 60 s while it "
        "keeps exiting)",
        "next step: memsync protect --status; journalctl -u memsync (Litestream's own lines)",
        f"host: {place.host}",
        f"deployment: {place.deployment}",
    ]
    return Notice(
        title=f"memsync protect on {place.host}: Litestream exited",
        body="\n".join(line[:_LONGEST_LINE] for line in lines),
        kind="failure",
    )


def redact(notice: Notice, secrets: Iterable[str]) -> Notice:
    """``notice`` with URL credentials and each of ``secrets`` (verbatim) redacted. Pure."""

    def clean(text: str) -> str:
        for secret in sorted((s for s in secrets if s), key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return scrub_url(text)

    return Notice(title=clean(notice.title), body=clean(notice.body), kind=notice.kind)


def send(config: Config, job: str, notice: Notice) -> list[threading.Thread]:
    """Send ``notice`` to every ``[daemon] notify`` URL, one background thread each.

    Returns the threads (daemon threads, already started; named ``notify[INDEX]``). Each logs
    ``notify_sent`` or one ``notify_failed`` warning naming the URL by its index and service,
    never the URL itself.
    """
    urls: Sequence[str] = config.daemon.notify
    secrets = [*urls, config.daemon.ping_url or ""]
    safe = redact(notice, secrets)
    threads = []
    for index, url in enumerate(urls):
        thread = threading.Thread(
            target=_deliver, args=(index, url, job, safe), name=f"notify[{index}]", daemon=True
        )
        thread.start()
        threads.append(thread)
    return threads


def _deliver(index: int, url: str, job: str, notice: Notice) -> None:
    target = f"daemon.notify[{index}]"
    service = notify.scheme_of(url)
    try:
        delivered = notify.deliver(url, notice)
    except Exception as error:  # noqa: BLE001 - a thread's boundary: a notification never fails a job
        delivered, reason = False, f"{type(error).__name__} (details not shown: they name the URL)"
    else:
        reason = "the service did not accept it or could not be reached"
    if delivered:
        logger.info("notify_sent", job=job, target=target, service=service, kind=notice.kind)
        return
    logger.warning(
        "notify_failed", job=job, target=target, service=service, error=reason, hint=_TEST_HINT
    )


def log_unfinished(threads: Iterable[threading.Thread]) -> None:
    """One ``notify_failed`` warning for each notification still in flight (no answer yet)."""
    for thread in threads:
        if thread.is_alive() and thread.name.startswith("notify["):
            logger.warning(
                "notify_failed",
                target=f"daemon.{thread.name}",
                error=f"no answer within {NOTIFY_WAIT_S:.0f} s",
                hint=_TEST_HINT,
            )
