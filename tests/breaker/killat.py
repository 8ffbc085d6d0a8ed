"""Run the memsync CLI and SIGKILL it at one named function: a real kill at an exact step.

Usage::

    python -m tests.breaker.killat MODULE:QUALNAME [--nth N] -- memsync arguments...

The process kills itself (``SIGKILL``, nothing runs after it) when ``MODULE.QUALNAME`` is called
for the ``N``-th time (default 1), before the call runs. Names other memsync modules imported
from it (``from x import f``) are rebound too, so the kill lands wherever the step is called.
Nothing else changes: the step is never replaced, only preceded by the kill.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any


def arm(target: str, nth: int) -> None:
    """Make the ``nth`` call of ``target`` (``module:Qual.name``) SIGKILL this process first."""
    module_name, qualname = target.split(":")
    owner: Any = importlib.import_module(module_name)
    *parents, name = qualname.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    original = getattr(owner, name)
    calls = [0]

    def killed_at_step(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(owner, name, killed_at_step)
    rebind(original, killed_at_step)


def rebind(original: Any, replacement: Any) -> None:
    """Point every memsync module's imported name for ``original`` at ``replacement``."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("memsync"):
            for attribute, value in list(vars(module).items()):
                if value is original:
                    setattr(module, attribute, replacement)


def main(argv: list[str]) -> int:
    """``killat TARGET [--nth N] -- ARGS``: arm, then run ``memsync ARGS``."""
    split = argv.index("--")
    head, rest = argv[:split], argv[split + 1 :]
    nth = int(head[head.index("--nth") + 1]) if "--nth" in head else 1
    import memsync.forget  # noqa: F401 - the modules whose imported names are rebound
    from memsync.cli import main as memsync_main

    arm(head[0], nth)
    return memsync_main(rest)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
