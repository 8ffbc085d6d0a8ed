"""The demo's act 9: every maintenance act while the app runs, through its agent.

The app (``memsync.demo.app``, a real process with one ``mem0.Memory`` and the offline MiniLM
embedder) attaches ``memsync.agent`` and writes for two users every 50 ms. memsync then prunes,
erases a third user, reconciles a restore mix-up and takes a quiesced snapshot, each through the
app's own Memory (route "agent"); the app reports how many of its writes failed (none).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memsync.demo import deployment as build
from memsync.demo.app import AppProcess

ERASED_USER = "dmitri"
APP_USERS = ("alice", "bob")
SECRETS = (  # texts no other memory holds, so a byte search proves the erasure
    "dmitri's locker code is 4471-XK-09",
    "dmitri's insurance policy number is IP-55102-77",
    "dmitri was diagnosed with a rare allergy to kiwi in 2019",
)


def prepare(paths: build.Paths) -> tuple[dict[str, str], list[str], list[str]]:
    """Before the app starts: expired memories, a restore mix-up, and the erased user's texts.

    Returns (the erased user's ``{memory_id: text}``, ids now expired, ids resurrected).
    """
    memory = build.open_memory(paths)
    try:
        for secret in SECRETS:
            memory.add(secret, user_id=ERASED_USER, infer=False)
        listed = memory.get_all(filters={"user_id": ERASED_USER}, top_k=100_000, show_expired=True)
        texts = {item["id"]: item["memory"] for item in listed["results"]}
        yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
        expired = [
            memory.add(
                f"a promo code valid until yesterday, number {n}",
                user_id="eun-ji",
                infer=False,
                expiration_date=yesterday,
            )["results"][0]["id"]
            for n in range(5)
        ]
        chandra = memory.get_all(filters={"user_id": "chandra"}, top_k=3)["results"]
    finally:
        build.close_memory(memory)
    keep = build.copy_qdrant(paths, paths.root / "qdrant-before-live-mixup")
    memory = build.open_memory(paths)
    try:
        doomed = [item["id"] for item in chandra[:2]]
        for memory_id in doomed:
            memory.delete(memory_id)
    finally:
        build.close_memory(memory)
    build.put_back_qdrant(paths, keep)
    shutil.rmtree(keep)
    return texts, expired, doomed


def live_act(
    paths: build.Paths,
    config: Path,
    memsync: Callable[..., Any],
    say: Callable[[str], None],
    fail: Callable[[str], Exception],
) -> None:
    """Run act 9 (see the module docstring); raise ``fail(...)`` when an expectation fails."""
    texts, expired, doomed = prepare(paths)
    say(
        f"before the app starts: {len(expired)} memories expired yesterday, and a Qdrant copy put "
        f"back after 2 deletes (they are resurrected); {ERASED_USER} has {len(texts)} memories"
    )
    sock = paths.root / "run" / "memsync-agent.sock"
    with AppProcess(
        paths.root, agent=sock, interval=0.05, users=APP_USERS, embedder="memsync_minilm"
    ) as app:
        say(f"the app (pid {app.pid}) holds the store, writes every 50 ms, and runs")
        say(f"   from memsync.agent import attach; attach(memory)   # socket {sock}")
        routes = {}
        for args in (
            ("prune", "--json"),
            ("forget", "--user", ERASED_USER, "--erase", "--yes", "--json"),
            ("reconcile", "--json"),
            ("snapshot", "create", "--json"),
        ):
            result = memsync(config, *args)
            if result.returncode != 0:
                raise fail(f"{' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
            report = json.loads(result.stdout)
            routes[args[0]] = report.get("route")
            say(f"   -> route {report.get('route')}: {_summary(args[0], report)}")
        _purge_erased_user(paths, config, memsync, say, fail)
        view = app.view()
        gone = set(expired) | set(texts) | set(doomed)
        if view & gone:
            raise fail(f"the app still sees {sorted(view & gone)[:3]}")
        say("   the app's own get_all no longer returns any pruned, erased or resurrected memory")
        checked = memsync(config, "check", "--json")
        errors = json.loads(checked.stdout)["counts"]["errors"]
        say(f"   check while the app writes: {errors} errors")
        stats = app.stop()
    if set(routes.values()) != {"agent"} or errors:
        raise fail(f"routes {routes}, check errors {errors}")
    say(
        f"the app stopped: {stats['writes']} writes, {stats['failures']} failed; write latency "
        f"p50 {stats['latency_ms']['p50']} ms, p99 {stats['latency_ms']['p99']} ms"
    )
    if stats["failures"]:
        raise fail(f"the app's writes failed: {stats['errors']}")
    hits = [
        str(p)
        for p in paths.root.rglob("*")
        if p.is_file() and any(s.encode() in p.read_bytes() for s in SECRETS)
    ]
    say(
        f"   byte search for {ERASED_USER}'s {len(SECRETS)} secrets in every file: {len(hits)} hits"
    )
    if hits:
        raise fail(f"erased text still in {hits[:3]}")


def _summary(command: str, report: dict[str, Any]) -> str:
    if command == "prune":
        return f"pruned {len(report.get('deleted', []))} expired memories through the app's Memory"
    if command == "forget":
        return f"erased {len(report.get('deleted', []))} memories of {ERASED_USER}"
    if command == "reconcile":
        kinds = sorted({a["kind"] for a in report.get("actions", [])})
        return f"{len(report.get('actions', []))} actions ({', '.join(kinds)})"
    tripped = (report.get("tripwire") or {}).get("tripped")
    return (
        f"snapshot {report.get('id')}, quiesced: {report.get('quiesced')}; the erasure did not "
        f"trip the mass-deletion tripwire: {not tripped}"
    )


def _purge_erased_user(
    paths: build.Paths,
    config: Path,
    memsync: Callable[..., Any],
    say: Callable[[str], None],
    fail: Callable[[str], Exception],
) -> None:
    """``--erase`` names the snapshots still holding the user; ``purge-memory`` rewrites them."""
    result = memsync(config, "snapshot", "purge-memory", "--user", ERASED_USER, "--yes", "--json")
    if result.returncode != 0:
        raise fail(f"purge-memory exited {result.returncode}: {result.stderr.strip()}")
    report = json.loads(result.stdout)
    holding = [
        str(p)
        for p in (paths.root / "snapshots").rglob("*")
        if p.is_file() and ERASED_USER.encode() in p.read_bytes()
    ]
    say(
        f"   -> {len(report.get('rewritten', []))} snapshots rewritten without {ERASED_USER}'s "
        f"memories; files under snapshots/ naming {ERASED_USER}: {len(holding)}"
    )
    if holding:
        raise fail(f"snapshots still name {ERASED_USER}: {holding[:3]}")
