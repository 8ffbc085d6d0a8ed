"""Breaker findings on the queue (``pending.json``, ``memsync pending apply``): each test fails today.

Real deployments (hash embedder), the real CLI, a real SIGKILL (tests/breaker/killat.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsync.routes import queue as pending

ROOT = Path(__file__).resolve().parents[2]
REQUESTED_BY = {"user": "ops", "uid": 0, "pid": 1, "argv": []}


def _scope_targets(cli: Any, config: Path, user: str) -> list[str]:
    result = cli("forget", "--user", user, "--dry-run", "--json", config=config)
    assert result.code == 0, result.err
    return list(result.json()["targets"])


def _text_rows(history_db: Path, memory_ids: list[str]) -> int:
    marks = ",".join("?" * len(memory_ids))
    with sqlite3.connect(f"file:{history_db}?mode=ro", uri=True) as connection:
        row = connection.execute(
            f"SELECT count(*) FROM history WHERE memory_id IN ({marks}) "
            "AND (old_memory IS NOT NULL OR new_memory IS NOT NULL)",
            memory_ids,
        ).fetchone()
    return int(row[0])


def _write_queue(state_dir: Path, requests: list[dict[str, Any]]) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    document = {"version": 1, "requests": requests}
    (state_dir / pending.PENDING_FILE).write_text(json.dumps(document), encoding="utf-8")


def test_queued_erasure_killed_between_delete_and_erase_is_dropped_with_text_left(
    deployment: Any, cli: Any
) -> None:
    """SIGKILL ``pending apply`` after the deletes, before ``erase_texts``; apply again.

    Promise (pending.md): a request leaves the queue only once applied and proven; an erasure
    removes the memory's text from history. Today the second apply finds no point left for
    the user, calls the request "applied" and removes it, while history still holds the texts.
    """
    targets = _scope_targets(cli, deployment.config, "alice")
    assert targets
    deployment.close()
    now = datetime.now(UTC)
    pending.add(deployment.paths.state, pending.new_request("erase", now, user_id="alice"))
    killed = subprocess.run(
        [sys.executable, "-m", "tests.breaker.killat", "memsync.erase.apply:erase_texts", "--",
         "pending", "apply", "--json", "--config", str(deployment.config)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert _text_rows(deployment.paths.history_db, targets) > 0  # deleted, not yet erased

    again = cli("pending", "apply", "--json", config=deployment.config)

    still_queued = [r.id for r in pending.load(deployment.paths.state)]
    texts_left = _text_rows(deployment.paths.history_db, targets)
    assert still_queued or texts_left == 0, (
        f"the erasure left the queue as {again.json()['requests'][0]['status']!r} "
        f"(exit {again.code}) while {texts_left} history rows still hold alice's texts"
    )


def test_queued_request_of_unknown_kind_is_not_executed_as_a_forget(
    deployment: Any, cli: Any
) -> None:
    """A hand-edited request ``"kind": "nuke"`` for user bob: memsync must refuse it.

    Promise (routes/queue.py): kinds are forget | erase | prune; a file that is not a version-1
    queue document is exit 11 and never acted on. Today the request is applied as a forget:
    bob's memories are deleted (no safety snapshot) and the request is reported "applied".
    """
    before = _scope_targets(cli, deployment.config, "bob")
    assert before
    deployment.close()
    request = {"id": "hand-edited", "kind": "nuke", "user_id": "bob",
               "requested_at": "2026-01-01T00:00:00Z", "requested_by": REQUESTED_BY}  # fmt: skip
    _write_queue(deployment.paths.state, [request])

    applied = cli("pending", "apply", "--json", config=deployment.config)

    after = _scope_targets(cli, deployment.config, "bob")
    assert after == before, (
        f"pending apply exit {applied.code} deleted {len(before) - len(after)} of bob's "
        "memories for a request of unknown kind 'nuke'"
    )


def test_a_queue_entry_with_a_bad_date_does_not_crash_status_and_pending_list(
    deployment: Any, cli: Any
) -> None:
    """``requested_at: "yesterday"`` in pending.json: status and pending list exit 1 (a bug).

    Promise (exit-codes.md, pending.md): an unreadable queue is exit 11 naming the file, and
    ``status`` shows the queue as unreadable (exit 0). Today both exit 1 ("unexpected
    ValueError: Invalid isoformat string"), and so do doctor and the daemon at start.
    """
    deployment.close()
    request = {"id": "bad-date", "kind": "forget", "user_id": "nobody",
               "requested_at": "yesterday", "requested_by": REQUESTED_BY}  # fmt: skip
    _write_queue(deployment.paths.state, [request])

    status = cli("status", "--json", config=deployment.config)
    listing = cli("pending", "list", "--json", config=deployment.config)

    assert (status.code, listing.code) != (1, 1) and 1 not in (status.code, listing.code), (
        f"status exit {status.code}, pending list exit {listing.code}: {listing.err.strip()}"
    )
