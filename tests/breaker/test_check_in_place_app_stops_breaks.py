"""Breaker: ``check`` reading WAL stores in place while the app closes its last connection.

``read_in_place`` decides from the files (``_pinnable``: WAL with its ``-shm``, a live app) to
hold a read snapshot of each for the whole check, then opens them one by one. The app closing
history.db between the decision and history's snapshot (it stops or restarts: SQLite
checkpoints and removes the ``-wal`` and ``-shm``) sends ``connect_readonly`` down its
"WAL without a writer" path, which opens a plain connection (``immutable=1``), not the
``_Held`` one ``read_in_place`` asserts.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.breaker import pauseat


def test_check_in_place_survives_the_app_closing_history_as_it_pins(
    make_deployment: Any, tmp_path: Path
) -> None:
    deployment = make_deployment()
    deployment.close()
    history = deployment.paths.history_db
    vectors = sorted(deployment.paths.qdrant.rglob("storage.sqlite"))
    app = {p: sqlite3.connect(p, timeout=3.0) for p in (*vectors, history)}  # the running app
    for connection in app.values():
        assert connection.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    assert all(Path(f"{p}-shm").exists() for p in app)
    flag = tmp_path / "opening-history.flag"
    target = "memsync.stores.sqlite_files:_open_read_snapshot"
    args = ["check", "--json", "--config", str(deployment.config)]
    check = subprocess.Popen(
        [sys.executable, "-m", "tests.breaker.pauseat", target, "--nth", str(len(app)),
         "--flag", str(flag), "--", *args],
        cwd=pauseat.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(2400):
            if flag.exists() or check.poll() is not None:
                break
            time.sleep(0.05)
        assert flag.exists(), check.communicate()
        app.pop(history).close()  # the app stops: history.db's -wal and -shm go
        assert not Path(f"{history}-shm").exists()
        flag.unlink()
        out, err = check.communicate(timeout=300)
    finally:
        flag.unlink(missing_ok=True)
        if check.poll() is None:
            check.kill()
            check.communicate()
        for connection in app.values():
            connection.close()
    assert check.returncode in (0, 3), out + err
