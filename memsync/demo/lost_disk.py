"""The demo's act 13: a lost disk under continuous protection, restored to the last second.

A small deployment of its own (``lost-disk/``, the hash embedder) takes its daily snapshot,
is protected (``memsync protect``: WAL mode and Litestream's configuration, a directory
replica) and the daemon runs Litestream. The demo's app adds a memory every 50 ms, logging each
acknowledged add with its time and memory id (``--acks``). At a moment chosen at random the disk
is lost: the app, the daemon and Litestream killed (SIGKILL), the store directories (the Qdrant
directory and history.db's) deleted. ``memsync restore --at latest --force`` brings both stores
back from the replicas, and every acknowledged add is looked up through mem0: the act shows how
many were lost (fails over 10 s of them, or a gap before a kept one) against what restoring the
daily snapshot would have lost (every add since it).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsync.demo import deployment as build
from memsync.demo.app import AppProcess

Run = Callable[..., subprocess.CompletedProcess[str]]
SEEDED = 100
RPO_S = 10.0  # issue 27's promise: a lost disk loses at most 10 s of memories


def litestream_binary() -> str | None:
    """Litestream on PATH, else the one ``make tools`` fetched into the checkout's build/tools/."""
    found = shutil.which("litestream")
    if found:
        return found
    tools = Path(__file__).resolve().parents[2] / "build" / "tools"
    fetched = sorted(tools.glob("litestream-*/litestream"))
    return str(fetched[-1]) if fetched else None


def lost_disk_act(
    root: Path,
    memsync: Run,
    say: Callable[[str], None],
    fail: type[Exception],
    rng: random.Random | None = None,
) -> dict[str, Any]:
    """Protect, write, lose the disk, ``restore --at latest``; return the counts shown."""
    binary = litestream_binary()
    if binary is None:
        raise fail("no Litestream binary: run `make tools` (or put litestream 0.3.x on PATH)")
    paths = build.Paths(root)
    replica = root / "replica"  # another disk, in production
    config = build.write_memsync_config(
        paths,
        embedder="memsync_hash",
        extra=f'\n[protect]\nlitestream = "{binary}"\ndirectory = "{replica}"\n'
        + build.app_table(),
        app_python=None,
    )

    def run_json(*args: str) -> dict[str, Any]:
        result = memsync(config, *args, "--json")
        if result.returncode != 0:
            raise fail(f"memsync {' '.join(args)} exited {result.returncode}: {result.stderr}")
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    memory = build.open_memory(paths, embedder="memsync_hash")
    try:
        facts = random.Random(27)
        for n in range(SEEDED):
            memory.add(build.fact(facts), user_id=build.USERS[n % len(build.USERS)], infer=False)
    finally:
        build.close_memory(memory)
    say(f"a deployment of {SEEDED} memories in {root.name}/ (the hash embedder)")
    daily = run_json("snapshot", "create")
    run_json("snapshot", "verify", daily["id"])
    daily_at = time.time()
    say(f"   the daily snapshot: {daily['id']} (verified); nothing else backs it up until tomorrow")
    protected = run_json("protect")
    say(
        f"   protect: {len(protected['replicas'])} SQLite files in WAL mode, each replicated to "
        f"{replica.name}/ ({protected['litestream_binary']})"
    )
    log = (root / "daemon.log").open("w", encoding="utf-8")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "memsync", "--config", str(config), "daemon"],
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,  # its own group: Litestream, its child, dies with it below
    )
    acks = root / "acks.log"
    try:
        status = _replicating(config, daemon, fail)
        say(
            "$ memsync daemon   (runs Litestream; protect --status: every file replicated, "
            f"largest lag {max(f['lag_s'] or 0.0 for f in status['files']):.1f} s)"
        )
        app = AppProcess(root, adds_only=True, acks=acks)
        say(f"the app (pid {app.pid}) adds a memory every 50 ms, each acknowledged add logged")
        wanted = (rng or random.SystemRandom()).randint(60, 140)
        _wait_for(lambda: len(_acked(acks)) >= wanted, 60, app, fail)
        lost_at = time.time()
        app.process.kill()
        os.killpg(daemon.pid, signal.SIGKILL)
        app.process.communicate(timeout=30)
        daemon.wait(timeout=30)
    finally:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(timeout=30)
        log.close()
    shutil.rmtree(paths.qdrant)
    shutil.rmtree(paths.mem0_dir)
    acked = [(at, memory_id) for at, memory_id in _acked(acks) if at <= lost_at]
    say(
        f"the disk is lost {lost_at - daily_at:.1f} s after the daily snapshot, mid-write: the "
        f"app, the daemon and Litestream killed, {paths.qdrant.name}/ and "
        f"{paths.mem0_dir.name}/ (history.db) deleted; {len(acked)} adds had been acknowledged"
    )
    report = run_json("restore", "--at", "latest", "--force")
    for restored in report["at"]["files"]:
        say(f"   {restored['label']}: restored to {restored['shipped_at']}")
    seam = report["at"]["seam"]
    say(
        f"   meta.json from {report['at']['meta_json']}; the seam (the write in flight, in one "
        f"store only): {len(seam)} memory(ies), "
        + ("settled by reconcile" if report["at"]["reconciled"] else "none to settle")
    )
    if seam and not report["at"]["reconciled"]:
        raise fail(f"restore --at left the seam unsettled: {seam}")
    checked = memsync(config, "check")
    say("\n".join("   " + line for line in checked.stdout.splitlines()))
    if checked.returncode != 0:
        raise fail(f"check after restore --at exited {checked.returncode}: {checked.stderr}")
    memory = build.open_memory(paths, embedder="memsync_hash")
    try:
        kept = {memory_id for _, memory_id in acked if memory.get(memory_id) is not None}
    finally:
        build.close_memory(memory)
    lost = [(at, memory_id) for at, memory_id in acked if memory_id not in kept]
    newest_kept = max((at for at, m in acked if m in kept), default=daily_at)
    window = lost_at - min((at for at, _ in lost), default=lost_at)
    say(
        f"   through mem0: {len(kept)} of the {len(acked)} acknowledged adds are back; "
        f"{len(lost)} lost, all in the last {window:.1f} s before the loss (the newest kept "
        f"{lost_at - newest_kept:.1f} s before it)"
    )
    say(
        f"   restoring the daily snapshot instead would have lost all {len(acked)} "
        f"({lost_at - daily_at:.1f} s of writes; a day of them in production)"
    )
    holes = [memory_id for at, memory_id in lost if at < newest_kept]
    if window > RPO_S or holes:
        raise fail(
            f"restore --at latest lost {len(lost)} memories over {window:.1f} s (at most "
            f"{RPO_S:.0f} s), {len(holes)} of them before a kept one"
        )
    return {"acked": len(acked), "lost": len(lost), "window_s": window, "daily_lost": len(acked)}


def _acked(acks: Path) -> list[tuple[float, str]]:
    """The app's acknowledged adds: (unix seconds, memory_id); a torn last line left out."""
    if not acks.is_file():
        return []
    rows = [line.split() for line in acks.read_text(encoding="utf-8").splitlines()]
    return [(float(row[0]), row[1]) for row in rows if len(row) == 2 and len(row[1]) == 36]


def _replicating(
    config: Path, daemon: subprocess.Popen[bytes], fail: type[Exception]
) -> dict[str, Any]:
    """Poll ``memsync protect --status`` (unnarrated) until every file is replicated; its document."""
    command = [sys.executable, "-m", "memsync", "--config", str(config), "protect", "--status"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise fail(f"the daemon exited {daemon.returncode} (see its daemon.log)")
        done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=120)
        if done.returncode == 0:
            document: dict[str, Any] = json.loads(done.stdout)
            return document
        time.sleep(0.3)
    raise fail("Litestream replicated nothing in 60 s (see the daemon.log)")


def _wait_for(
    ready: Callable[[], bool], timeout_s: float, app: AppProcess, fail: type[Exception]
) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if app.process.poll() is not None or time.monotonic() > deadline:
            raise fail(f"the app stopped adding memories: {app.log_text()[-1000:]}")
        time.sleep(0.05)
