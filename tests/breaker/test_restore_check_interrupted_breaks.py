"""restore: a SIGTERM during the check after the swap reports a done restore as "interrupted".

8ce6de0 made a check after the swap that cannot run report the swap it made (exit 4,
``check_error``) because the old "try again" led users to restore --force a second time,
moving the restored stores aside again. The same happens when the check is stopped: memsync
turns SIGTERM (systemd stop, a TimeoutStopSec, Ctrl-C) into KeyboardInterrupt, which run_restore
does not catch after the swap, so the CLI prints only "interrupted" (exit 130): no snapshot
id, no moved_aside, nothing saying the stores were already replaced. Held here at the check
after the swap (``_in_place``, the fast path's; tests.breaker.pauseat) and sent SIGTERM. It
should say the restore was made (its report, the check not run), as check_error does.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.breaker import pauseat


def test_a_sigterm_during_the_check_after_the_swap_reports_the_swap(
    deployment: Any, cli: Any, tmp_path: Path
) -> None:
    deployment.close()
    made = cli("snapshot", "create", "--json", config=deployment.config)
    assert made.code == 0, made.err
    snapshot_id = made.json()["id"]
    flag = tmp_path / "paused"
    with pauseat.paused(
        "memsync.restore:_in_place",
        ["restore", snapshot_id, "--force", "--json", "--config", str(deployment.config)],
        flag,
    ) as restore:
        restore.send_signal(signal.SIGTERM)
        out, err = restore.communicate(timeout=120)
    aside = Path(f"{deployment.paths.history_db}.pre-restore-{snapshot_id}")
    assert aside.exists()  # the swap was made before the signal
    assert out.strip(), (restore.returncode, err[-600:])  # a report of the restore made
    report = json.loads(out)
    assert report["snapshot_id"] == snapshot_id and str(aside) in report["moved_aside"]
