"""Test tiers: each test belongs to one tier by the directory it lives in (tests/README.md).

| tier      | directory        | what its tests may touch                                         |
|-----------|------------------|------------------------------------------------------------------|
| unit      | tests/unit/      | values in, values out: no process, no store, no socket           |
| store     | tests/store/     | real mem0, Qdrant files, SQLite, S3 (moto) in this process      |
| process   | tests/process/   | the above, and subprocesses and signals (no PostgreSQL)          |
| pg        | tests/pg/        | anything, with the PostgreSQL server                             |
| breaker   | tests/breaker/   | anything: kills and pauses at named functions                    |
| compat    | tests/compat/    | apps on every mem0ai version users run (build/apps/), as process |

The marker of the tier is applied here from the directory (``pytest -m unit`` selects a tier),
and the tier is enforced while each test and its fixtures' set-up run: an audit hook
(``sys.addaudithook``) sees processes started through ``subprocess``, ``os.fork``,
``os.posix_spawn``, ``os.exec*`` and ``os.system``, SQLite files opened with ``sqlite3.connect``
and sockets connected from Python, and a test that does more than its tier allows fails with the
directory it belongs in. What it does not see (tests/README.md): teardown, import time,
``multiprocessing``'s spawn, ``ATTACH``/``VACUUM INTO`` from an in-memory database, C code's own
sockets (libpq), and work a thread does after its test ended (blamed on the next test).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

TIERS = ("unit", "store", "pg", "process", "breaker", "compat")
ROOT = Path(__file__).resolve().parent

# What each tier may not do: "process" (a subprocess or a fork), "store" (a SQLite file or a
# socket: mem0, Qdrant files, S3), "pg" (the PostgreSQL server fixtures).
FORBIDDEN = {
    "unit": {"process", "store", "pg"},
    "store": {"process", "pg"},
    "process": {"pg"},
    "pg": set(),
    "breaker": set(),
    "compat": {"pg"},
}
PG_FIXTURES = frozenset({"pg_server", "pg_url", "pg_deployment"})
# A test of a lower tier that needs the next one up belongs in this directory.
HOME = {"process": "tests/process/", "store": "tests/store/", "pg": "tests/pg/"}

# A test's call may take this long; longer ones carry ``slow(reason=...)``.
BUDGET_S = float(os.environ.get("MEMSYNC_TEST_BUDGET_S", "20"))

_seen: set[str] | None = None
_over_budget: list[tuple[float, str]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Record what the running test touches (the hook stays cheap: a set lookup per event)."""
    if _seen is None:
        return
    if event in (
        "subprocess.Popen",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.exec",
        "os.system",
    ):
        _seen.add("process")
    elif event == "sqlite3.connect":
        database = str(args[0]) if args else ""
        in_memory = database in ("", ":memory:") or (
            database.startswith("file:") and "mode=memory" in database.partition("?")[2]
        )
        if not in_memory:
            _seen.add("store")
    elif event == "socket.connect":
        _seen.add("store")


sys.addaudithook(_audit)


def tier_of(path: Path) -> str:
    """The tier of a test file: the first directory below tests/."""
    relative = path.resolve().relative_to(ROOT)
    tier = relative.parts[0] if len(relative.parts) > 1 else ""
    if tier not in TIERS:
        raise pytest.UsageError(
            f"{path}: a test file must live in one tier's directory (tests/<tier>/, tiers: "
            f"{', '.join(TIERS)}); see tests/README.md"
        )
    return tier


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its directory's tier; a ``slow`` marker must say why."""
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(Path(str(item.fspath)))))
        slow = item.get_closest_marker("slow")
        if slow is not None and not (slow.kwargs.get("reason") or slow.args):
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.slow needs a reason (slow(reason=...)): "
                "what the test waits for that no seam can shorten"
            )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note calls over the budget that carry no ``slow`` marker (in the controller too)."""
    if report.when == "call" and report.duration > BUDGET_S and "slow" not in report.keywords:
        _over_budget.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name every test over the budget without a reason (tests/README.md, the budget)."""
    if not _over_budget:
        return
    terminalreporter.section(f"over the {BUDGET_S:.0f} s budget, without slow(reason=...)")
    for duration, nodeid in sorted(_over_budget, reverse=True):
        terminalreporter.write_line(f"{duration:6.1f} s  {nodeid}")
    terminalreporter.write_line(
        "make each faster (a seam, a template, no fixed sleep) or mark it "
        "@pytest.mark.slow(reason=...): tests/README.md"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """Watch what the test touches from its set-up on."""
    global _seen
    _seen = set()
    try:
        yield
    finally:
        _seen = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Fail a test that did what its tier forbids (set-up included; teardown is not judged)."""
    result = yield  # a test that failed already raises here
    if _seen is None:
        return result
    tier = tier_of(Path(str(item.fspath)))
    touched = set(_seen)
    request = getattr(item, "_request", None)
    used = set(getattr(request, "_fixture_defs", {})) | set(getattr(item, "fixturenames", ()))
    if used & PG_FIXTURES:
        touched.add("pg")
    report = os.environ.get("MEMSYNC_TIER_REPORT")
    if report:  # what each test touched, one JSON line each (tests/README.md, placing a test)
        with open(report, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": item.nodeid, "touched": sorted(touched)}) + "\n")
    wrong = touched & FORBIDDEN[tier]
    if wrong:
        need = "pg" if "pg" in wrong else "process" if "process" in wrong else "store"
        pytest.fail(
            f"this {tier}-tier test touches {', '.join(sorted(wrong))}: move it to {HOME[need]} "
            "(tests/README.md, tiers)",
            pytrace=False,
        )
    return result
