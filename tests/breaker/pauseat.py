"""Run the memsync CLI and pause it at one named function until the test lets it go on.

Usage::

    python -m tests.breaker.pauseat MODULE:QUALNAME --nth N --flag PATH -- memsync arguments...

Before the ``N``-th call of ``MODULE.QUALNAME`` runs, the process creates ``PATH`` and waits
(polling, at most 120 s) until ``PATH`` is removed, then makes the call: a real process held at
an exact step while another memsync runs. Nothing else changes (as in ``killat``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.breaker import killat


def arm(target: str, nth: int, flag: Path) -> None:
    """Make the ``nth`` call of ``target`` create ``flag`` and wait until it is removed."""
    module_name, qualname = target.split(":")
    owner: Any = __import__(module_name, fromlist=["_"])
    *parents, name = qualname.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    original = getattr(owner, name)
    calls = [0]

    def paused_at_step(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == nth:
            flag.touch()
            deadline = time.monotonic() + 120
            while flag.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return original(*args, **kwargs)

    setattr(owner, name, paused_at_step)
    killat.rebind(original, paused_at_step)


ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def paused(target: str, args: list[str], flag: Path) -> Iterator[subprocess.Popen[str]]:
    """``memsync ARGS`` in a process held before the first call of ``target``; yields it held.

    Removing ``flag`` lets it go on. Leaving the block removes the flag and waits for the
    process (killed after 300 s), so nothing outlives the test.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.breaker.pauseat", target, "--nth", "1", "--flag",
         str(flag), "--", *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(2400):
            if flag.exists() or process.poll() is not None:
                break
            time.sleep(0.05)
        assert flag.exists(), process.communicate()
        yield process
    finally:
        flag.unlink(missing_ok=True)
        if process.poll() is None:
            try:
                process.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()


def main(argv: list[str]) -> int:
    """``pauseat TARGET --nth N --flag PATH -- ARGS``: arm, then run ``memsync ARGS``."""
    split = argv.index("--")
    head, rest = argv[:split], argv[split + 1 :]
    nth = int(head[head.index("--nth") + 1]) if "--nth" in head else 1
    flag = Path(head[head.index("--flag") + 1])
    import memsync.forget  # noqa: F401 - the modules whose imported names are rebound
    from memsync.cli import main as memsync_main

    arm(head[0], nth, flag)
    return memsync_main(rest)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
