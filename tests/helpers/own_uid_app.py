"""An app that runs as its own uid, as a service does: mem0ai 2.2.1 with the agent attached.

The app is ``compat_app.py serve`` in the 2.2.1 environment (built on the system Python, so uid
65534 can run it), as uid 65534 with systemd's usual ``LimitNOFILE=1024``, writing through its
own ``Memory`` every ``every_s``; memsync's tests are root, an allowed peer. ``stop()`` returns
the app's own count of writes and failed writes.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.helpers import app_envs
from tests.helpers.compat import APP, ROOT, App

NOBODY = 65534


def _limit_files(count: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


def chown_tree(root: Path, uid: int) -> None:
    """``root`` and everything under it given to ``uid`` (and its group)."""
    os.chown(root, uid, uid)
    for directory, names, files in os.walk(root):
        for name in [*names, *files]:
            os.chown(Path(directory) / name, uid, uid, follow_symlinks=False)


class OwnUidApp:
    """The app as uid 65534 (RLIMIT_NOFILE ``nofile``), its agent on ``self.socket``."""

    def __init__(
        self,
        agent_options: dict[str, Any] | None = None,
        *,
        nofile: int = 1024,
        every_s: float = 0.05,
        socket_dir: Path | None = None,
    ) -> None:
        assert os.getuid() == 0, "needs root: the app runs as uid 65534"
        assert app_envs.ready(app_envs.ON_SYSTEM_PYTHON), "make app-envs builds it"
        # under /tmp, not pytest's tmp_path (mode 0700, root's): uid 65534 must reach it
        self.root = Path(tempfile.mkdtemp(prefix="memsync-own-", dir="/tmp"))
        os.chmod(self.root, 0o755)
        self.app = App(self.root / "deployment", app_envs.ON_SYSTEM_PYTHON)
        self.ids = self.app.run(("seed", "4"))[0]["ids"]
        chown_tree(self.root, NOBODY)
        self.socket = (socket_dir or self.root / "run") / "memsync-agent.sock"
        environ = self.app.environ()
        environ.update(
            COMPAT_MEMSYNC_AGENT_PATH=str(ROOT), COMPAT_AGENT_SOCKET=str(self.socket),
            COMPAT_WRITE_EVERY_S=str(every_s),
            COMPAT_AGENT_OPTIONS=json.dumps(agent_options or {}),
        )  # fmt: skip
        self.process = subprocess.Popen(
            [str(self.app.python), str(APP), "serve"], env=environ, cwd=self.root,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            user=NOBODY, group=NOBODY, extra_groups=[],
            preexec_fn=functools.partial(_limit_files, nofile),
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("{"):
            self.process.kill()
            _, err = self.process.communicate(timeout=30)
            raise RuntimeError(f"the app did not start: {line!r} {err[-2000:]}")
        started = json.loads(line)
        self.pid = int(started["serving"])
        self.problem: str | None = started.get("problem")
        self.stderr = ""

    def __enter__(self) -> OwnUidApp:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)

    def fds(self) -> list[str]:
        """What each of the app's open descriptors points at (``/proc/PID/fd``)."""
        found = []
        for name in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                found.append(os.readlink(f"/proc/{self.pid}/fd/{name}"))
            except OSError:
                continue
        return found

    def rss_bytes(self) -> int:
        """The app's resident memory now."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def stop(self) -> dict[str, Any]:
        """SIGTERM; the app's own ``{"writes", "failures", "errors", "slowest_write_s"}``."""
        self.process.send_signal(signal.SIGTERM)
        out, self.stderr = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, self.stderr[-2000:]
        return dict(json.loads(out.strip().splitlines()[-1])[0])
