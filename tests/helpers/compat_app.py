"""An app on one mem0ai version, run with that version's interpreter (tests/compat).

Standard library and the app's own mem0 only: it runs in ``build/apps/mem0ai-<version>/``,
never in memsync's environment. Each sub-command builds the app's ``Memory`` from the JSON
config in ``$COMPAT_MEM0_CONFIG`` (the offline providers are the ``memsync_app_providers``
plugin of that environment), runs each ``--``-separated command on it, and prints one JSON list
of their results:

* ``seed N``: add N memories (infer off) for users alice and bob, with a metadata key;
* ``read``: every memory (``get_all`` per user) and, for each, whether ``search`` finds it;
* ``delete ID``, ``drop-point ID`` (the point alone, as a failed write leaves it),
  ``add TEXT USER``, ``expire ID`` (an ``expiration_date`` in the past, as mem0 2.x sets it);
* ``serve``: attach memsync's agent (``memsync.agent`` from this checkout, standard library
  only) and write one memory every ``$COMPAT_WRITE_EVERY_S`` until SIGTERM; a command written
  to the file ``$COMPAT_CONTROL`` (``delete ID``, ``drop-point ID``) is run in between, and
  the file removed. ``$COMPAT_AGENT_OPTIONS``: ``attach``'s keyword arguments (JSON). On
  SIGTERM it prints ``{"writes", "failures", "errors", "slowest_write_s"}``: failures count
  the exceptions of its writes and the ERROR records of any logger but memsync's.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
USERS = ("alice", "bob")


class _ErrorRecords(logging.Handler):
    """ERROR records logged while the app runs (mem0 2.2.1 logs some failed writes only)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("memsync"):
            self.messages.append(f"{record.name}: {record.getMessage()}"[:200])


def memory() -> Any:
    import memsync_app_providers  # noqa: F401 - registers the offline providers
    from mem0 import Memory

    return Memory.from_config(json.loads(Path(os.environ["COMPAT_MEM0_CONFIG"]).read_text()))


def _accepts(method: Any, name: str) -> bool:
    return name in inspect.signature(method).parameters


def get_all(m: Any, user: str) -> list[dict[str, Any]]:
    expired = {"show_expired": True} if _accepts(m.get_all, "show_expired") else {}
    if _accepts(m.get_all, "filters") and not _accepts(m.get_all, "user_id"):
        found = m.get_all(filters={"user_id": user}, top_k=1000, **expired)
    else:
        found = m.get_all(user_id=user, limit=1000)
    return list(found["results"] if isinstance(found, dict) else found)


def search(m: Any, text: str, user: str) -> list[str]:
    if _accepts(m.search, "top_k"):
        expired = {"show_expired": True} if _accepts(m.search, "show_expired") else {}
        found = m.search(text, filters={"user_id": user}, top_k=5, **expired)
    else:
        found = m.search(text, user_id=user, limit=5)
    results = found["results"] if isinstance(found, dict) else found
    return [str(r["id"]) for r in results]


def close(m: Any) -> None:
    for step in ("close",):
        if callable(getattr(m, step, None)):
            m.close()
    client = getattr(m.vector_store, "client", None)
    if client is not None and callable(getattr(client, "close", None)):
        client.close()


def main(argv: list[str]) -> int:
    """Run each ``--``-separated command on one open Memory; print one JSON list of results."""
    commands: list[list[str]] = [[]]
    for word in argv:
        if word == "--":
            commands.append([])
        else:
            commands[-1].append(word)
    m = memory()
    try:
        outs = [run(m, command[0], command) for command in commands]
    finally:
        close(m)
    print(json.dumps(outs), flush=True)
    return 0


def run(m: Any, command: str, argv: list[str]) -> Any:
    """One command on the open Memory ``m``; returns its result."""
    out: Any = None
    if command == "seed":
        ids = []
        for n in range(int(argv[1])):
            user = USERS[n % 2]
            text = f"{user} fact number {n}: likes item {n * 7}"
            added = m.add(text, user_id=user, metadata={"topic": f"t{n % 3}"}, infer=False)
            results = added["results"] if isinstance(added, dict) else added
            ids.append(str(results[0]["id"]))
        out = {"ids": ids}
    elif command == "read":
        memories = {}
        for user in USERS:
            for item in get_all(m, user):
                memories[str(item["id"])] = {
                    "memory": item.get("memory"),
                    "user_id": item.get("user_id", user),
                    "metadata": item.get("metadata"),
                }
        found = {
            i: i in search(m, str(v["memory"]), str(v["user_id"])) for i, v in memories.items()
        }
        out = {"memories": memories, "found_by_search": found}
    elif command == "delete":
        m.delete(argv[1])
        out = {"deleted": argv[1]}
    elif command == "update":
        m.update(argv[1], argv[2])
        out = {"updated": argv[1]}
    elif command == "drop-point":
        m.vector_store.delete(vector_id=argv[1])
        out = {"dropped": argv[1]}
    elif command == "add":
        added = m.add(argv[1], user_id=argv[2], infer=False)
        results = added["results"] if isinstance(added, dict) else added
        out = {"id": str(results[0]["id"])}
    elif command == "expire":
        current = m.vector_store.get(vector_id=argv[1])
        payload = dict(current.payload)
        payload["expiration_date"] = "2000-01-01"
        vector = m.embedding_model.embed(payload["data"], "update")
        m.vector_store.update(vector_id=argv[1], vector=vector, payload=payload)
        out = {"expired": argv[1]}
    elif command == "serve":
        sys.path.insert(0, os.environ["COMPAT_MEMSYNC_AGENT_PATH"])
        from memsync.agent import attach

        options = json.loads(os.environ.get("COMPAT_AGENT_OPTIONS") or "{}")
        agent = attach(m, os.environ["COMPAT_AGENT_SOCKET"], **options)
        errors = _ErrorRecords()
        logging.getLogger().addHandler(errors)  # mem0 2.2.1 only logs some failed writes
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        problem = getattr(agent, "problem", None)
        print(json.dumps({"serving": os.getpid(), "problem": problem}), flush=True)
        every = float(os.environ.get("COMPAT_WRITE_EVERY_S", "0.2"))
        control = Path(os.environ.get("COMPAT_CONTROL", "/nonexistent"))
        n = failures = 0
        slowest = 0.0
        failed: list[str] = []
        while not stop:
            started = time.monotonic()
            try:
                m.add(f"live write {n}", user_id="carol", infer=False)
            except Exception as error:  # noqa: BLE001 - counted: the tests assert none
                failures += 1
                failed.append(f"{type(error).__name__}: {error}"[:200])
            slowest = max(slowest, time.monotonic() - started)
            n += 1
            if control.is_file():  # one command from the test ("delete ID"), then the file goes
                run(m, *(lambda words: (words[0], words))(control.read_text().split()))
                control.unlink()
            time.sleep(every)
        out = {
            "writes": n, "failures": failures + len(errors.messages),
            "errors": (failed + errors.messages)[:20], "slowest_write_s": round(slowest, 3),
        }  # fmt: skip
    else:
        raise SystemExit(f"unknown command {command}")
    return out


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
