"""An app SIGKILLed between its two writes, then ``snapshot create``.

mem0 adds the point, then writes the ADD event. An app killed between the two leaves an
``orphan-point`` that never settles. check waits the in-flight margin out and reports it (exit
3). ``snapshot create`` captures 5 times 0.2 s apart, about a second in all, shorter than the
margin (2 s by default), so the dead write is still "in flight" at its last capture: it keeps the
pair as "1 writes caught in the capture could not be settled" and exits 0, never judging the
orphan point its pair holds (the app is dead: nothing will land).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import HASH

APP = """
import sys
from pathlib import Path
from memsync.demo import deployment as build
memory = build.open_memory(build.Paths.at(Path(sys.argv[1])), embedder=sys.argv[2])
def stopped_between_the_two_writes(*args, **kwargs):  # the point is in; the ADD event is next
    print("between", flush=True)
    sys.stdin.read()
memory.db.add_history = stopped_between_the_two_writes
memory.add("parks on the third floor", user_id="kim", infer=False)
"""


@pytest.mark.xfail(
    strict=True,
    reason="snapshot create settles for about a second, less than the in-flight margin: a "
    "killed app's orphan point is kept as an unsettled write, exit 0",
)
def test_snapshot_create_after_an_app_killed_between_its_two_writes_reports_the_orphan(
    make_deployment: Any, cli: Any
) -> None:
    deployment = make_deployment(in_flight_margin_s=5.0)  # settles, as 2 s does, in no capture
    deployment.close()
    app = subprocess.Popen(
        [sys.executable, "-c", APP, str(deployment.paths.root), HASH],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == "between"
    finally:
        app.send_signal(signal.SIGKILL)
        app.wait(timeout=30)

    created = cli("snapshot", "create", "--json", config=deployment.config)

    document = json.loads(created.out)
    errors = [f["code"] for f in document["check"]["error_findings"]]
    assert errors == ["orphan-point"], created.out  # nothing is in flight: the app died
    assert created.code == 3
