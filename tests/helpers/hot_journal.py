"""Every command a user runs next on a deployment whose stopped app left a hot ``-journal``.

A writer killed inside its transaction (``holders.killed_inside_a_transaction``) leaves its
changed pages in the file and the originals in ``-journal``: SQLite rolls them back at the next
writer's open, and a read-only reader can neither roll them back nor trust the pages. Used by
tests/process/test_hot_journals.py (embedded Qdrant) and tests/pg/test_hot_journals_pgvector.py.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import error_findings
from tests.helpers.holders import killed_inside_a_transaction
from tests.helpers.migrate import target_config
from tests.process.test_cli import fingerprint

# Commands that write the deployment (or need the app stopped), and the snapshots (a crashed app
# must not stop the backups): each rolls the journal back as the app's start would, and succeeds. {snapshot} and {memory} are filled in.
WRITERS: dict[str, tuple[str, ...]] = {
    "restore": ("restore", "{snapshot}", "--force", "--json"),
    "reconcile": ("reconcile", "--json"),
    "recover": ("recover", "--user", "alice", "--json"),
    "forget": ("forget", "{memory}", "--yes", "--json"),
    "forget --erase": ("forget", "--user", "bob", "--erase", "--yes", "--json"),
    "prune": ("prune", "--json"),
    "snapshot create": ("snapshot", "create", "--json"),  # a crashed app must not stop backups
    "job snapshot": ("job", "snapshot", "--json"),  # the daemon's snapshot job
}
# Commands that only read: each reads correctly or refuses with exit 75 and the one-line hint,
# and changes nothing. The daemon's jobs (`memsync job`) run as the daemon runs them.
READERS: dict[str, tuple[str, ...]] = {
    "check": ("check", "--json"),
    "doctor": ("doctor", "--json"),
    "status": ("status", "--json"),
    "snapshot verify": ("snapshot", "verify", "{snapshot}", "--json"),
    "restore --dry-run": ("restore", "{snapshot}", "--dry-run", "--json"),
    "migrate --dry-run": ("migrate", "--to", "{target}", "--dry-run", "--json"),
    "export-context": ("export-context", "--user", "alice", "--json"),
    "review": ("review", "--json"),
    "job check": ("job", "check", "--json"),
}


@dataclass
class Crashed:
    """A deployment with a verified snapshot whose stopped app was killed inside a write of ``file``."""

    deployment: Any
    file: Path
    snapshot: str
    history: list[dict[str, Any]]  # history.db's rows before the killed write
    victim: str  # alice's memory deleted since the snapshot
    points: list[dict[str, Any]]  # embedded: the mem0 collection's rows before (pgvector: [])


def rows(database: Path, table: str = "history") -> list[dict[str, Any]]:
    """Every row of ``table`` in rowid order (a plain open: rolls back a hot journal)."""
    connection = sqlite3.connect(database)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute(f"SELECT * FROM {table} ORDER BY rowid")]
    finally:
        connection.close()


def storage_file(deployment: Any) -> Path:
    """The embedded store's mem0 collection, ``qdrant/collection/mem0/storage.sqlite``."""
    return deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"


def crash(deployment: Any, cli: Any, file: str) -> Crashed:
    """Snapshot, delete one of alice's memories, stop the app, verify the snapshot (as the
    daemon does), then kill a writer inside a write of ``file`` (the app's last).

    ``file``: ``history`` (history.db) or ``storage`` (embedded Qdrant's ``storage.sqlite``:
    every point's pickle grows, so a reader of the unrolled pages cannot decode one).
    """
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    snapshot = str(made.json()["id"])
    memory = deployment.memory
    victim = next(m for m in deployment.seeded.live if memory.get(m)["user_id"] == "alice")
    memory.delete(victim)  # a mistake after the snapshot: what recover --user alice brings back
    deployment.close()
    verified = cli("snapshot", "verify", snapshot, "--json", config=deployment.config)
    assert verified.code == 0, verified.err
    history = deployment.paths.history_db
    committed = rows(history)
    path = storage_file(deployment)
    points = [] if deployment.paths.pg_url else rows(path, "points")
    if file == "history":
        killed_inside_a_transaction(history)
        return Crashed(deployment, history, snapshot, committed, victim, points)
    killed_inside_a_transaction(path, table="points", column="point")
    return Crashed(deployment, path, snapshot, committed, victim, points)


def argv(crashed: Crashed, template: tuple[str, ...], tmp_path: Path) -> list[str]:
    """The command's argv for this deployment (a migration's target config beside it)."""
    paths = crashed.deployment.paths
    target = target_config(paths, tmp_path / "new", embedder="memsync_hash", dims=384)
    values = {
        "snapshot": crashed.snapshot,
        "memory": next(m for m in crashed.deployment.seeded.live if m != crashed.victim),
        "target": str(target),
    }
    return [part.format(**values) for part in template]


def assert_rolled_back_and_kept(crashed: Crashed, cli: Any, command: str, result: Any) -> None:
    """The writer succeeded, rolled the journal back, kept every committed row, left nothing.

    An erasure blanks its memories' text in history (rows kept); a restore moves the committed
    history aside (it opens with the killed write rolled back) and puts the snapshot's back.
    """
    deployment = crashed.deployment
    assert result.code == 0, f"{command}: exit {result.code}: {result.err[-600:]}"
    assert not Path(f"{crashed.file}-journal").exists(), command
    if command == "recover":  # the memory deleted since the snapshot is back
        assert result.json()["counts"]["recovered"] == 1, result.out[-800:]
    history = deployment.paths.history_db
    if command == "restore":  # the committed history is the one moved aside
        history = Path(f"{history}.pre-restore-{crashed.snapshot}")
    after = {row["id"]: row for row in rows(history)}
    for row in crashed.history:
        kept = after.get(row["id"])
        blanked = kept is not None and kept["new_memory"] is None and kept["old_memory"] is None
        assert kept == row or (command == "forget --erase" and blanked), (command, row)
    work = deployment.paths.state / "tmp"
    assert not work.is_dir() or not list(work.iterdir()), command  # no staged copy left
    assert not list(deployment.paths.state.glob("*-journal.json")), command  # no intent left
    checked = cli("check", "--json", config=deployment.config)
    assert checked.code == 0, (command, checked.out[-800:], checked.err[-400:])
    assert error_findings(checked.json()) == {}, command


def assert_read_or_refused(crashed: Crashed, cli: Any, tmp_path: Path) -> None:
    """Each reader, in turn on the same crashed deployment, reads or refuses (75); none writes.

    A refusal is one line naming the hot journal and the hint; a report (doctor's) names the
    hot journal for what it could not read and claims nothing else it did not observe.
    """
    deployment = crashed.deployment
    before = fingerprint(deployment.paths.root)
    for command, template in READERS.items():
        result = cli(*argv(crashed, template, tmp_path), config=deployment.config)
        if result.code == 75:
            refusal = json.loads(result.err.strip().splitlines()[-1])
            assert "hot journal" in refusal["message"] and refusal["hint"], (command, refusal)
            assert str(crashed.file) in refusal["message"], (command, refusal)
        elif command == "doctor":
            assert result.code == 3, result.err[-600:]
            errors = [r for r in result.json()["results"] if r["status"] == "error"]
            assert errors and all("hot journal" in r["message"] for r in errors), errors
        else:
            assert result.code == 0, f"{command}: exit {result.code}: {result.err[-600:]}"
        assert fingerprint(deployment.paths.root) == before, command  # nothing written
        work = deployment.paths.state / "tmp"
        assert not work.is_dir() or not list(work.iterdir()), command  # no capture left
        assert Path(f"{crashed.file}-journal").exists(), command  # left for a writer
