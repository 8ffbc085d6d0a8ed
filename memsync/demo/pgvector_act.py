"""The demo's act 11: mem0's REST server layout, Postgres with pgvector and a history.db.

Starts its own PostgreSQL 16 with pgvector (the ``pgserver`` wheel, on a Unix socket), builds a
deployment the way mem0's server runs it (``provider = "pgvector"``, history.db beside it) with
the offline MiniLM embedder, then: ``check``; a snapshot uploaded to the demo's S3 server and
verified there; the drift the field produces (a history write failing during a mem0 delete, a
row deleted by hand in Postgres) named by check and undone by ``restore`` (the tables swapped in
one transaction, the damaged ones kept aside); a ``pg_restore`` of an older table under a newer
history.db, settled by ``reconcile``; and a ``forget`` while the app writes through its own Memory
on the same table, with no single-writer lock to wait for.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsync.demo import backups, pg_faults, postgres
from memsync.demo import deployment as build
from memsync.demo.app import AppProcess

MEMORIES = 200


def pgvector_act(
    root: Path,
    main_config: Path,
    memsync: Callable[..., Any],
    say: Callable[[str], None],
    fail: Callable[[str], Exception],
) -> None:
    """Run act 11 (see the module docstring) under ``root``; raise ``fail(...)`` when an expectation fails."""
    server_dir = Path(tempfile.mkdtemp(prefix="memsync-demo-pg-"))  # short: the socket lives there
    url, server = postgres.start(server_dir / "data")
    try:
        paths = build.Paths(root, pg_url=postgres.fresh_database(url, "memsync_demo"))
        config = build.write_memsync_config(
            paths, extra=_s3_section(main_config) + build.app_table(), app_python=None
        )
        _run(paths, config, memsync, say, fail)
    finally:
        postgres.stop(server)
        shutil.rmtree(server_dir, ignore_errors=True)  # the demo's own server, not a deployment's
        backups.leave_config_usable(root / "memsync.toml")  # its [s3] named the demo's S3 server
    say(
        "   the demo's PostgreSQL is stopped and removed with its tables; history.db and the "
        f"snapshots stay in {root}"
    )


def _run(
    paths: build.Paths,
    config: Path,
    memsync: Callable[..., Any],
    say: Callable[[str], None],
    fail: Callable[[str], Exception],
) -> None:
    say(
        "the demo's own PostgreSQL 16 with pgvector (database memsync_demo, on a Unix socket; "
        "removed at the end of this act);"
    )
    say(f"   memories in table mem0 (and mem0_entities), history at {paths.history_db}")
    memory = build.open_memory(paths)
    try:
        seeded = build.seed(memory, MEMORIES, rng_seed=11, batch=10)
    finally:
        build.close_memory(memory)
    say(f"   {len(seeded.live)} memories through mem0's own API (deletes and updates included)")
    document = _json(memsync, config, fail, "check", "--json")
    say(
        f"   memsync check: backend {document['backend']}, {document['counts']['points']} points, {document['counts']['errors']} errors"
    )
    if document["counts"]["errors"]:
        raise fail(
            f"check on the fresh pgvector deployment found errors: {document['findings'][:3]}"
        )
    created = _json(memsync, config, fail, "snapshot", "create", "--upload", "--json")
    snapshot_id = created["id"]
    s3 = tomllib.loads(config.read_text(encoding="utf-8")).get("s3")
    target = f"s3://{s3['bucket']}/{s3['prefix']}/{snapshot_id}" if s3 else snapshot_id
    verified = memsync(config, "snapshot", "verify", target)
    if verified.returncode != 0:
        raise fail(
            f"remote verify of {snapshot_id} exited {verified.returncode}: {verified.stderr.strip()}"
        )
    say(
        f"   snapshot {snapshot_id}: both tables exported in one read-only transaction, then history.db;"
    )
    say(
        f"   uploaded and verified in S3 ({target}); manifest mode {created.get('mode', 'pgvector')}"
    )
    dump = pg_faults.dump_table(paths, paths.root / "mem0-table.dump")  # an operator's hourly dump
    _drift_then_restore(paths, config, seeded, snapshot_id, memsync, say, fail)
    _older_table_then_reconcile(paths, config, seeded, dump, memsync, say, fail)
    _forget_while_the_app_writes(paths, config, seeded, memsync, say, fail)


def _drift_then_restore(
    paths: build.Paths,
    config: Path,
    seeded: build.Seeded,
    snapshot_id: str,
    memsync: Callable[..., Any],
    say: Callable[[str], None],
    fail: Callable[[str], Exception],
) -> None:
    import psycopg

    live = [m for m in seeded.live if m not in set(seeded.expired)]
    memory = build.open_memory(paths)
    try:
        failed = build.delete_with_failing_history(memory, paths, live[0])
    finally:
        build.close_memory(memory)
    with psycopg.connect(str(paths.pg_url), autocommit=True) as connection:
        connection.execute("DELETE FROM mem0 WHERE id = %s", (live[1],))
    say(
        "two drifts the field's way: mem0 deleted a memory while history.db was locked (its "
        "history write failed, logged above), and a row was deleted by hand in Postgres:"
    )
    code, report = _check(memsync, config)
    found = {(f["code"], f["memory_id"]) for f in report["findings"] if f["severity"] == "error"}
    for code_name, memory_id in sorted(found):
        say(f"   {code_name:<20} {memory_id}")
    say(f"   -> exit {code}: {report['counts']['errors']} errors")
    if not {failed, live[1]} <= {m for _, m in found}:
        raise fail(f"check did not name both drifts ({failed}, {live[1]}): {sorted(found)}")
    restored = _json(memsync, config, fail, "restore", "--force", "--json", snapshot_id)
    say(
        f"   memsync restore {snapshot_id}: new tables loaded and indexed, swapped in one transaction;"
    )
    say(
        f"   the damaged ones kept as mem0_pre_restore_*; check after: {restored['check_after']['errors']} errors"
    )
    if restored["check_after"]["errors"]:
        raise fail("check is not clean after the pgvector restore")


def _older_table_then_reconcile(
    paths: build.Paths,
    config: Path,
    seeded: build.Seeded,
    dump: Path,
    memsync: Callable[..., Any],
    say: Callable[[str], None],
    fail: Callable[[str], Exception],
) -> None:
    memory = build.open_memory(paths)
    try:
        current = {
            item["id"]
            for item in memory.get_all(filters={"user_id": "chandra"}, top_k=100_000)["results"]
        }
        doomed = sorted(current)[:3]
        for memory_id in doomed:
            memory.delete(memory_id)
    finally:
        build.close_memory(memory)
    try:
        pg_faults.restore_table(paths, dump)
    except RuntimeError as error:
        raise fail(str(error)) from None
    say("3 memories deleted through mem0, then the table's older pg_dump restored with pg_restore:")
    code, report = _check(memsync, config)
    back = sorted(f["memory_id"] for f in report["findings"] if f["code"] == "resurrected-point")
    say(f"   check: resurrected-point {', '.join(back)}")
    if set(back) != set(doomed):
        raise fail(f"expected {doomed} resurrected, check found {back}")
    applied = memsync(config, "reconcile", "--json")
    if applied.returncode != 0:
        raise fail(f"reconcile exited {applied.returncode}: {applied.stderr.strip()}")
    done = json.loads(applied.stdout)["counts"]["done"]
    say(f"   memsync reconcile: {done} resurrected memories deleted through mem0 (tombstones win)")
    code, report = _check(memsync, config)
    say(f"   check after reconcile: exit {code}, {report['counts']['errors']} errors")
    if code != 0:
        raise fail("check is not clean after reconcile on pgvector")


def _forget_while_the_app_writes(
    paths: build.Paths,
    config: Path,
    seeded: build.Seeded,
    memsync: Callable[..., Any],
    say: Callable[[str], None],
    fail: Callable[[str], Exception],
) -> None:
    with AppProcess(
        paths.root, interval=0.05, users=("alice", "bob"), embedder="memsync_minilm"
    ) as app:
        view = app.view()
        victim = next(m for m in sorted(view) if m in set(seeded.live))
        forgotten = _json(memsync, config, fail, "forget", victim, "--yes", "--json")
        after = app.view()
        stats = app.stop()
    say(
        "the app (a real process, its own mem0 Memory on the same table) writes every 50 ms; "
        "PostgreSQL has no single-writer lock,"
    )
    say(
        f"   so memsync writes through its own Memory while the app serves: memsync forget {victim}: "
        f"route {forgotten.get('route')}"
    )
    say(
        f"   the app's own get_all no longer returns it: {victim not in after}; app writes {stats['writes']}, failed {stats['failures']}"
    )
    if victim in after or stats["failures"] or forgotten.get("route") != "direct":
        raise fail(
            f"live forget on pgvector: still seen {victim in after}, failures {stats['failures']}, route {forgotten.get('route')}"
        )


def _s3_section(main_config: Path) -> str:
    """The main deployment's ``[s3]`` (the demo's S3 server), with this deployment's prefix."""
    s3 = tomllib.loads(main_config.read_text(encoding="utf-8")).get("s3")
    if not s3:
        return ""
    return f'[s3]\nbucket = "{s3["bucket"]}"\nprefix = "pgvector"\nendpoint_url = "{s3["endpoint_url"]}"\nregion = "us-east-1"\n'


def _check(memsync: Callable[..., Any], config: Path) -> tuple[int, dict[str, Any]]:
    result = memsync(config, "check", "--json")
    return result.returncode, json.loads(result.stdout)


def _json(
    memsync: Callable[..., Any], config: Path, fail: Callable[[str], Exception], *args: str
) -> dict[str, Any]:
    result = memsync(config, *args)
    if result.returncode != 0:
        raise fail(f"{' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
    document: dict[str, Any] = json.loads(result.stdout)
    return document
