"""Every field docs/reference/json-output.md documents, in the real output of each command.

One deployment with an S3 bucket goes through the commands the page documents (snapshots, a
damaged pair, reconcile, forget, erase, the queue, restore, migrate ...); each command's JSON
document is collected and checked against its section's key paths
(``tests/helpers/json_contract.py``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memsync.demo import deployment as build
from tests.conftest import s3_section
from tests.helpers import json_contract, litestream
from tests.helpers.holders import app_holding
from tests.helpers.migrate import target_config
from tests.process.test_protect import poll

# sections whose documents are small and closed: no top-level key beyond the documented ones
CLOSED = {
    "`doctor --json`",
    "`recover --json`",
    "`restore --resume --json`",
    "`restore --to DIR --json`",
    "`snapshot list --json`",
    "`snapshot upload --json`",
    "`snapshot pin --json`, `snapshot unpin --json`",
    "`job --json`",
    "`pending list --json`",
    "`pending apply --json`",
    "`snapshot prune --json`",
    "`tune --json`",
    "`protect --json`",
    "`protect --status --json`",
    "`protect --verify --json`",
    "`repair-meta --json`",
    "`review --json`, `export-context --json`",
    "`audit --json`",
    "`config validate --json`, `config show --json`",
    "`snapshot download --json`",
    "`snapshot create --dry-run --json`",
    "Errors",
}

# documented fields no run here shows, and why (each stays documented and reviewed by hand)
NOT_SHOWN = {
    "`migrate --json`": {"switch"},  # only with --switch (tests/process/test_migrate_switch*)
    # only with the app's agent (tests/breaker/test_snapshot_hold_breaks.py)
    "`snapshot create --json`: `writes_held`": {"writes_held.s", "writes_held.until"},
}

ROUTES = "Routes: `forget`, `prune`, `reconcile`, `confirm`, `pending apply`"

PIN = "`snapshot pin --json`, `snapshot unpin --json`"

# fields the page documents for some of a section's commands only
REVIEW = "`review --json`, `export-context --json`"
CONFIG = "`config validate --json`, `config show --json`"

ONLY = {
    ROUTES: {"pending_id": {"forget", "prune"}},
    REVIEW: {"user_id": {"export-context"}, "due": {"review"}},
    CONFIG: {"config": {"config show"}, "writable_paths": {"config show"}},
    PIN: {"pin": {"snapshot pin"}, "was_pinned": {"snapshot unpin"}},
}


def _doc(result: Any) -> dict[str, Any]:
    return json.loads(result.out) if result.out.strip() else json.loads(result.err.splitlines()[-1])


def _replicate(binary: Path, config: Path, replica: Path) -> None:
    """Run Litestream until every file's replica holds a WAL segment (for restore --at)."""
    shipping = subprocess.Popen(
        [str(binary), "replicate", "-config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll(
            "both files replicated",
            lambda: all(
                any((replica / name).glob("generations/*/wal/*"))
                for name in ("history.db", "collection/mem0")
            ),
        )
    finally:
        shipping.terminate()
        shipping.wait(timeout=60)


def collect(make_deployment: Any, cli: Any, bucket: str, s3_endpoint: str, tmp_path: Path):
    """``{section heading: [document, ...]}`` from real runs of every documented command."""
    binary = litestream.ensure()
    protect = f'\n[protect]\nlitestream = "{binary}"\ndirectory = "{tmp_path / "replica"}"\n'
    d = make_deployment(extra_config=s3_section(s3_endpoint, bucket) + protect)
    d.close()
    config = d.config
    live = d.seeded.live
    docs: dict[str, list[dict[str, Any]]] = {}

    def run(section: str, *argv: str, codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
        result = cli(*argv, "--json", config=config)
        assert result.code in codes, (argv, result.code, result.err)
        document = _doc(result)
        docs.setdefault(section, []).append(document)
        return document

    create = "`snapshot create --json`"
    first = run(create, "snapshot", "create", "--upload")["id"]
    run("`snapshot list --json`", "snapshot", "list")
    run("`snapshot verify --json`", "snapshot", "verify", first)
    run("`snapshot upload --json`", "snapshot", "upload", first, "--verify")
    run(PIN, "snapshot", "pin", first, "--reason", "r")
    run("`snapshot list --json`", "snapshot", "list")
    run(PIN, "snapshot", "unpin", first)
    run("`snapshot verify --scheduled --json`", "snapshot", "verify", "--scheduled")
    run("`snapshot download --json`", "snapshot", "download", first, str(tmp_path / "down"))
    run("`snapshot create --dry-run --json`", "snapshot", "create", "--dry-run")
    run(CONFIG, "config", "validate")
    run(CONFIG, "config", "show")
    run(REVIEW, "review", "--older-than", "1s")
    user = next(iter(docs[REVIEW][0]["memories"]))["source"]["user_id"]
    run(REVIEW, "export-context", "--user", user)
    run("`audit --json`", "audit", "--since", "7d")
    run("`doctor --json`", "doctor", codes=(0, 3))
    assert cli("job", "check", config=config).code == 0  # a recorded run for status
    run("`status --json`", "status", codes=(0, 3))
    run("`job --json`", "job", "check", "--dry-run")
    run("`tune --json`", "tune", "--wal", "--dry-run")
    run("`tune --json`", "tune", "--wal")
    run("`protect --json`", "protect", "--dry-run")
    run("`protect --json`", "protect")
    run("`protect --status --json`", "protect", "--status", codes=(3,))  # no Litestream runs
    routes = ROUTES
    run(routes, "forget", live[0], "--yes", "--no-snapshot")
    run(routes, "confirm", live[1])
    run(routes, "prune")
    run("`recover --json`", "recover", live[0], "--from", first, "--dry-run")
    run("`recover --json`", "recover", live[0], "--from", first)
    # damage: a point without its history, and a point lost with its history kept
    memory = d.reopen()
    build.delete_with_failing_history(memory, d.paths, live[2])
    d.close()
    build.delete_history_rows(d.paths, live[3])
    run("`check --json`", "check", codes=(3,))
    run(create, "snapshot", "create", codes=(3,))
    reconciled = run("`reconcile --json`", "reconcile")
    docs[routes].append(reconciled)
    run("`forget --erase --json`", "forget", live[4], "--erase", "--dry-run")  # replicas' plan
    run("`forget --erase --json`", "forget", live[4], "--erase", "--yes")
    run("`snapshot purge-memory --json`", "snapshot", "purge-memory", live[5], "--dry-run")
    with app_holding(d.paths.qdrant):
        run(routes, "forget", live[6], "--yes", "--no-snapshot", codes=(5,))
        run("`pending list --json`", "pending", "list")
        run("`pending apply --json`", "pending", "apply", "--dry-run")
    run("`pending apply --json`", "pending", "apply")
    run("`snapshot prune --json`", "snapshot", "prune", "--dry-run")
    run("`restore --json`", "restore", "latest", "--dry-run")
    run("`restore --json`", "restore", first, "--force")
    run("`restore --resume --json`", "restore", "--resume")
    run("`restore --to DIR --json`", "restore", first, "--to", str(tmp_path / "copy"))
    _replicate(binary, d.paths.root / "memsync-state" / "litestream.yml", tmp_path / "replica")
    at = "`restore --at TIME --json`"
    run(at, "restore", "--at", "latest", "--dry-run")
    run("`protect --verify --json`", "protect", "--verify")
    run(at, "restore", "--at", "latest", "--force")
    run(at, "restore", "--at", "latest", "--to", str(tmp_path / "copy-at"))
    new = target_config(d.paths, tmp_path / "new", embedder="memsync_hash256", dims=256)
    run("`migrate --json`", "migrate", "--to", str(new))
    run("`repair-meta --json`", "repair-meta", "--dry-run")
    run("Errors", "restore", "no-such-snapshot", codes=(11, 1, 10))
    return docs


@pytest.mark.slow(reason="about 40 real commands in a row: captures, uploads, writes, a migration")
def test_every_documented_field_is_in_the_real_output(
    make_deployment, cli, bucket, s3_endpoint, tmp_path
):
    docs = collect(make_deployment, cli, bucket, s3_endpoint, tmp_path)
    documented = json_contract.sections()
    prefixes = {heading.split(":")[0] for heading in documented}
    assert set(docs) <= set(documented) | prefixes, set(docs) - set(documented) - prefixes
    problems: list[str] = []
    for heading, paths in documented.items():
        if not paths:
            continue
        # "`snapshot create --json`: `check`" documents a part of snapshot create's document
        documents = docs.get(heading) or docs.get(heading.split(":")[0], [])
        assert documents, f"no command run for {heading}"
        shown = [p for p in paths if p not in NOT_SHOWN.get(heading, set())]
        for path, commands in ONLY.get(heading, {}).items():
            theirs = [d for d in documents if d["command"] in commands]
            problems += json_contract.check_section(theirs, [path])
            shown.remove(path)
        problems += [
            f"{heading}: {problem}"
            for problem in json_contract.check_section(
                documents, shown, closed=paths if heading in CLOSED else None
            )
        ]
    assert not problems, "\n".join(problems)
