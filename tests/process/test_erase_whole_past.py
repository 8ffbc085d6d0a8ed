"""An erasure of a scope erases the scope's whole past, and proves it byte by byte.

Real mem0 deployments (hash embedder), real SQLite files in rollback and WAL mode, a real app
process with memsync's agent writing all along (tests/helpers/app.py), and a real reader
process holding a read transaction open. After each erasure every byte of the live store
files, ``-wal``, ``-shm`` and journals included, is searched for every version of the text.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.app import AppProcess

PASSPORT = "carol's passport number is PX-4471-0931"
RENEWED = "carol's passport number was renewed as PX-8820-1177"
KEPT = "carol prefers oolong tea in the afternoon"


def store_files(deployment: Any) -> list[Path]:
    """Every file of the live stores: history.db, each storage.sqlite, and their -wal/-shm/journals."""
    paths = deployment.paths
    mains = [paths.history_db, *paths.qdrant.glob("collection/*/storage.sqlite")]
    return sorted(p for main in mains for p in main.parent.glob(f"{main.name}*") if p.is_file())


def hits(deployment: Any, *texts: str) -> list[str]:
    """``file: text`` for each store file holding one of the texts' bytes."""
    return [
        f"{path.name}: {text}"
        for path in store_files(deployment)
        for text in texts
        if text.encode() in path.read_bytes()
    ]


def erase(cli: Any, deployment: Any, *args: str) -> tuple[int, dict[str, Any]]:
    result = cli("forget", *args, "--erase", "--yes", "--json", config=deployment.config)
    return result.code, (result.json() if result.out else json.loads(result.err.splitlines()[-1]))


def add(memory: Any, text: str, user: str = "carol") -> str:
    return str(memory.add(text, user_id=user, infer=False)["results"][0]["id"])


def test_a_user_erasure_blanks_a_memory_the_app_deleted_earlier(
    make_deployment: Any, cli: Any
) -> None:
    deployment = make_deployment(count=10)
    kept = add(deployment.memory, KEPT)
    secret = add(deployment.memory, PASSPORT)
    deployment.close()
    assert cli("snapshot", "create", "--json", config=deployment.config).code == 0
    deployment.reopen().delete(secret)  # the app deleted it earlier: history keeps its text
    deployment.close()
    assert hits(deployment, PASSPORT)
    code, report = erase(cli, deployment, "--user", "carol")
    assert code == 0, report
    assert hits(deployment, PASSPORT, KEPT) == []
    assert report["deleted"] == [kept]
    earlier = report["erased"]["deleted_earlier"]
    assert [e["memory_id"] for e in earlier] == [secret]
    assert earlier[0]["found_in"].startswith("snapshot ")
    history = deployment.reopen().history(secret)
    assert history and all(e["old_memory"] is None and e["new_memory"] is None for e in history)


def test_a_user_erasure_blanks_the_old_texts_of_an_updated_memory_deleted_since(
    make_deployment: Any, cli: Any
) -> None:
    deployment = make_deployment(count=10)
    secret = add(deployment.memory, PASSPORT)
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code == 0
    memory = deployment.reopen()
    memory.update(secret, RENEWED)  # the snapshot holds the first text, history both
    memory.delete(secret)
    deployment.close()
    code, report = erase(cli, deployment, "--user", "carol")
    assert code == 0, report
    assert hits(deployment, PASSPORT, RENEWED) == []
    assert report["deleted"] == [] and report["already_deleted"] == [secret]
    assert report["erased"]["verified"] == {"files": len(store_files(deployment)), "hits": []}


def test_a_user_erasure_names_deleted_memories_no_record_ties_to_a_user(
    make_deployment: Any, cli: Any
) -> None:
    deployment = make_deployment(count=10)
    add(deployment.memory, KEPT)
    unknown = add(deployment.memory, PASSPORT)
    deployment.memory.delete(unknown)  # added and deleted between snapshots: no record of carol
    deployment.close()
    code, report = erase(cli, deployment, "--user", "carol")
    assert code == 0, report
    assert report["erased"]["unattributed"] == [unknown]
    assert hits(deployment, PASSPORT)  # not the user's as far as any record says: left, named
    text = cli("forget", unknown, "--erase", "--dry-run", config=deployment.config)
    assert text.code == 0
    assert f"would erase the text left of {unknown} (deleted earlier)" in text.out


def wal_deployment(make_deployment: Any, cli: Any) -> Any:
    deployment = make_deployment(count=10)
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    memory = deployment.reopen()
    add(memory, KEPT)
    secret = add(memory, PASSPORT)
    memory.update(secret, RENEWED)
    deployment.close()
    return deployment


def test_a_wal_erasure_through_the_agent_leaves_no_byte_in_the_main_files_or_the_wal(
    make_deployment: Any, cli: Any, tmp_path: Path
) -> None:
    deployment = wal_deployment(make_deployment, cli)
    sock = tmp_path / "run" / "memsync-agent.sock"
    with AppProcess(deployment.paths.root, agent=sock, interval=0.02, users=("alice",)) as app:
        code, report = erase(cli, deployment, "--user", "carol")
        found = hits(deployment, PASSPORT, RENEWED)  # at once: the app still runs
        wal = {p.name for p in store_files(deployment) if p.name.endswith("-wal")}
        stats = app.stop()
    assert code == 0, report
    assert report["route"] == "agent"
    assert "memsync agent: checkpoint from pid" in app.log_text()  # run alone in the app
    assert found == []
    assert wal == {"history.db-wal", "storage.sqlite-wal"}  # the app's connections keep them
    checkpoint = report["erased"]["checkpoint"]
    assert "history.db" in checkpoint and "collection mem0" in checkpoint
    assert set(checkpoint.values()) == {"truncated"}
    assert stats["failures"] == 0, stats["errors"]


def test_a_wal_erasure_with_the_app_stopped_leaves_no_byte(make_deployment: Any, cli: Any) -> None:
    deployment = wal_deployment(make_deployment, cli)
    code, report = erase(cli, deployment, "--user", "carol")
    assert code == 0, report
    assert report["route"] == "direct"
    assert hits(deployment, PASSPORT, RENEWED) == []
    assert report["erased"]["verified"]["hits"] == []


READER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN")
connection.execute("SELECT count(*) FROM history").fetchone()
print("reading", flush=True)
sys.stdin.read()
"""


def test_a_reader_pinning_the_wal_makes_the_erasure_say_so_and_exit_non_zero(
    make_deployment: Any, cli: Any
) -> None:
    deployment = wal_deployment(make_deployment, cli)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(deployment.paths.history_db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "reading"
        result = cli("forget", "--user", "carol", "--erase", "--yes", config=deployment.config)
        left = hits(deployment, PASSPORT, RENEWED)  # the reader's snapshot keeps the old pages
    finally:
        reader.communicate("", timeout=30)
    assert result.code == 4, result.out + result.err
    assert left  # the report is right: the text is still in the files while the reader reads
    assert "rewritten" not in result.out
    assert "history.db" in result.out and "NOT verified gone" in result.out
    assert "run the same command again" in result.out
    again = cli("forget", "--user", "carol", "--erase", "--yes", "--json", config=deployment.config)
    assert again.code == 0, again.out + again.err
    assert hits(deployment, PASSPORT, RENEWED) == []
    assert (
        sqlite3.connect(deployment.paths.history_db).execute("PRAGMA journal_mode").fetchone()[0]
        == "wal"
    )


def test_reconcile_erasing_a_resurrected_erased_memory_says_when_its_text_is_not_proven_gone(
    make_deployment: Any, cli: Any, tmp_path: Path
) -> None:
    from memsync.demo import deployment as build

    deployment = make_deployment(count=10)
    deployment.close()
    assert cli("tune", "--wal", config=deployment.config).code == 0
    memory = deployment.reopen()
    secret = add(memory, PASSPORT)
    memory.update(secret, RENEWED)
    deployment.close()
    older = build.copy_qdrant(deployment.paths, tmp_path / "older")
    code, report = erase(cli, deployment, secret)
    assert code == 0, report
    build.put_back_qdrant(deployment.paths, older)  # an older copy brings the erased point back
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(deployment.paths.history_db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "reading"
        result = cli("reconcile", "--no-snapshot", "--json", config=deployment.config)
        text = cli("reconcile", "--no-snapshot", "--dry-run", config=deployment.config)
    finally:
        reader.communicate("", timeout=30)
    assert result.code == 4, result.out + result.err
    outcome = result.json()
    assert outcome["erased_again"] == [secret]
    assert outcome["erased_unverified"], outcome  # a reader pins the WAL: not proven gone
    assert text.code == 0, text.out  # nothing left to plan: the point is deleted again
    again = cli("forget", secret, "--erase", "--yes", "--json", config=deployment.config)
    assert again.code == 0, again.out + again.err  # the fix the report names, once the reader ends
    assert again.json()["erased"]["verified"]["hits"] == []
    assert hits(deployment, PASSPORT, RENEWED) == []


def test_a_scope_a_restore_rolled_back_entirely_is_erased_from_the_pre_restore_copies(
    deployment: Any, cli: Any
) -> None:
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    marker = "zoe's locker code is ZK-5510-rolledback"
    memory = deployment.reopen()
    added = memory.add(marker, user_id="zoe", infer=False)["results"][0]["id"]
    deployment.close()
    assert cli("restore", made.json()["id"], "--force", config=deployment.config).code == 0
    root = deployment.paths.root
    held = [p for p in root.rglob("*") if p.is_file() and marker.encode() in p.read_bytes()]
    assert held and all(".pre-restore-" in str(p) for p in held)  # only in the copies now

    looked = cli("forget", "--user", "zoe", "--erase", "--dry-run", config=deployment.config)
    assert looked.code == 0, looked.out + looked.err
    assert f"would erase 1 a restore rolled back from the pre-restore copies: {added}" in looked.out
    erased = cli("forget", "--user", "zoe", "--erase", "--yes", "--json", config=deployment.config)

    assert erased.code == 0, erased.out + erased.err
    assert erased.json()["erased"]["only_in_copies"] == [added]
    assert [p for p in root.rglob("*") if p.is_file() and marker.encode() in p.read_bytes()] == []
    again = cli("forget", "--user", "zoe", "--erase", "--yes", config=deployment.config)
    assert again.code == 3 and "no memory of user_id=zoe in the store" in again.out


@pytest.mark.parametrize("name", ["look", "look at alice"])  # the removal is one shell word
def test_an_erasure_names_the_copy_a_restore_to_made_and_how_to_remove_it(
    deployment: Any, cli: Any, tmp_path: Path, name: str
) -> None:
    """``restore --to DIR`` is a copy memsync made: the erasure lists it as a copy that still
    holds the text (it does not rewrite a copy the operator asked for), with its removal,
    shell-quoted (pasted, ``rm -r /srv/look at alice`` would remove other paths)."""
    deployment.close()
    victim = deployment.seeded.live[0]
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    look = tmp_path / name
    copied = cli("restore", made.json()["id"], "--to", str(look), config=deployment.config)
    assert copied.code == 0, copied.out + copied.err

    erased = cli("forget", victim, "--erase", "--yes", "--json", config=deployment.config)

    assert erased.code == 0, erased.out + erased.err
    (listed,) = [c for c in erased.json()["erased"]["copies"] if c["kind"] == "restore-to-copy"]
    assert listed["where"] == str(look) and listed["holds"] == "yes"
    assert shlex.split(listed["remove"]) == ["rm", "-r", str(look)], listed["remove"]
