"""Second breaker round on issue 12's backups: each test failed before its fix.

Real deployments (hash embedder), real mem0 deletions, real snapshots, the real CLI.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
import tomllib
from typing import Any

import pytest

from memsync.demo.backups import leave_config_usable
from memsync.erase.ledger import digest
from memsync.snapshot.tripwire import Thresholds, find_drops
from memsync.stores.snapshots import PINNED
from tests.conftest import s3_section
from tests.process.test_cli import run_memsync
from tests.process.test_tripwire import add_memories
from tests.store.test_s3_stalls import StallingRelay


def memsync(config: Any, *argv: str) -> tuple[int, dict[str, Any]]:
    """The CLI as a subprocess with ``--json``; its exit status and JSON document."""
    done = run_memsync(*argv, "--json", "--config", str(config))
    return done.returncode, json.loads(done.stdout or done.stderr)


def test_an_erased_scope_added_after_the_previous_snapshot_does_not_hide_a_drop() -> None:
    """Memories added after the previous snapshot and erased before the next one were never in
    the previous snapshot's counts: taking them out of its total hid a real drop elsewhere."""
    previous = {"total": 56, "user_id": {"u1": 40, "bob": 8, "carol": 8}}
    current = {"total": 40, "user_id": {"u1": 40}}  # bob and carol wiped by a bug
    # zoe: 30 memories added after the previous snapshot, then erased
    erased = {"total": 30, f"user_id:{digest('zoe')}": 30}
    drops = find_drops(previous, current, Thresholds(percent=20, memories=10), erased)
    assert [(d.kind, d.scope_id, d.before, d.after) for d in drops] == [
        ("total", None, 56, 40),
        ("user_id", "bob", 8, 0),  # emptied: named with the total, whatever its size
        ("user_id", "carol", 8, 0),
    ]


def test_an_erasure_of_a_new_user_does_not_mask_a_bulk_deletion(make_deployment: Any) -> None:
    """The same through mem0 and the CLI: a user added after the last snapshot and erased
    (``forget --erase --no-snapshot``), then a bug empties two small users: the total trips."""
    deployment = make_deployment(
        count=40, extra_config="tripwire_percent = 20\ntripwire_memories = 10\n"
    )
    add_memories(deployment.memory, "brk-bob", 8)
    add_memories(deployment.memory, "brk-carol", 8)
    deployment.close()
    code, first = memsync(deployment.config, "snapshot", "create")
    assert code == 0, first
    add_memories(deployment.reopen(), "brk-zoe", 30)  # after the snapshot
    deployment.close()
    code, erased = memsync(
        deployment.config, "forget", "--user", "brk-zoe", "--erase", "--yes", "--no-snapshot"
    )
    assert code == 0, erased
    memory = deployment.reopen()
    memory.delete_all(user_id="brk-bob")  # the bulk-deletion bug: two users of 8 memories
    memory.delete_all(user_id="brk-carol")
    deployment.close()
    code, second = memsync(deployment.config, "snapshot", "create")
    assert code == 0, second
    tripwire = second["tripwire"]
    assert tripwire["previous"] == first["id"]
    assert tripwire["tripped"] is True, tripwire
    assert tripwire["pinned"] == first["id"]
    assert [d["scope"] for d in tripwire["drops"]] == [None, "user_id=brk-bob", "user_id=brk-carol"]
    assert [d["deleted"] for d in tripwire["drops"]] == [16, 8, 8]  # through mem0: no error


def test_recover_never_brings_back_an_erased_memory_whose_history_rows_are_gone(
    deployment: Any,
) -> None:
    """docs: erased memories are never brought back. The erasure ledger knows the ids even
    when the live history lost their rows (mem0's ``reset()`` empties the table): recover
    from a snapshot made before the erasure must still leave them."""
    deployment.close()
    code, made = memsync(deployment.config, "snapshot", "create")
    assert code == 0, made
    verified = run_memsync("snapshot", "verify", made["id"], "--config", str(deployment.config))
    assert verified.returncode == 0, verified.stderr
    user = "alice"  # a seeded user (memsync.demo.deployment.USERS)
    code, erased = memsync(
        deployment.config, "forget", "--user", user, "--erase", "--yes", "--no-snapshot"
    )
    assert code == 0, erased
    gone = set(erased["deleted"])
    assert gone
    with sqlite3.connect(deployment.paths.history_db) as connection:
        connection.execute("DELETE FROM history")  # what mem0's reset() does to the history
    code, plan = memsync(
        deployment.config, "recover", "--user", user, "--from", made["id"], "--dry-run"
    )
    assert code == 0, plan
    statuses = {m["memory_id"]: m["status"] for m in plan["memories"]}
    assert set(statuses) == gone
    assert set(statuses.values()) == {"erased"}, statuses


def _bucket_down(make_deployment: Any) -> Any:
    """A closed deployment whose ``[s3]`` endpoint is a port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    deployment = make_deployment(count=5, extra_config=s3_section(endpoint, "gone", "memsync/b2"))
    deployment.close()
    deployment.endpoint = endpoint
    return deployment


@pytest.mark.parametrize("command", ["pin", "unpin"])
def test_pin_dry_run_with_the_bucket_down_says_what_the_run_would_leave_undone(
    make_deployment: Any, cli: Any, command: str
) -> None:
    """``pin --dry-run`` said "would pin ID on local" and exited 0 while the same run exits 11
    (the bucket's copy not done): the dry run must predict that, and write nothing."""
    d = _bucket_down(make_deployment)
    snapshot_id = cli("snapshot", "create", "--json", config=d.config).json()["id"]
    dry = cli("snapshot", command, snapshot_id, "--dry-run", "--json", config=d.config)
    assert dry.code == 11 and dry.out == "", (dry.code, dry.out)
    error = json.loads(dry.err.strip().splitlines()[-1])
    assert "snapshot directory only" in error["message"] and d.endpoint in error["message"]
    assert not (d.paths.root / "snapshots" / snapshot_id / PINNED).exists()
    run = cli("snapshot", command, snapshot_id, "--json", config=d.config)
    assert run.code == 11 and run.out == ""


def test_pin_of_a_remote_only_snapshot_with_the_bucket_down_is_exit_11(
    make_deployment: Any, cli: Any
) -> None:
    """Held: a snapshot only the (unreachable) bucket stores is exit 11 naming the endpoint,
    never exit 2 ("stored nowhere"), with nothing on stdout."""
    d = _bucket_down(make_deployment)
    result = cli("snapshot", "pin", "20200101T000000Z", "--json", config=d.config)
    assert result.code == 11 and result.out == ""
    assert d.endpoint in json.loads(result.err.strip().splitlines()[-1])["message"]


def _doctor_s3(config: Any) -> tuple[int, list[dict[str, Any]], float]:
    started = time.monotonic()
    done = run_memsync("doctor", "--json", "--config", str(config))
    assert "Traceback" not in done.stderr, done.stderr
    results = [r for r in json.loads(done.stdout)["results"] if r["code"].startswith("s3-")]
    return done.returncode, results, time.monotonic() - started


def test_doctor_against_an_endpoint_that_accepts_and_never_answers(
    make_deployment: Any, s3_endpoint: str, bucket: str
) -> None:
    """Held: every request stalled is ``s3-reachable`` error "no answer in time", bounded by
    ``[s3] timeout_s`` (botocore's retries included), and nothing else is claimed."""
    relay = StallingRelay(s3_endpoint, rb".")
    try:
        d = make_deployment(count=5, extra_config=s3_section(relay.endpoint, bucket, "memsync/b2"))
        d.close()
        d.config.write_text(d.config.read_text() + "timeout_s = 0.3\n")
        code, results, took = _doctor_s3(d.config)
    finally:
        relay.close()
    assert code == 3 and took < 30
    assert [(r["code"], r["status"]) for r in results] == [("s3-reachable", "error")]
    assert "no answer in time" in results[0]["message"]


def test_doctor_with_a_bucket_setting_read_that_stalls_reports_each_code_once(
    make_deployment: Any, s3_endpoint: str, bucket: str
) -> None:
    """The list call answers, the versioning read stalls: doctor reported ``s3-access`` twice,
    "ok" (the credentials work) and "error" (the settings read): one code, one result."""
    relay = StallingRelay(s3_endpoint, rb"^GET /[^ ]*\?versioning")
    try:
        d = make_deployment(count=5, extra_config=s3_section(relay.endpoint, bucket, "memsync/b2"))
        d.close()
        d.config.write_text(d.config.read_text() + "timeout_s = 0.3\n")
        code, results, _ = _doctor_s3(d.config)
    finally:
        relay.close()
    codes = [r["code"] for r in results]
    assert len(codes) == len(set(codes)), results
    assert code == 3
    failed = [r for r in results if r["status"] == "error"]
    assert failed and "versioning" in failed[0]["message"], results


@pytest.mark.parametrize(
    ("tail", "kept"),
    [
        ('[daemon]  # the demo\ncheck_every = "2s"\n[app]  # after daemon\nmax_downtime_s = 7\n',
         {"max_downtime_s": 7}),
        ('[daemon]\ncheck_every = "2s"\n[app]\nstart_command = ["true"]\n'
         'stop_command = ["sh", "-c", """\n[daemon]\nsystemctl stop app\n"""]\n',
         {"start_command": ["true"], "stop_command": ["sh", "-c", "[daemon]\nsystemctl stop app\n"]}),
    ],
    ids=["header-with-comment", "header-inside-a-multiline-string"],
)  # fmt: skip
def test_the_demos_config_rewrite_keeps_every_other_section(
    deployment: Any, tail: str, kept: dict[str, Any]
) -> None:
    """``leave_config_usable`` took ``[daemon]  # note`` for no header (the daemon section
    stayed) and a ``[daemon]`` line inside a multiline string for one (it commented out a
    value of ``[app]``). The file must stay valid, with ``[app]`` as it was."""
    deployment.close()
    deployment.config.write_text(deployment.config.read_text() + tail)
    assert leave_config_usable(deployment.config) == ["daemon"]
    valid = run_memsync("config", "validate", "--config", str(deployment.config))
    assert valid.returncode == 0, valid.stderr
    parsed = tomllib.loads(deployment.config.read_text())
    assert "daemon" not in parsed and parsed["app"] == kept
