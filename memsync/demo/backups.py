"""The demo's act 10: backups that catch a bulk deletion, and recovery of exactly what was lost.

An operator forgets the wrong user (``memsync forget --user``) and ``memsync recover`` brings
that user's memories back from the last snapshot, with nothing else touched. Then a bulk
deletion the way mem0 has shipped it (``Memory.delete_all`` for one user: mem0ai/mem0 #3746,
#3928) empties another user; the next ``snapshot create`` trips the mass-deletion tripwire and
pins the snapshot before the drop, retention keeps it for that reason, and ``recover`` brings
the user back from it: every memory, the two updated after that snapshot with their last text
from history, embedded again by the app's embedder.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsync.demo import deployment as build

MISTAKEN_USER = "chandra"  # forgotten by mistake
BULK_USER = "bob"  # wiped by a delete_all bug

Run = Callable[..., subprocess.CompletedProcess[str]]


def backups_act(
    paths: build.Paths,
    config: Path,
    memsync: Run,
    say: Callable[[str], None],
    fail: type[Exception],
) -> None:
    """Undo a mistaken forget with recover; trip the tripwire with a bulk deletion; recover."""

    def run_json(*args: str, codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
        result = memsync(config, *args, "--json")
        if result.returncode not in codes:
            raise fail(f"memsync {' '.join(args)} exited {result.returncode}: {result.stderr}")
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    baseline = run_json("snapshot", "create")["id"]
    before = _user_ids(paths)
    say(f"   snapshot {baseline}: {len(before[MISTAKEN_USER])} memories of {MISTAKEN_USER}")

    forgotten = run_json("forget", "--user", MISTAKEN_USER, "--yes")
    say(
        f"   a mistaken forget: {_count(forgotten)} of {MISTAKEN_USER}'s memories deleted "
        f"(forget took safety snapshot {forgotten.get('safety_snapshot')} first)"
    )
    if _user_ids(paths)[MISTAKEN_USER]:
        raise fail(f"forget --user {MISTAKEN_USER} left memories")
    planned = run_json("recover", "--user", MISTAKEN_USER, "--from", baseline, "--dry-run")
    say(f"   recover --dry-run would bring back {planned['counts'].get('recover', 0)}")
    recovered = run_json("recover", "--user", MISTAKEN_USER, "--from", baseline)
    _expect_back(paths, before, MISTAKEN_USER, recovered, say, fail)

    say(f"\na bulk deletion bug: mem0's delete_all(user_id={BULK_USER!r}) through mem0 itself")
    memory = build.open_memory(paths)
    try:
        updated = {
            memory_id: f"{BULK_USER} changed this after the last snapshot ({n})"
            for n, memory_id in enumerate(sorted(before[BULK_USER])[:2])
        }
        for memory_id, text in updated.items():
            memory.update(memory_id, text)
        say(f"   {len(updated)} of {BULK_USER}'s memories updated since the last snapshot first")
        memory.delete_all(user_id=BULK_USER)
    finally:
        build.close_memory(memory)
    if _user_ids(paths)[BULK_USER]:
        raise fail(f"delete_all left memories of {BULK_USER}")
    created = run_json("snapshot", "create")
    tripwire = created.get("tripwire") or {}
    for finding in created.get("findings", []):
        say(f"   WARNING {finding['code']}: {finding['message']}")
    pinned = tripwire.get("pinned")
    if not tripwire.get("tripped") or not pinned:
        raise fail(f"the tripwire did not trip on the bulk deletion: {tripwire}")
    say(f"   snapshot {created['id']} tripped the tripwire; {pinned} (before the drop) is pinned")
    plan = run_json("snapshot", "prune", "--dry-run")
    kept = next(d for d in plan["decisions"] if d["id"] == pinned)
    say(f"   retention keeps {pinned}: {', '.join(kept['reasons'])}")
    if not kept["keep"] or not any(r.startswith("pinned") for r in kept["reasons"]):
        raise fail(f"retention would not keep the pinned snapshot: {kept}")
    recovered = run_json("recover", "--user", BULK_USER, "--from", pinned)
    _expect_back(paths, before, BULK_USER, recovered, say, fail)
    again = {m["memory_id"] for m in recovered["memories"] if m.get("re_embedded")}
    texts = _texts(paths, BULK_USER)
    say(
        f"   {len(again)} of them with their last text from history, embedded again by the "
        "app's embedder"
    )
    if again != set(updated) or any(texts.get(m) != text for m, text in updated.items()):
        raise fail(f"recover of {BULK_USER} did not bring back the updated texts: {again}")


def _expect_back(
    paths: build.Paths,
    before: dict[str, set[str]],
    user: str,
    report: dict[str, Any],
    say: Callable[[str], None],
    fail: type[Exception],
) -> None:
    """Every memory of ``user`` is back with its id; no other user's memories changed."""
    now = _user_ids(paths)
    errors = (report.get("check_after") or {}).get("errors")
    say(
        f"   recover (route {report.get('route')}): {report['counts'].get('recovered', 0)} "
        f"memories of {user} back with their ids, scopes and metadata; check: {errors} errors"
    )
    if now[user] != before[user] or errors != 0:
        raise fail(f"recover of {user}: {len(now[user])} of {len(before[user])}, errors {errors}")
    changed = [u for u in before if u != user and now[u] != before[u] and u != MISTAKEN_USER]
    if changed:
        raise fail(f"recover of {user} changed other users' memories: {changed}")


def _user_ids(paths: build.Paths) -> dict[str, set[str]]:
    """The live memory ids of every demo user, through mem0's own get_all."""
    memory = build.open_memory(paths)
    try:
        return {
            user: {
                item["id"]
                for item in memory.get_all(filters={"user_id": user}, top_k=100_000)["results"]
            }
            for user in build.USERS
        }
    finally:
        build.close_memory(memory)


def _texts(paths: build.Paths, user: str) -> dict[str, str]:
    """The live text of each memory of ``user``, through mem0's own get_all."""
    memory = build.open_memory(paths)
    try:
        found = memory.get_all(filters={"user_id": user}, top_k=100_000)["results"]
        return {item["id"]: item["memory"] for item in found}
    finally:
        build.close_memory(memory)


def _count(report: dict[str, Any]) -> int:
    """How many memories a ``forget --json`` report deleted."""
    return len(report["deleted"])


def leave_config_usable(config: Path) -> list[str]:
    """Comment out the sections that point at what the demo stopped; return their names.

    ``[s3]`` named the S3 server the demo ran on 127.0.0.1 (gone when it exits) and
    ``[daemon]`` a 2-second check schedule nobody runs: left in, every command reaching the
    bucket would fail and ``status`` would call the check overdue. Writes the file once.
    """
    lines = config.read_text(encoding="utf-8").splitlines()
    out, section, dropped = [], "", []
    for index, line in enumerate(lines):
        table = _table(lines, index)
        if table is not None:
            section = table
            if section in STOPPED and section not in dropped:
                dropped.append(section)
                out.append(f"# {section}: {STOPPED[section]}")
        out.append(f"# {line}" if section in STOPPED and line else line)
    config.write_text("\n".join(out) + "\n", encoding="utf-8")
    return dropped


HEADER = re.compile(r"""\s*\[\[?\s*["']?([A-Za-z0-9_-]+)["']?\s*(?:\.[^\]]*)?\]\]?\s*(?:#.*)?""")


def _table(lines: list[str], index: int) -> str | None:
    """The top-level table a header line opens (``[s3.x]  # note`` is ``s3``), else None.

    A line that only looks like one inside a multiline string or array is none: the text
    before a real header is a whole TOML document.
    """
    match = HEADER.fullmatch(lines[index])
    if match is None:
        return None
    try:
        tomllib.loads("\n".join(lines[:index]))
    except tomllib.TOMLDecodeError:
        return None
    return match.group(1)


STOPPED = {
    "s3": "the demo's S3 server on 127.0.0.1 stopped when the demo ended",
    "daemon": "the demo's 2-second schedule; nobody runs this daemon",
}
