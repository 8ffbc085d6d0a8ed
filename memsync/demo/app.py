"""The demo's app: one ``mem0.Memory`` open for its whole life, writing and searching.

The demo (act 9) and the tests run it as a real process to show and prove maintenance while
the app runs. Usage::

    python -m memsync.demo.app ROOT [--agent SOCKET] [--interval SECONDS] [--pidfile FILE]
                                     [--stats FILE] [--quiet-writes] [--adds-only] [--users a,b]
                                     [--mem0-config FILE] [--acks FILE]

Builds the demo deployment's Memory at ROOT (on pgvector when ``ROOT/pg-url`` exists,
``deployment.Paths.at``; ``--embedder``: ``memsync_hash``, the default, or
``memsync_minilm``, the demo's offline MiniLM; ``--mem0-config FILE``: the mem0 dict in a
JSON file, or YAML by a .yaml/.yml suffix, as an app reading its config from a file, instead of
the demo's own dict), attaches ``memsync.agent`` when
``--agent`` is given, writes its pid to ``--pidfile``, prints ``ready <pid>`` and then, every
``--interval`` seconds (default 0.05), adds a memory (infer=False) for one of ``--users``
(default: the demo users), searches, and updates or deletes one of the memories *it* added (never others), unless
``--quiet-writes`` (then it only searches) or ``--adds-only`` (then it only adds: a restore
may take away what it added). It never touches memories it did not add, so tests
can assert exactly what memsync did to the rest. ``--acks FILE``: after each add mem0
acknowledged, a line ``<unix seconds> <memory_id>`` appended to FILE and flushed, so the
writes a SIGKILL cuts short are still counted (the lost-disk act and ``bench/bench_rpo.py``).

SIGUSR1: write ``ROOT/app-view.json`` = ``{"seq": n, "ids": [...]}``, every memory id the app's
own ``get_all`` returns for each demo user (its in-memory view), ``seq`` counting the dumps.
SIGTERM/SIGINT: finish the current operation, close the Memory (the agent removes its socket),
write the stats JSON to ``--stats`` (and stdout) and exit 0::

    {"writes": n, "failures": n, "errors": [...], "searches": n,
     "latency_ms": {"p50": x, "p99": x, "max": x}, "added": [...ids still live...]}

Failures count exceptions from mem0 and ERROR records of mem0's loggers (mem0ai 2.2.1 only logs
some failed history writes).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from memsync.demo import deployment as build


class ErrorCounter(logging.Handler):
    """Counts ERROR records (mem0ai 2.2.1 only logs some failed history writes)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record's message."""
        self.messages.append(record.getMessage())


class _Flags:
    stop = False
    dump = False


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _dump_view(memory: Any, root: Path, seq: int) -> None:
    ids: list[str] = []
    for user in build.USERS:
        result = memory.get_all(filters={"user_id": user}, top_k=100_000, show_expired=True)
        ids += [item["id"] for item in result["results"]]
    temporary = root / "app-view.json.tmp"
    temporary.write_text(json.dumps({"seq": seq, "ids": sorted(ids)}), encoding="utf-8")
    os.replace(temporary, root / "app-view.json")


def _step(
    memory: Any,
    rng: random.Random,
    added: list[str],
    quiet: bool,
    users: list[str],
    adds: bool,
    acks: IO[str] | None = None,
) -> bool:
    """One round of app traffic for ``users`` (only adds when ``adds``); True when it wrote."""
    memory.search(build.fact(rng), filters={"user_id": rng.choice(users)}, top_k=3)
    if quiet:
        return False
    action = rng.random()
    if action < 0.6 or len(added) < 5 or adds:
        result = memory.add(build.fact(rng), user_id=rng.choice(users), infer=False)
        ids = [item["id"] for item in result["results"]]
        added += ids
        if acks is not None:
            acks.write("".join(f"{time.time():.6f} {memory_id}\n" for memory_id in ids))
            acks.flush()
    elif action < 0.8:
        memory.update(rng.choice(added), build.fact(rng))
    else:
        memory.delete(added.pop(rng.randrange(len(added))))
    return True


def open_memory_from(paths: build.Paths, mem0_config: Path) -> Any:
    """Build ``mem0.Memory`` from the dict in ``mem0_config`` (JSON, or YAML by its suffix).

    As ``deployment.open_memory`` does otherwise: ``MEM0_DIR`` is the deployment's, telemetry
    off, the demo's offline providers registered. Raises what mem0 raises for a bad dict.
    """
    text = mem0_config.read_text(encoding="utf-8")
    if mem0_config.suffix in (".yaml", ".yml"):
        import yaml

        settings = yaml.safe_load(text)
    else:
        settings = json.loads(text)
    paths.mem0_dir.mkdir(parents=True, exist_ok=True)
    os.environ["MEM0_DIR"] = str(paths.mem0_dir)
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    logging.getLogger("mem0").setLevel(logging.ERROR)
    from mem0 import Memory

    import memsync.demo.providers  # noqa: F401 - registers the offline providers

    return Memory.from_config(settings)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--agent", type=Path, default=None)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--pidfile", type=Path, default=None)
    parser.add_argument("--stats", type=Path, default=None)
    parser.add_argument("--quiet-writes", action="store_true")
    parser.add_argument("--adds-only", action="store_true")
    parser.add_argument("--users", default=",".join(build.USERS))
    parser.add_argument("--embedder", default="memsync_hash")
    parser.add_argument("--mem0-config", type=Path, default=None)
    parser.add_argument("--agent-options", type=json.loads, default={})
    parser.add_argument("--acks", type=Path, default=None)
    return parser.parse_args(argv)


def _open(args: argparse.Namespace) -> Any:
    """The app's Memory: from ``--mem0-config``, else the demo deployment's own dict."""
    paths = build.Paths.at(args.root)
    if args.mem0_config is not None:
        return open_memory_from(paths, args.mem0_config)
    return build.open_memory(paths, embedder=args.embedder)


def main(argv: list[str] | None = None) -> int:
    """Run the app until SIGTERM/SIGINT (see the module docstring); return 0."""
    args = _arguments(argv)
    users = args.users.split(",")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    counter = ErrorCounter()
    flags = _Flags()
    signal.signal(signal.SIGTERM, lambda *_: setattr(flags, "stop", True))
    signal.signal(signal.SIGINT, lambda *_: setattr(flags, "stop", True))
    signal.signal(signal.SIGUSR1, lambda *_: setattr(flags, "dump", True))
    memory = _open(args)
    logging.getLogger("mem0").addHandler(counter)
    if args.agent is not None:
        from memsync.agent import attach

        attach(memory, args.agent, **args.agent_options)
    if args.pidfile is not None:
        args.pidfile.write_text(f"{os.getpid()}\n", encoding="utf-8")
    print(f"ready {os.getpid()}", flush=True)
    rng = random.Random(os.getpid())
    added: list[str] = []
    latencies: list[float] = []
    writes = failures = searches = seq = 0
    errors: list[str] = []
    acks = None if args.acks is None else args.acks.open("a", encoding="utf-8")
    while not flags.stop:
        if flags.dump:
            flags.dump = False
            seq += 1
            _dump_view(memory, args.root, seq)
        started = time.perf_counter()
        try:
            wrote = _step(memory, rng, added, args.quiet_writes, users, args.adds_only, acks)
            writes += wrote
            searches += 1
        except Exception as error:  # noqa: BLE001 - every failure is what we count
            failures += 1
            errors.append(f"{type(error).__name__}: {error}")
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(args.interval)
    build.close_memory(memory)
    if acks is not None:
        acks.close()
    stats = {
        "writes": writes,
        "failures": failures + len(counter.messages),
        "errors": (errors + counter.messages)[:20],
        "searches": searches,
        "latency_ms": {
            "p50": round(statistics.median(latencies), 3) if latencies else 0.0,
            "p99": round(_percentile(latencies, 0.99), 3),
            "max": round(max(latencies, default=0.0), 3),
        },
        "added": sorted(added),
    }
    text = json.dumps(stats)
    if args.stats is not None:
        args.stats.write_text(text, encoding="utf-8")
    print(text, flush=True)
    return 0


def _limit_files(count: int) -> None:
    """In the child before exec: RLIMIT_NOFILE soft and hard ``count`` (systemd's default)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


class AppProcess:
    """The app above as a child process, for tests: ``with AppProcess(root, agent=sock) as app:``.

    ``view()`` asks the app for its own in-memory view (SIGUSR1) and returns its memory ids;
    ``stop()`` sends SIGTERM and returns the stats document. ``agent_options``: ``attach``'s
    keyword arguments; ``user``: run the app as that uid (and gid); ``nofile``: its
    RLIMIT_NOFILE; ``acks``: the app's ``--acks`` file.
    """

    def __init__(
        self,
        root: Path,
        *,
        agent: Path | None = None,
        interval: float = 0.05,
        quiet_writes: bool = False,
        adds_only: bool = False,
        users: Sequence[str] = (),
        embedder: str = "memsync_hash",
        agent_options: dict[str, Any] | None = None,
        user: int | None = None,
        nofile: int | None = None,
        acks: Path | None = None,
    ) -> None:
        argv = [sys.executable, "-m", "memsync.demo.app", str(root), "--interval", str(interval)]
        if agent is not None:
            argv += ["--agent", str(agent)]
        if agent_options:
            argv += ["--agent-options", json.dumps(agent_options)]
        if quiet_writes:
            argv.append("--quiet-writes")
        if adds_only:
            argv.append("--adds-only")
        if users:
            argv += ["--users", ",".join(users)]
        argv += ["--embedder", embedder]
        if acks is not None:
            argv += ["--acks", str(acks)]
        self.root = root
        self.stats: dict[str, Any] | None = None
        self.log = root.parent / f"{root.name}-app.log"  # the app's stderr (its logging)
        with self.log.open("a", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                user=user,
                group=user,
                extra_groups=None if user is None else [],
                preexec_fn=None if nofile is None else functools.partial(_limit_files, nofile),
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("ready"):
            self.process.kill()
            self.process.communicate(timeout=30)
            raise RuntimeError(f"the app did not start: {line!r} {self.log_text()[-2000:]}")
        self.pid = self.process.pid
        self._seq = 0

    def __enter__(self) -> AppProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        # SIGTERM, as a service manager stops it: a SIGKILL mid-write leaves history.db a hot
        # journal, which read-only commands after the block rightly refuse (exit 75).
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.communicate(timeout=30)

    def log_text(self) -> str:
        """What the app logged so far (stderr: mem0's and the agent's ``logging``)."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def view(self, timeout_s: float = 20.0) -> set[str]:
        """The memory ids the app's own ``get_all`` returns now (its in-memory store)."""
        path = self.root / "app-view.json"
        self._seq += 1
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if path.is_file():
                document = json.loads(path.read_text(encoding="utf-8"))
                if document["seq"] >= self._seq:
                    return set(document["ids"])
            time.sleep(0.02)
        raise TimeoutError("the app did not write its view")

    def stop(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """SIGTERM; wait; return the stats document (writes, failures, errors, latency_ms)."""
        self.process.terminate()
        out, _ = self.process.communicate(timeout=timeout_s)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if self.process.returncode != 0 or not lines:
            raise RuntimeError(
                f"the app exited {self.process.returncode}: {self.log_text()[-2000:]}"
            )
        self.stats = json.loads(lines[-1])
        return self.stats


if __name__ == "__main__":
    raise SystemExit(main())
