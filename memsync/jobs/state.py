"""The daemon's state file, ``<state_dir>/daemon-state.json``, and the locks around it.

Written by every run of a job, the daemon's or one started by hand (``memsync job``), so each
change is a read-modify-write under ``daemon-state.lock`` (held for milliseconds) and lands by
an atomic rename (``memsync.daemon.runner.commit``): a reader never sees half a document, and
two writers never lose each other's records. ``daemon.lock`` is the daemon's own, held for its life; ``job-<name>.lock`` is held
while a run of that job is in progress, whoever started it.

Document::

    {"pid": int, "started_at": time, "stopped_at": time | null, "current_job": str | null,
     "jobs": {"<name>": {record: see memsync.jobs.outcome.record_run}}}
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memsync import flock
from memsync.config import Config
from memsync.errors import TryLaterError

STATE_FILE = "daemon-state.json"
LOCK_FILE = "daemon.lock"
STATE_LOCK = "daemon-state.lock"


def state_path(config: Config) -> Path:
    """Where the daemon's state lives."""
    return config.state_dir / STATE_FILE


def job_lock_path(config: Config, name: str) -> Path:
    """The lock held while a run of job ``name`` is in progress (daemon or by hand)."""
    return config.state_dir / f"job-{name}.lock"


def load_state(config: Config) -> dict[str, Any]:
    """The state document, with a ``jobs`` mapping of dict records (empty when none). Reads only.

    A missing, unreadable or malformed file reads as empty, and a record that is not an object
    as absent: the state is a record of runs, and the next run writes a good one.
    """
    try:
        document = json.loads(state_path(config).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        document = {}
    if not isinstance(document, dict):
        document = {}
    records = document.get("jobs")
    document["jobs"] = {
        name: record
        for name, record in (records.items() if isinstance(records, dict) else ())
        if isinstance(record, dict)  # a damaged record reads as none
    }
    return document


@contextmanager
def state_lock(config: Config) -> Iterator[None]:
    """Hold ``daemon-state.lock`` (waiting for another writer: milliseconds) for a read-modify-write.

    Creates the state directory (mode 0700) when missing.

    Raises:
        TryLaterError: the state directory cannot be created or written.
    """
    try:
        config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with flock.hold(config.state_dir / STATE_LOCK, wait=True):
            yield
    except OSError as error:
        raise TryLaterError(
            f"daemon state {state_path(config)} cannot be written: {error.strerror or error}",
            "set state_dir to a directory memsync can write",
        ) from error


def daemon_pid(config: Config) -> int | None:
    """The pid of the daemon holding ``daemon.lock`` (-1 when it wrote none), or None.

    Probes without blocking; writes nothing.
    """
    note = flock.holder(config.state_dir / LOCK_FILE)
    if note is None:
        return None
    pid = flock.holder_pid(note)
    return -1 if pid is None else pid
