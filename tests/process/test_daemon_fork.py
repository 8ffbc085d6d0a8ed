"""Daemon jobs run in a fork of the daemon (issue 26): nothing the daemon loaded is imported again,
and the child is still a process of its own with the exit status and records of a new interpreter."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memsync import flock
from memsync.daemon.runner import Entry, Stop, fork_safe, run_child
from tests.process.test_daemon import Notify, events, start, stop, wait_state, with_daemon


def nothing_to_load(argv: Sequence[str]) -> None:
    pass


def report_run(argv: Sequence[str]) -> int:
    """An entry that says where it runs, then exits with the status its first argument names."""
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[name] = os.readlink(f"/proc/self/fd/{name}")
        except FileNotFoundError:  # the listing's own descriptor
            pass
    print(
        json.dumps(
            {
                "pid": os.getpid(),
                "sid": os.getsid(0),
                "json_module": id(sys.modules["json"]),
                "env": os.environ.get("MEMSYNC_PROBE"),
                "fds": fds,
                "argv": list(argv),
            }
        )
    )
    print("to stderr", file=sys.stderr)
    return int(argv[0])


def crash_run(argv: Sequence[str]) -> int:
    raise RuntimeError("boom in the job")


def wait_forever_run(argv: Sequence[str]) -> int:
    threading.Event().wait(120)
    return 0


ROOT = Path(__file__).resolve().parents[2]
ALONE = "MEMSYNC_TEST_ALONE"


def quiet_process(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test`` here when no other thread runs (a fork needs that), else in a new pytest.

    Another test in this worker may have left threads (an S3 server's, a notification
    listener's): then ``run_child`` rightly takes a new interpreter, and the fork is what these
    tests are about, so the test runs alone in a fresh process instead.
    """

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        if os.environ.get(ALONE) or fork_safe():
            test(*args, **kwargs)
            return
        nodeid = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        alone = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
             nodeid],
            cwd=ROOT, env={**os.environ, ALONE: "1"}, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-2000:]

    return wrapper


report = Entry(run=report_run, load=nothing_to_load)
crash = Entry(run=crash_run, load=nothing_to_load)
wait_forever = Entry(run=wait_forever_run, load=nothing_to_load)


@quiet_process
def test_a_forked_job_is_its_own_process_with_the_parents_modules_and_none_of_its_locks(
    tmp_path: Path,
):
    held = flock.acquire(tmp_path / "daemon.lock")  # as the daemon holds its locks
    try:
        child = run_child(
            ["3", "--json"],
            {"MEMSYNC_PROBE": "job-env"},
            stop=None,
            new_session=True,
            entry=report,
        )
    finally:
        held.close()
    assert (child.child, child.exit_code, child.stderr) == ("fork", 3, "to stderr\n")
    seen = json.loads(child.stdout)
    assert seen["pid"] != os.getpid() and seen["sid"] == seen["pid"]  # its own session
    assert seen["json_module"] == id(json)  # the parent's module, not imported again
    assert (seen["env"], seen["argv"]) == ("job-env", ["3", "--json"])
    # the parent held its lock while the child ran: the child holds none of its descriptions
    assert all(target == "/dev/null" for fd, target in seen["fds"].items() if int(fd) > 2)
    assert str(tmp_path / "daemon.lock") not in seen["fds"].values()


@quiet_process
def test_a_forked_job_that_crashes_exits_1_with_its_traceback():
    child = run_child([], {}, stop=None, new_session=False, entry=crash)
    assert (child.child, child.exit_code, child.stdout) == ("fork", 1, "")
    assert "RuntimeError: boom in the job" in child.stderr


@quiet_process
def test_a_forked_job_is_stopped_by_sigterm_and_reports_130():
    stopping = threading.Event()
    stopping.set()  # the daemon got SIGTERM: the job may finish within 0 s, then SIGTERM
    child = run_child(
        [],
        {},
        stop=Stop(stopping, threading.Event(), timeout_s=0),
        new_session=True,
        entry=wait_forever,
    )
    assert (child.child, child.exit_code) == ("fork", 130)


def test_another_thread_running_means_a_new_interpreter():
    release = threading.Event()
    other = threading.Thread(target=release.wait, name="ping", daemon=True)
    other.start()
    try:
        child = run_child(
            ["--version"], dict(os.environ), stop=None, new_session=False, entry=report
        )
    finally:
        release.set()
        other.join()
    assert (child.child, child.exit_code) == ("interpreter", 0)
    assert child.stdout.startswith("memsync ")


def test_the_daemons_jobs_run_in_forks_and_record_as_before(deployment, tmp_path):
    deployment.close()
    with_daemon(deployment, 'check_every = "2s"\n')
    notify = Notify(tmp_path)
    process = start(deployment.config, notify)  # with a watchdog thread (WATCHDOG_USEC)
    try:
        notify.wait_for("READY=1", daemon=process)
        process.wait_event("job_finished", count=2)
        current = wait_state(deployment.paths.root, lambda s: "check" in s["jobs"])
    finally:
        code, err = stop(process)
    assert code == 0
    finished = [e for e in events(err) if e.get("event") == "job_finished"]
    assert len(finished) >= 2
    assert {(e["job"], e["outcome"], e["exit_code"], e["child"]) for e in finished} == {
        ("check", "ok", 0, "fork")
    }
    assert current["jobs"]["check"]["last_outcome"] == "ok"
