"""The demo's act 12: ``memsync migrate`` carries the demo deployment to a new embedder and store.

The deployment (embedded Qdrant, the offline MiniLM embedder, 384 dimensions) is migrated
twice, each time to a new config written beside it (``<root>/migrate/*.toml``: the demo
config's text with only ``[mem0.vector_store]`` and ``[mem0.embedder]`` changed):

a. to Postgres with pgvector (the demo's own PostgreSQL, started for this act as act 11 starts
   its own, ``memsync.demo.postgres``), keeping MiniLM: the vectors copied as they are;
b. to the second offline embedder ``memsync_hash256`` (256 dimensions) in a new embedded
   Qdrant directory: every memory re-embedded; then switched to it (``migrate --switch``).

Each target: ``migrate --dry-run`` (the plan), ``migrate`` (copied and verified), then
``memsync check --config NEW.toml`` with no error. A migration's journal names its target, so
the first one's ``migrate.json`` is moved aside before the second starts, as the docs say.
The switch (``switch_to``) writes the hash256 config over the demo's (its mem0 dict is in the
config, as an app's in its code; the ``.bak`` is kept), and ``check`` with the demo's config
is then clean on the new store. The new configs are left in ``<root>/migrate`` with the
demo's stopped S3 server and daemon commented out (``backups.leave_config_usable``), so the
demo's config is usable after the switch too; ``pgvector.toml`` names a server that is gone.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsync.demo import backups, postgres
from memsync.demo import deployment as build

# memsync.demo.providers is imported where it is used: it imports mem0, which reads
# MEM0_TELEMETRY once, before the demo turns telemetry off (deployment.open_memory).
Run = Callable[..., Any]  # the demo's ``memsync(config, *args)``: a CompletedProcess
Say = Callable[[str], None]
Fail = Callable[[str], Exception]


def migrate_act(paths: build.Paths, config: Path, memsync: Run, say: Say, fail: Fail) -> None:
    """Run act 12 (see the module docstring); raise ``fail(...)`` when an expectation fails."""
    started = time.monotonic()
    work = paths.root / "migrate"
    shutil.rmtree(work, ignore_errors=True)
    say("(a) Postgres with pgvector, keeping MiniLM: vectors copied as they are")
    server_dir = Path(tempfile.mkdtemp(prefix="memsync-demo-pg-"))  # short: the socket lives there
    url, server = postgres.start(server_dir / "data")
    try:
        database = postgres.fresh_database(url, "memsync_migrate")
        migrate_to(config, to_pgvector(paths, config, work, database, fail), memsync, say, fail)
    finally:
        postgres.stop(server)
        shutil.rmtree(server_dir, ignore_errors=True)  # the demo's own server, not a deployment's
    aside = set_journal_aside(paths.state, "pgvector")
    say(f"   its journal moved aside to {aside.name}: a journal names one target")
    say("(b) a second embedder: memsync_hash256, 256 dimensions, in a new embedded Qdrant")
    hash256 = to_hash256(paths, config, work, fail)
    for new in sorted(work.glob("*.toml")):  # they copied [s3] and [daemon] of the demo's
        backups.leave_config_usable(new)
    migrate_to(config, hash256, memsync, say, fail)
    switch_to(config, hash256, memsync, say, fail)
    say(
        f"   both targets verified and checked clean, and the deployment switched to the second "
        f"embedder, in {time.monotonic() - started:.1f} s (the demo's PostgreSQL is gone with "
        "its table)"
    )


def switch_to(config: Path, new: Path, memsync: Run, say: Say, fail: Fail) -> dict[str, Any]:
    """``migrate --switch`` (the demo's mem0 dict is in its config: "in code"), then check.

    Nothing runs on the store, so nothing is stopped: a pinned snapshot of the source, the
    final catch-up, NEW.toml written over the demo's config (its ``.bak`` kept), ``check``
    with the demo's config (now the new store) clean, and ``--cleanup`` refused until
    ``[migrate] keep_source_days`` have passed. Raises ``fail(...)`` otherwise.
    """
    result = memsync(config, "migrate", "--to", str(new), "--switch", "--json")
    if result.returncode != 0:
        raise fail(f"migrate --switch to {new.name} exited {result.returncode}: "
                   f"{result.stderr.strip()}")  # fmt: skip
    switch: dict[str, Any] = json.loads(result.stdout)["switch"]
    say(
        f"   switched: snapshot {switch['snapshot']} of the old store taken first (pinned); "
        f"{config.name} now holds {new.name}'s text (the old one kept as "
        f"{Path(switch['memsync_config_backup']).name}); an app would take the printed "
        "embedder and vector_store into its code"
    )
    checked = memsync(config, "check", "--json")
    counts = json.loads(checked.stdout).get("counts", {}) if checked.stdout.strip() else {}
    say(f"   check with {config.name} (the new store) -> exit {checked.returncode}: "
        f"{counts.get('errors')} errors, {counts.get('points')} points")  # fmt: skip
    if checked.returncode != 0:
        raise fail(f"check after the switch exited {checked.returncode} with {counts}")
    cleanup = memsync(config, "migrate", "--cleanup", "--yes")
    if cleanup.returncode != 10 or "kept until" not in cleanup.stderr:
        raise fail(f"migrate --cleanup right after the switch exited {cleanup.returncode}")
    say("   migrate --cleanup: refused (exit 10), the old store is kept until "
        "[migrate] keep_source_days (7) have passed")  # fmt: skip
    made = memsync(config, "snapshot", "create", "--json")
    if made.returncode != 0:
        raise fail(f"snapshot create after the switch exited {made.returncode}: {made.stderr}")
    say(f"   snapshot create -> {json.loads(made.stdout)['id']}: the first backup of the switched "
        "deployment (the older snapshots hold the old embedder's vectors; doctor would say so)")  # fmt: skip
    return switch


def to_hash256(paths: build.Paths, config: Path, work: Path, fail: Fail) -> Path:
    """Write ``work/hash256.toml``: the demo config with memsync_hash256 in a new directory."""
    from memsync.demo.providers import HASH256_DIMS, HASH256_EMBEDDER_PROVIDER

    store = build.vector_store_toml(work, work / "qdrant-hash256", None, HASH256_DIMS)
    return _new_config(paths, config, work / "hash256.toml", store, HASH256_EMBEDDER_PROVIDER, fail)


def to_pgvector(paths: build.Paths, config: Path, work: Path, url: str, fail: Fail) -> Path:
    """Write ``work/pgvector.toml``: the demo config on pgvector at ``url`` (a secret file), MiniLM."""
    from memsync.demo.providers import EMBEDDER_PROVIDER, EMBEDDING_DIMS

    store = build.vector_store_toml(work / "pgvector", paths.qdrant, url, EMBEDDING_DIMS)
    return _new_config(paths, config, work / "pgvector.toml", store, EMBEDDER_PROVIDER, fail)


def _new_config(
    paths: build.Paths, config: Path, new: Path, store: str, embedder: str, fail: Fail
) -> Path:
    """The demo config's text with its vector store and embedder tables replaced, at ``new``."""
    from memsync.demo.providers import EMBEDDER_PROVIDER, EMBEDDING_DIMS

    text = config.read_text(encoding="utf-8")
    old_store = build.vector_store_toml(paths.root, paths.qdrant, None, EMBEDDING_DIMS)
    old_embedder = f'[mem0.embedder]\nprovider = "{EMBEDDER_PROVIDER}"'
    if old_store not in text or old_embedder not in text:
        raise fail(f"{config} does not hold the demo's vector store and embedder tables")
    text = text.replace(old_store, store).replace(
        old_embedder, f'[mem0.embedder]\nprovider = "{embedder}"'
    )
    new.parent.mkdir(parents=True, exist_ok=True)
    new.write_text(text.replace("# memsync config", "# the NEW memsync config", 1), "utf-8")
    return new


def migrate_to(config: Path, new: Path, memsync: Run, say: Say, fail: Fail) -> dict[str, Any]:
    """``migrate --dry-run``, ``migrate``, ``check --config NEW``; the migrate JSON document.

    Raises ``fail(...)`` when a step exits non-zero, the copy is not verified, or check on the
    new config finds an error or another number of points than the plan's memories.
    """
    planned = memsync(config, "migrate", "--to", str(new), "--dry-run")
    if planned.returncode != 0:
        raise fail(f"migrate --dry-run exited {planned.returncode}: {planned.stderr.strip()}")
    say("\n".join("   " + line for line in planned.stdout.splitlines()))
    result = memsync(config, "migrate", "--to", str(new), "--json")
    if result.returncode != 0:
        raise fail(f"migrate to {new.name} exited {result.returncode}: {result.stderr.strip()}")
    done: dict[str, Any] = json.loads(result.stdout)
    say(
        f"   copied {done['copied']} points ({done['re_embedded']} re-embedded) in "
        f"{done['batches']} batches; verified {done['verified']}; "
        f"{done['search_sampled'] - len(done['search_index_misses'])} of "
        f"{done['search_sampled']} sampled memories found first for their own text"
    )
    if not done["verified"]:
        raise fail(f"migrate to {new.name} found differences: {done['differences'][:3]}")
    say(f"   check with the new config (--config {new.relative_to(config.parent)}):")
    checked = memsync(new, "check", "--json")
    report = json.loads(checked.stdout) if checked.stdout.strip() else {}
    counts = report.get("counts", {})
    say(
        f"   -> exit {checked.returncode}: {counts.get('errors')} errors, "
        f"{counts.get('points')} points on {report.get('backend')}"
    )
    if checked.returncode != 0 or counts.get("points") != done["plan"]["memories"]:
        raise fail(
            f"check --config {new.name} exited {checked.returncode} with {counts} "
            f"(the plan copied {done['plan']['memories']} memories)"
        )
    return done


def set_journal_aside(state_dir: Path, name: str) -> Path:
    """Rename ``<state_dir>/migrate.json`` to ``migrate-<name>.json``; return the new path."""
    journal = state_dir / "migrate.json"
    aside = journal.with_name(f"migrate-{name}.json")
    journal.replace(aside)
    return aside
