"""A memsync plugin that puts a failure inside a maintenance window: it fails or blocks on import.

memsync imports ``plugins`` when it builds its own ``Memory``, i.e. inside the window, after the
app was stopped. ``MEMSYNC_TEST_GATE=fail`` raises; ``MEMSYNC_TEST_GATE=block`` touches
``$MEMSYNC_TEST_GATE_FILE`` (the test's cue that the window is open) and then works for 60 s
in small steps, as slow Python code would, until interrupted. Anything else: imports cleanly.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MODE = os.environ.get("MEMSYNC_TEST_GATE", "")
if MODE == "fail":
    raise RuntimeError("the gate plugin fails inside the window, as the test asked")
if MODE == "block":
    marker = os.environ.get("MEMSYNC_TEST_GATE_FILE")
    if marker:
        Path(marker).touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)
