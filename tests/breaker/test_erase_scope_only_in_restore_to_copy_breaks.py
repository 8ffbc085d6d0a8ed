"""Breaker: a scope erasure finds the scope in a ``restore --to`` copy memsync made.

zoe's memories are written and shipped by Litestream (no snapshot holds them); the operator
makes ``restore --at latest --to DIR`` to look (recorded in ``state_dir/restored-to.json``);
the app then deletes zoe's memories through mem0, whose history rows keep their texts.
``forget --user zoe --erase`` looks for the scope's past ids in local snapshots, the erasure
ledger and the ``restore --to`` copies: it finds zoe's ids in DIR's points, blanks the live
history rows of those ids, and lists DIR with its removal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.process.test_daemon import stop
from tests.process.test_restore_at import running, shipped

TEXT = "zoe's locker code is 4471-{n}"


@pytest.mark.slow(reason="the daemon and Litestream shipping, a restore --at --to, an erasure")
def test_a_scope_only_a_restore_to_copy_still_holds_is_erased_and_the_copy_listed(
    make_deployment: Any, cli: Any, tmp_path: Path
) -> None:
    deployment, daemon = running(make_deployment, tmp_path, cli)
    try:
        memory = deployment.reopen()
        ids = [
            memory.add(TEXT.format(n=n), user_id="zoe", infer=False)["results"][0]["id"]
            for n in range(3)
        ]
        deployment.close()
        shipped(cli, deployment)
    finally:
        code, err = stop(daemon)
    assert code == 0, err
    look = tmp_path / "look"
    copied = cli("restore", "--at", "latest", "--to", str(look), config=deployment.config)
    assert copied.code == 0, copied.out + copied.err
    memory = deployment.reopen()
    for memory_id in ids:  # the app deletes them through mem0: history keeps the texts
        memory.delete(memory_id)
    deployment.close()

    erased = cli("forget", "--user", "zoe", "--erase", "--yes", "--json", config=deployment.config)

    assert erased.code == 0, erased.out + erased.err
    copies = (erased.json()["erased"] or {}).get("copies") or []
    assert [c["where"] for c in copies if c["kind"] == "restore-to-copy"] == [str(look)]
    assert b"zoe's locker code" not in deployment.paths.history_db.read_bytes()
