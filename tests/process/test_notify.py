"""``[daemon] notify``: real ``memsync job`` and daemon processes tell a local Apprise JSON endpoint.

The endpoint is an http.server on 127.0.0.1 that Apprise's ``json://`` service POSTs to; the
job fails for real (the store's ``meta.json`` is garbage: exit 11) and recovers for real (the
file put back).
"""

from __future__ import annotations

import http.server
import json
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.process.test_daemon import ROOT, Notify, events, start, stop, with_daemon

TOKEN = "hook-s3cr3t-7f2c"  # a secret in the notify URL's path: never in a body or a log


class Receiver:
    """An Apprise ``json://`` target: records every POSTed JSON document."""

    def __init__(self) -> None:
        received: list[dict] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("Content-Length") or 0)
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.received = received
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/{TOKEN}"

    def wait(self, count: int, timeout_s: float = 30) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(self.received) < count:
            time.sleep(0.05)
        assert len(self.received) >= count, f"{len(self.received)} of {count}: {self.received}"
        return list(self.received)


@pytest.fixture
def receiver():
    target = Receiver()
    yield target
    target.server.shutdown()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def memory_texts(history_db: Path) -> list[str]:
    with sqlite3.connect(history_db) as db:
        rows = db.execute("SELECT new_memory FROM history WHERE new_memory IS NOT NULL")
        return [text for (text,) in rows if len(text) > 12]


def job(config: Path, name: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memsync", "job", name, "--json", "--config", str(config), *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def break_store(qdrant: Path) -> bytes:
    meta = qdrant / "meta.json"
    good = meta.read_bytes()
    meta.write_text("{not json")
    return good


def assert_clean(text: str, texts: list[str]) -> None:
    assert TOKEN not in text
    assert not [memory for memory in texts if memory in text]


def test_a_failing_job_notifies_once_its_recovery_once_and_an_ok_run_after_ok_never(
    deployment, receiver
):
    texts = memory_texts(deployment.paths.history_db)
    assert texts
    deployment.close()
    with_daemon(deployment, f'snapshot_every = "1d"\nnotify = ["{receiver.url}"]\n')
    good = break_store(deployment.paths.qdrant)

    failed = job(deployment.config, "snapshot", "--log-level", "info")
    assert failed.returncode == 11, failed.stderr
    [notice] = receiver.wait(1)
    assert notice["type"] == "failure"
    assert notice["title"].startswith("memsync snapshot on ") and "failed" in notice["title"]
    body = notice["message"]
    assert "job: snapshot (trigger: hand)" in body and "outcome: failed (exit 11)" in body
    assert "meta.json" in body.split("reason: ", 1)[1]  # the command's own reason
    assert "next step: " in body and f"host: {socket.gethostname()}" in body
    assert f"deployment: {deployment.config}" in body
    assert_clean(json.dumps(notice), texts)
    assert_clean(failed.stderr, texts)  # the URL never reaches a log line
    sent = [e for e in events(failed.stderr) if e.get("event") == "notify_sent"]
    assert [(e["target"], e["service"]) for e in sent] == [("daemon.notify[0]", "json")]

    (deployment.paths.qdrant / "meta.json").write_bytes(good)
    recovered = job(deployment.config, "snapshot")
    assert recovered.returncode == 0, recovered.stderr
    notices = receiver.wait(2)
    assert len(notices) == 2 and notices[1]["type"] == "success"
    assert notices[1]["title"].endswith(": recovered")
    assert "outcome: ok (exit 0)" in notices[1]["message"]
    assert "before: failing (failed)" in notices[1]["message"]
    assert "reason: " not in notices[1]["message"]
    assert_clean(json.dumps(notices[1]), texts)

    again = job(deployment.config, "snapshot", "--log-level", "info")
    assert again.returncode == 0, again.stderr
    time.sleep(1)  # the job waited for its notifications before exiting: none was sent
    assert len(receiver.received) == 2
    assert not [e for e in events(again.stderr) if e.get("event", "").startswith("notify_")]


def test_an_unreachable_notify_endpoint_never_fails_the_job(deployment):
    deployment.close()
    url = f"json://127.0.0.1:{closed_port()}/{TOKEN}"
    with_daemon(deployment, f'snapshot_every = "1d"\nnotify = ["{url}", "{url}"]\n')
    good = break_store(deployment.paths.qdrant)
    started = time.monotonic()
    failed = job(deployment.config, "snapshot")
    assert failed.returncode == 11  # the job's own outcome, not the notification's
    (deployment.paths.qdrant / "meta.json").write_bytes(good)
    recovered = job(deployment.config, "snapshot")
    assert recovered.returncode == 0, recovered.stderr
    assert time.monotonic() - started < 60
    for run in (failed, recovered):
        warned = [e for e in events(run.stderr) if e.get("event") == "notify_failed"]
        assert sorted(e["target"] for e in warned) == ["daemon.notify[0]", "daemon.notify[1]"]
        assert all(e["level"] == "warning" and e["service"] == "json" for e in warned)
        assert TOKEN not in run.stderr and str(url) not in run.stderr
    assert json.loads(recovered.stdout)["command"] == "snapshot create"


def test_the_daemon_notifies_when_its_scheduled_job_fails(deployment, receiver, tmp_path):
    deployment.close()
    with_daemon(deployment, f'snapshot_every = "1d"\nnotify = ["{receiver.url}"]\n')
    break_store(deployment.paths.qdrant)
    process = start(deployment.config, Notify(tmp_path))
    try:
        process.wait_event("notify_sent")
        finished = process.wait_event("job_finished")[0]
    finally:
        code, err = stop(process)
    assert code == 0 and finished["outcome"] == "failed"
    [notice] = receiver.received
    assert notice["type"] == "failure" and "job: snapshot (trigger: catch-up)" in notice["message"]
    assert TOKEN not in err and TOKEN not in json.dumps(notice)


@pytest.mark.parametrize(
    ("urls", "bad"),
    [
        ('["ntfy://topic", "bogus://s3cr3t-in-url"]', "daemon.notify[1]"),
        ('["tgram://s3cr3t-in-url"]', "daemon.notify[0]"),
        ('["", "ntfy://topic"]', "daemon.notify[0]"),
        ('"ntfy://s3cr3t-in-url"', "daemon.notify"),
    ],
    ids=["unknown-service", "missing-parts", "empty", "not-a-list"],
)
def test_a_notify_url_apprise_cannot_send_to_exits_10_naming_its_index(deployment, cli, urls, bad):
    deployment.close()
    with_daemon(deployment, f"notify = {urls}\n")
    result = cli("config", "validate", "--json", config=deployment.config)
    assert result.code == 10
    error = json.loads(result.err.strip().splitlines()[-1])
    assert error["code"] == 10 and f"{bad}: " in error["message"]
    assert "s3cr3t" not in result.err  # the value is never echoed: it may hold a token


def test_config_show_counts_the_notify_urls_but_never_shows_them(deployment, cli):
    deployment.close()
    with_daemon(deployment, f'notify = ["ntfy://{TOKEN}", "mailto://u:{TOKEN}@example.com"]\n')
    result = cli("config", "show", "--json", config=deployment.config)
    assert result.code == 0, result.err
    assert result.json()["config"]["daemon"]["notify"] == ["<redacted>", "<redacted>"]
    assert TOKEN not in result.out


def test_a_bulk_deletion_tripping_the_tripwire_is_told_once_without_the_texts(
    make_deployment, receiver
):
    from tests.process.test_tripwire import USER, add_memories

    deployment = make_deployment(count=20)
    add_memories(deployment.memory, USER, 64)
    texts = memory_texts(deployment.paths.history_db)
    deployment.close()
    with_daemon(deployment, f'snapshot_every = "1d"\nnotify = ["{receiver.url}"]\n')
    first = job(deployment.config, "snapshot")
    assert first.returncode == 0, first.stderr
    memory = deployment.reopen()
    memory.delete_all(user_id=USER)  # the bulk deletion mem0 has shipped bugs in
    deployment.close()

    tripped = job(deployment.config, "snapshot")
    assert tripped.returncode == 0, tripped.stderr  # the snapshot itself succeeded
    [notice] = receiver.wait(1)
    assert notice["type"] == "warning", notice
    assert "mass deletion suspected" in notice["title"]
    assert "mass deletion: " in notice["message"]
    assert f"user_id={USER}" in notice["message"]  # the operator needs it for recover --user
    assert_clean(json.dumps(notice), texts)
    quiet = job(deployment.config, "snapshot")  # compares with the tripped one: no new drop
    assert quiet.returncode == 0, quiet.stderr
    time.sleep(1)
    assert len(receiver.received) == 1
