"""An app SIGKILLed between its two writes, then ``snapshot create``.

mem0 adds the point, then writes the ADD event. An app killed between the two leaves an
``orphan-point`` that never settles. check waits the in-flight margin out and reports it (exit
3); so must ``snapshot create``, which captures again only once the margin has passed since its
last capture: the dead write, in flight at the first, is the orphan point it is at the second
(the app is dead: nothing will land), not an unsettled write kept with exit 0.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

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
