"""restore: an app started after restore's first ``require_free`` and before the swap stops it.

``_put_in_place`` asked ``require_free`` once, then staged (on the fast path: copies and hashes
every file, the longest step), then renamed. A real mem0 app (memsync.demo.app) started while
the restore is held once the files are staged (at ``_fits_after``, tests.breaker.pauseat) opens
the old store, and the swap moved that store aside under it. Seen before ``require_free`` was
asked again just before the swap: the restore exited 0 with create's recorded clean judgement,
``memsync check`` right after said ok, while the app kept serving the moved-aside store, its
memories added meanwhile only in the ``.pre-restore-`` copy and its later writes failing
("attempt to write a readonly database"). Now the swap refuses (exit 12, naming the app) as the
restore does when the app holds the store from the start, the staged copies are removed and
the app's store is untouched.

The ``_swap`` case: nothing holds the store's lock from that second question through the
journal's fsyncs to the rename (a lock there would make the app fail to start), so an app
started in that instant (a systemd restart landing there) opened the store the swap then moved
aside. Now the swap looks at the lock where the store went: held, it is undone (the app's files
back under it, its writes in them) and the restore exits 12.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.breaker import pauseat
from tests.helpers.app import AppProcess


@pytest.mark.parametrize(
    "step",
    [
        "memsync.restore:_fits_after",  # the files are staged: restore asks again after this
        "memsync.restore:_swap",  # after that question: the journal's fsyncs, the rename
    ],
)
def test_an_app_started_before_the_swap_stops_the_swap(
    deployment: Any, cli: Any, tmp_path: Path, step: str
) -> None:
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    flag = tmp_path / "paused"
    with pauseat.paused(
        step,
        ["restore", made.json()["id"], "--force", "--json", "--config", str(deployment.config)],
        flag,
    ) as restore:
        with AppProcess(deployment.paths.root) as app:
            time.sleep(3)  # the app holds the (old) store and writes
            flag.unlink()
            out, err = restore.communicate(timeout=300)
            time.sleep(1)
            stats = app.stop()
    assert restore.returncode == 12, (
        restore.returncode,
        out[-600:],
        err[-600:],
        stats["errors"][:2],
    )
    assert "holds" in err or "pid" in err, err[-600:]
    assert stats["failures"] == 0, stats["errors"][:2]  # the app kept its store and its writes
    root = Path(deployment.paths.root)
    assert not list(root.rglob("*.restore-*")), list(root.rglob("*.restore-*"))  # staging removed
    assert not list(root.rglob("*.pre-restore-*"))  # nothing was moved aside
