"""The demo (``make demo``): a real mem0 deployment built offline, then memsync working on it.

1. builds a deployment with mem0's own API (2,000+ memories, 5 users, 3 agents, updates,
   deletes, metadata, expiration dates) with the offline MiniLM embedder;
2. runs ``memsync doctor`` and ``memsync check`` on it (no error findings);
3. takes a snapshot, uploads it to an S3 protocol server it starts on 127.0.0.1 (moto), and
   verifies the remote copy;
4. reproduces each way the stores drift, through mem0 itself where the field does, and shows
   ``memsync check`` naming each with its code and memory id;
5. restores the snapshot of act 3 over the wreck;
6. reproduces a restore mix-up (an older Qdrant copy over newer history) and settles it with
   ``memsync reconcile --dry-run`` and ``memsync reconcile``, ending with a clean check;
7. prunes expired memories, and forgets one with ``--erase`` (its snapshots purged too), proven by
   a byte search of every file;
8. runs the daemon for a few seconds and shows ``memsync status``;
9. starts the app as a real process with ``memsync.agent`` attached, writing continuously, and
   prunes, erases a user, reconciles and snapshots through it (``memsync.demo.live``);
10. undoes a mistaken ``forget --user`` with ``memsync recover``, then reproduces a bulk
   deletion (mem0's ``delete_all`` for one user), which trips the mass-deletion tripwire and
   pins the snapshot before it, and recovers that user from it (``memsync.demo.backups``);
11. builds a second deployment as mem0's REST server runs it (Postgres with pgvector, started by
   the demo, and a history.db), then checks it, snapshots it to S3, restores it after drift,
   reconciles a ``pg_restore`` of an older table, and forgets a memory while its app writes
   (``memsync.demo.pgvector_act``);
12. migrates the deployment with ``memsync migrate`` to pgvector (vectors copied) and to a
   second embedder (256 dims, a new embedded Qdrant), each verified and checked clean, then
   switches it to the second (``migrate --switch``; ``memsync.demo.migrate_act``);
13. protects a small deployment of its own (``memsync protect``, Litestream under the daemon),
   loses its disk while the app adds a memory every 50 ms (the store directories deleted at a
   random moment), restores it with ``memsync restore --at latest`` and counts, memory by
   memory, the acknowledged adds lost against what the daily snapshot would have lost
   (``memsync.demo.lost_disk``; ``make tools`` fetches Litestream).

Every memsync step runs the real CLI as a subprocess. Exits 0 only when every expectation
holds; the deployment is left in ``$MEMSYNC_DEMO_DIR`` (default ``./demo-run``) to look at.
The next run starts that directory over, and refuses (exit 10) a non-empty one it did not make.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memsync.demo import backups, live, lost_disk, migrate_act, pgvector_act
from memsync.demo import deployment as build

MEMORIES = int(os.environ.get("MEMSYNC_DEMO_MEMORIES", "2000"))


class DemoFailed(Exception):
    """An expectation of the demo did not hold."""


def say(text: str = "") -> None:
    """Print one line of the narrative."""
    print(text, flush=True)


def heading(text: str) -> None:
    """Print a section heading."""
    say()
    say(f"== {text} " + "=" * max(3, 70 - len(text)))


def memsync(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real ``memsync`` CLI as a subprocess; return its result."""
    command = [sys.executable, "-m", "memsync", "--config", str(config), *args]
    say(f"$ memsync {' '.join(args)}")
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)


def check_json(config: Path) -> tuple[int, dict[str, Any]]:
    """Run ``memsync check --json``; return its exit status and document."""
    result = memsync(config, "check", "--json")
    if result.returncode not in (0, 3):
        raise DemoFailed(f"check exited {result.returncode}: {result.stderr.strip()}")
    return result.returncode, json.loads(result.stdout)


def expect(config: Path, wanted: dict[str, set[str]], story: str) -> None:
    """Run check and require exactly the ``wanted`` error codes with these memory ids."""
    code, report = check_json(config)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    found: dict[str, set[str]] = {}
    for finding in errors:
        found.setdefault(finding["code"], set()).add(finding["memory_id"] or finding["collection"])
    for finding in errors:
        say(f"   {finding['code']:<20} {finding['memory_id'] or finding['collection']}")
    counts = report["counts"]
    say(
        f"   -> exit {code}: {counts['errors']} errors, {counts['warnings']} warnings "
        f"({counts['points']} points, {counts['history_memories']} memories in history, deleted ones included)"
    )
    if found != wanted or code != 3:
        raise DemoFailed(f"{story}: expected {wanted}, check found {found} (exit {code})")
    say(f"   OK: check named {sum(len(v) for v in wanted.values())} problem(s) exactly as caused")


def progress(done: int, total: int) -> None:
    """A progress line on a terminal."""
    if sys.stdout.isatty():
        sys.stdout.write(f"\r   adding memories: {done}/{total}")
        sys.stdout.flush()
        if done >= total:
            sys.stdout.write("\n")


def snapshot_act(paths: build.Paths, config: Path) -> None:
    """Snapshot the healthy deployment, upload it to a local S3 server, verify the remote copy."""
    heading("3. a snapshot of both stores, uploaded to S3 and verified there")
    endpoint, bucket = start_s3()
    with config.open("a", encoding="utf-8") as handle:
        handle.write(
            f'\n[s3]\nbucket = "{bucket}"\nprefix = "demo/host1"\nregion = "us-east-1"\n'
            f'endpoint_url = "{endpoint}"\n'
        )
    say(f"an S3 protocol server (moto) listens on {endpoint}; bucket {bucket!r}")
    created = memsync(config, "snapshot", "create", "--upload", "--json")
    if created.returncode != 0:
        raise DemoFailed(f"snapshot create exited {created.returncode}: {created.stderr.strip()}")
    made = json.loads(created.stdout)
    say(
        f"   snapshot {made['id']}: {made['files']} files, {made['size_bytes']} bytes, "
        f"{made['collections']['mem0']['points']} points, {made['history']['memories']} memories; "
        f"uploaded {made['upload']['sent']} files, manifest last"
    )
    target = f"s3://{bucket}/demo/host1/{made['id']}"
    verified = memsync(config, "snapshot", "verify", target)
    say(
        "   "
        + (verified.stdout.splitlines() or ["(no output)"])[-1]
        + "  (downloaded, every byte and the pair re-checked)"
    )
    if verified.returncode != 0:
        raise DemoFailed(f"remote verify exited {verified.returncode}: {verified.stderr.strip()}")
    listing = memsync(config, "snapshot", "list", "--remote")
    say("\n".join("   " + line for line in listing.stdout.splitlines()))


def start_s3() -> tuple[str, str]:
    """Start moto's S3 server on 127.0.0.1 in this process; return its endpoint and a bucket."""
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "demo")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "demo-secret")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    with contextlib.redirect_stdout(io.StringIO()):  # moto announces itself on stdout
        server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="memsync-demo"
    )
    return endpoint, "memsync-demo"


def show_mem0_errors() -> None:
    """Print mem0's own error log lines indented and labelled, so the reader can tell them apart."""
    import logging

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("   mem0 logged: %(message)s"))
    handler.setLevel(logging.ERROR)
    mem0_logger = logging.getLogger("mem0")
    mem0_logger.addHandler(handler)
    mem0_logger.propagate = False


MARKER = ".memsync-demo"  # in a directory the demo made: only such a one is removed to start over


def main(argv: list[str] | None = None) -> int:
    """Run the demo; return 0 when every step behaved as expected (2: usage, 10: its directory)."""
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if args:
        print(f"memsync.demo: error: it takes no arguments, got {args[0]!r} (hint: make demo)")
        return 2
    root = Path(os.environ.get("MEMSYNC_DEMO_DIR", "demo-run")).absolute()
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        print(
            f"memsync.demo: error: {root} is a file or a symbolic link, not a directory the "
            "demo made (hint: set MEMSYNC_DEMO_DIR to a new directory)"
        )
        return 10
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        print(
            f"memsync.demo: error: {root} is not empty and was not made by the demo, which "
            "starts over in its directory (hint: set MEMSYNC_DEMO_DIR to a new directory)"
        )
        return 10
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / MARKER).write_text("made by python -m memsync.demo, removed by its next run\n")
    show_mem0_errors()
    paths = build.Paths(root)
    config = build.write_memsync_config(paths, extra=build.app_table(), app_python=None)
    try:
        run(paths, config)
    except DemoFailed as failure:
        say(f"\nDEMO FAILED: {failure}")
        return 1
    backups.leave_config_usable(config)  # act 12 left it usable already; kept for a shorter run
    heading("done")
    say("Every drift was named by its code and memory id, the snapshot restored both stores,")
    say("reconcile settled a restore mix-up, and an erased memory left no byte behind;")
    say("with the app running, every write went through its agent and none of its writes failed;")
    say("the tripwire caught a bulk deletion, and recover brought back exactly what was lost.")
    say("On Postgres with pgvector (mem0's REST server layout) the same commands did the same,")
    say("the restore swapping tables in one transaction and a forget running while the app wrote.")
    say(
        f"The deployment is in {root}, healthy; what restore moved aside is kept there as "
        "mem0/history.db.pre-restore-* and pgvector/mem0/history.db.pre-restore-*."
    )
    say(
        f"Its config, {config.name}, names the store it was switched to in act 12 (the "
        f"memsync_hash256 embedder in migrate/qdrant-hash256; the MiniLM store it left is kept "
        f"in qdrant/ until migrate --cleanup, its config as {config.name}.bak) and works as "
        "it is left: its [s3] and [daemon] sections are commented out (the demo's S3 server "
        "and daemon stopped)."
    )
    say(
        "The pgvector deployment (pgvector/) keeps its history.db and snapshots; its PostgreSQL "
        "was the demo's own and is gone."
    )
    say(
        "memsync migrate copied it to pgvector and to a second embedder, both verified and "
        "checked clean, and switched it to the second (the new configs are in migrate/)."
    )
    say(
        "With Litestream under the daemon, a lost disk cost a handful of memories where the "
        "daily snapshot would have lost every one since it (lost-disk/, its replica beside it)."
    )
    return 0


def run(paths: build.Paths, config: Path) -> None:
    """The demo's acts."""
    heading("1. a real mem0 deployment, built offline")
    say(f"mem0ai with embedded Qdrant at {paths.qdrant} and history at {paths.history_db};")
    say("embeddings: all-MiniLM-L6-v2 (int8 ONNX, 384 dims) from an installed package, no network.")
    started = time.monotonic()
    memory = build.open_memory(paths)
    seeded = build.seed(memory, MEMORIES, progress=progress)
    say(
        f"added {MEMORIES} memories for {len(build.USERS)} users and {len(build.AGENTS)} agents in "
        f"{time.monotonic() - started:.1f} s; updated {len(seeded.updated)}, deleted "
        f"{len(seeded.deleted)}, {len(seeded.expired)} already expired."
    )
    build.close_memory(memory)

    heading("2. doctor and check on the healthy deployment")
    doctor = memsync(config, "doctor")
    say(
        "\n".join(
            "   " + line
            for line in doctor.stdout.splitlines()
            if not line.startswith("OK ") and "fix:" not in line
        )
    )
    code, report = check_json(config)
    counts = report["counts"]
    say(
        f"   check exit {code}: {counts['errors']} errors, {counts['warnings']} warnings "
        f"({counts['points']} points; {counts['history_memories']} memories in history, deleted ones included)"
    )
    warned = sorted({f["code"] for f in report["findings"] if f["severity"] == "warning"})
    if warned:
        say(f"   check's warnings are policy, not damage: {', '.join(warned)}")
    say("   (doctor's warnings: mem0 created history.db with the default umask, so every user can")
    say("    read it; and there is no snapshot yet: act 3 takes one)")
    if code != 0:
        raise DemoFailed("check found errors on a healthy deployment")

    snapshot_act(paths, config)

    keep = paths.root / "qdrant-copy-before-changes"
    build.copy_qdrant(paths, keep)
    say(f"(an hourly file backup copies the Qdrant directory to {keep.name})")

    memory = build.open_memory(paths)
    live = list(seeded.live)

    say(
        "\nEach step below adds one fault; check lists every error still present, so the lists grow."
    )
    heading("4a. a history write fails during delete")
    say("mem0 deletes the point, then its DELETE row cannot be written (database is locked):")
    victim = build.delete_with_failing_history(memory, paths, live.pop())
    expect(config, {"missing-point": {victim}}, "failed delete")

    heading("4b. a history write fails during add")
    orphan = build.add_with_failing_history(memory, paths, "speaks Basque at home", "alice")
    expect(config, {"missing-point": {victim}, "orphan-point": {orphan}}, "failed add")

    heading("4c. a history write fails during update")
    changed = build.update_with_failing_history(memory, paths, live.pop(), "moved to Porto in May")
    expect(
        config,
        {"missing-point": {victim}, "orphan-point": {orphan}, "text-mismatch": {changed}},
        "failed update",
    )

    heading("4d. history rows deleted by hand")
    say("someone runs DELETE FROM history WHERE memory_id=... to 'forget' a memory:")
    by_hand = live.pop()
    rows = build.delete_history_rows(paths, by_hand)
    say(
        f"   {rows} history row(s) deleted; the memory is still in Qdrant, and still answers searches"
    )
    expect(
        config,
        {"missing-point": {victim}, "orphan-point": {orphan, by_hand}, "text-mismatch": {changed}},
        "rows deleted by hand",
    )

    heading("4e. an older Qdrant copy put back over a newer history.db")
    rng_memories = [live.pop() for _ in range(3)]
    for memory_id in rng_memories[:2]:
        memory.delete(memory_id)
    memory.update(rng_memories[2], "now prefers oolong tea")
    added = memory.add("joined the climbing club", user_id="bob", infer=False)["results"][0]["id"]
    build.close_memory(memory)
    say("after the copy: 2 deletes, 1 update and 1 add went through mem0 (both stores);")
    say("then the Qdrant directory is restored from the copy, history.db is not:")
    build.put_back_qdrant(paths, keep)
    expect(
        config,
        {
            "resurrected-point": set(rng_memories[:2]),
            "missing-point": {added},
            "text-mismatch": {rng_memories[2]},
            "orphan-point": {by_hand},
        },
        "older Qdrant copy over newer history",
    )
    say("   (faults 4a-4c happened after the copy, so the older files hide them; the rows")
    say("    deleted by hand in 4d still leave their point orphaned; deleted memories are back)")

    heading("4f. the Qdrant directory wiped, as a reboot wipes a tmpfs /tmp")
    build.wipe_qdrant(paths)
    expect(config, {"collection-missing": {"mem0"}}, "wiped Qdrant directory")
    result = memsync(config, "check")
    say("\n".join("   " + line for line in result.stdout.splitlines()))

    repair_act(paths, config, seeded)


def repair_act(paths: build.Paths, config: Path, seeded: build.Seeded) -> None:
    """Restore the snapshot of act 3, reproduce a restore mix-up, then reconcile to a clean check."""
    heading("5. restore the snapshot of act 3 (both stores together)")
    first = snapshot_ids(config)[0]
    say(
        f"   the snapshot of act 3 is {first}; --force because the deployment has files (they are moved aside)"
    )
    restored = memsync(config, "restore", "--force", "--json", first)
    if restored.returncode != 0:
        raise DemoFailed(f"restore exited {restored.returncode}: {restored.stderr.strip()}")
    document = json.loads(restored.stdout)
    say(
        f"   restored {document['snapshot_id']}; the wiped and damaged files were moved aside, not deleted;"
    )
    say(f"   check after the restore: {document['check_after']['errors']} errors")

    heading("6. a restore mix-up, settled by reconcile")
    live = [m for m in seeded.live if m not in set(seeded.expired)]
    keep = paths.root / "qdrant-before-mixup"
    build.copy_qdrant(paths, keep)
    memory = build.open_memory(paths)
    doomed = live[-3:]
    for memory_id in doomed:
        memory.delete(memory_id)
    changed = live[-4]
    memory.update(changed, "switched to decaf")
    build.close_memory(memory)
    build.put_back_qdrant(paths, keep)
    say(
        "3 memories deleted and 1 updated through mem0, then the Qdrant copy taken just before put back:"
    )
    code, report = check_json(config)
    found = sorted(
        {(f["code"], f["memory_id"]) for f in report["findings"] if f["severity"] == "error"}
    )
    for code_name, memory_id in found:
        say(f"   {code_name:<20} {memory_id}")
    say(f"   -> exit {code}: {report['counts']['errors']} errors")
    if {m for c, m in found if c == "resurrected-point"} != set(doomed):
        raise DemoFailed(f"expected the 3 deleted memories to be resurrected, check found {found}")
    planned = memsync(config, "reconcile", "--dry-run")
    say("\n".join("   " + line for line in planned.stdout.splitlines()))
    if planned.returncode != 3:
        raise DemoFailed(
            f"reconcile --dry-run exited {planned.returncode}, expected 3 (work to do)"
        )
    applied = memsync(config, "reconcile")
    say("\n".join("   " + line for line in applied.stdout.splitlines()[-1:]))
    if applied.returncode != 0:
        raise DemoFailed(f"reconcile exited {applied.returncode}: {applied.stderr.strip()}")
    code, report = check_json(config)
    say(f"   check after reconcile: exit {code}, {report['counts']['errors']} errors")
    if code != 0:
        raise DemoFailed("check is not clean after reconcile")
    memory = build.open_memory(paths)
    try:
        back = [m for m in doomed if memory.get(m) is not None]
        text = memory.get(changed)["memory"]
    finally:
        build.close_memory(memory)
    if back or text != "switched to decaf":
        raise DemoFailed(f"after reconcile: deleted memories back {back}, updated text {text!r}")
    say(
        "   the deleted memories stay deleted; the update is back in the point (re-embedded by mem0)"
    )
    erase_act(paths, config, seeded)


def erase_act(paths: build.Paths, config: Path, seeded: build.Seeded) -> None:
    """Prune expired memories, then forget one with --erase and prove it by a byte search."""
    heading("7. expiry and erasure, through mem0")
    pruned = memsync(config, "prune", "--json")
    if pruned.returncode != 0:
        raise DemoFailed(f"prune exited {pruned.returncode}: {pruned.stderr.strip()}")
    say(
        f"   pruned {len(json.loads(pruned.stdout)['deleted'])} expired memories through mem0 "
        "(mem0 itself only hides expired memories)"
    )
    secret = "my passport number is P-7731-0042 and my PIN is 5519"
    memory = build.open_memory(paths)
    try:
        target = memory.add([{"role": "user", "content": secret}], user_id="erin", infer=True)[
            "results"
        ][0]["id"]
    finally:
        build.close_memory(memory)
    say(f"the app (mem0) adds a memory holding a passport number: {target}")
    created = memsync(config, "snapshot", "create", "--json")
    snapshot_id = json.loads(created.stdout)["id"]
    say(f"   snapshot {snapshot_id} now holds it too")
    forgotten = memsync(config, "forget", target, "--erase", "--yes", "--json")
    if forgotten.returncode != 0:
        raise DemoFailed(
            f"forget --erase exited {forgotten.returncode}: {forgotten.stderr.strip()}"
        )
    holding = json.loads(forgotten.stdout)["erased"]["snapshots_holding"]
    say(f"   forgotten and erased; snapshots still holding it: {', '.join(holding) or 'none'}")
    purged = memsync(config, "snapshot", "purge-memory", target, "--yes")
    say("\n".join("   " + line for line in purged.stdout.splitlines()))
    hits = [
        str(p) for p in paths.root.rglob("*") if p.is_file() and b"P-7731-0042" in p.read_bytes()
    ]
    say(
        f"   byte search of every file under {paths.root} for the passport number: {len(hits)} hits"
    )
    if hits:
        raise DemoFailed(f"the erased text is still in {hits}")
    daemon_act(paths, config)


def daemon_act(paths: build.Paths, config: Path) -> None:
    """Run the daemon briefly (check every 2 s, a snapshot at start) and show ``memsync status``."""
    heading("8. the daemon, briefly")
    with config.open("a", encoding="utf-8") as handle:
        handle.write('\n[daemon]\ncheck_every = "2s"\nsnapshot_every = "1d"\n')
    say("$ memsync daemon   (check every 2 s; the daily snapshot job never ran, so it runs at")
    say("   start: it uploads any snapshot still pending and, the newest being seconds old,")
    say("   captures none: snapshot create --upload --if-due 1d)")
    process = subprocess.Popen(
        [sys.executable, "-m", "memsync", "daemon", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    state_file = paths.state / "daemon-state.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (
            state_file.exists()
            and '"last_outcome": "ok"' in state_file.read_text()
            and state_file.read_text().count('"last_success_at"') >= 2
        ):
            break
        time.sleep(0.2)
    status = memsync(config, "status")
    say("\n".join("   " + line for line in status.stdout.splitlines()))
    process.terminate()
    _, err = process.communicate(timeout=120)
    finished = [json.loads(line) for line in err.splitlines() if '"job_finished"' in line]
    say(
        f"   SIGTERM: the daemon exited {process.returncode} after {len(finished)} jobs; one JSON log line per job, e.g."
    )
    if finished:
        say(
            "   "
            + json.dumps({k: finished[0][k] for k in ("event", "job", "outcome", "duration_s")})
        )
    if process.returncode != 0 or status.returncode != 0:
        raise DemoFailed(f"daemon exited {process.returncode}, status exited {status.returncode}")
    heading("9. maintenance while the app runs, through its agent")
    live.live_act(paths, config, memsync, say, DemoFailed)
    heading("10. a mistaken forget and a bulk deletion, each undone by recover")
    backups.backups_act(paths, config, memsync, say, DemoFailed)
    heading("11. mem0's REST server layout: Postgres with pgvector")
    pgvector_act.pgvector_act(paths.root / "pgvector", config, memsync, say, DemoFailed)
    heading("12. memsync migrate: a second embedder, and pgvector")
    migrate_act.migrate_act(paths, config, memsync, say, DemoFailed)
    heading("13. a lost disk under continuous protection, restored to the last second")
    lost_disk.lost_disk_act(paths.root / "lost-disk", memsync, say, DemoFailed)


def snapshot_ids(config: Path) -> list[str]:
    """Ids of the complete local snapshots, oldest first."""
    listed = memsync(config, "snapshot", "list", "--json")
    return [s["id"] for s in json.loads(listed.stdout)["snapshots"] if s["complete"]]


if __name__ == "__main__":
    raise SystemExit(main())
