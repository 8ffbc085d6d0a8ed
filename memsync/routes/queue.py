"""The queue of writes that could not run when asked: ``<state_dir>/pending.json``.

A forget, erase or prune that finds no route (the app holds the store, no agent answers, no
maintenance window is configured) is recorded here with who asked and when, and applied at the
next chance: the agent coming up, the next window, or ``memsync job apply-pending`` (run as the
app unit's ``ExecStartPre=``, before the app opens the store). The file is the queue's only
copy; every change rewrites it atomically under ``pending.lock``.

Document (version 1)::

    {"version": 1, "requests": [
      {"id": "<uuid4 hex>", "kind": "forget" | "erase" | "prune",
       "memory_ids": [...], "user_id": str | null, "agent_id": str | null, "run_id": str | null,
       "requested_at": "<UTC ISO 8601 Z>",
       "requested_by": {"user": str, "uid": int, "pid": int, "argv": [...]}}]}
"""

from __future__ import annotations

import getpass
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from memsync import flock
from memsync.errors import TryLaterError, UnavailableError
from memsync.state import write_json_atomic
from memsync.utc import iso, parse

PENDING_FILE = "pending.json"
PENDING_LOCK = "pending.lock"
VERSION = 1
Kind = Literal["forget", "erase", "prune"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingRequest:
    """One queued write: what to do (``kind`` and its selection), who asked, when (UTC)."""

    id: str
    kind: Kind
    requested_at: str
    requested_by: dict[str, Any]
    memory_ids: tuple[str, ...] = ()
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    note: dict[str, Any] = field(default_factory=dict)

    def age_s(self, now: datetime) -> float:
        """Seconds since the request was recorded. Pure."""
        return max(0.0, (now - parse(self.requested_at)).total_seconds())

    def as_json(self) -> dict[str, Any]:
        """The request as its JSON document (lists, not tuples)."""
        document = asdict(self)
        document["memory_ids"] = list(self.memory_ids)
        return document

    def to_json(self, now: datetime) -> dict[str, Any]:
        """The request as ``pending list --json`` shows it at ``now``: ``as_json`` and ``age_s``."""
        return {**self.as_json(), "age_s": round(self.age_s(now), 3)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Listing:
    """``pending list``: the queue, oldest first, as read at ``now``."""

    requests: tuple[PendingRequest, ...]
    now: datetime

    def to_json(self) -> dict[str, Any]:
        """``pending list --json`` (docs/reference/json-output.md)."""
        oldest = oldest_age_s(self.requests, self.now)
        return {
            "command": "pending list",
            "requests": [r.to_json(self.now) for r in self.requests],
            "oldest_age_s": None if oldest is None else round(oldest, 3),
        }


def new_request(
    kind: Kind,
    now: datetime,
    *,
    memory_ids: Sequence[str] = (),
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
) -> PendingRequest:
    """A request recorded now by this process (user, uid, pid, argv). Pure but for the caller's identity."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return PendingRequest(
        id=uuid.uuid4().hex,
        kind=kind,
        requested_at=iso(now),
        requested_by={"user": user, "uid": os.getuid(), "pid": os.getpid(), "argv": sys.argv[1:]},
        memory_ids=tuple(memory_ids),
        user_id=user_id,
        agent_id=agent_id,
        run_id=run_id,
    )


def load(state_dir: Path) -> list[PendingRequest]:
    """The queued requests, oldest first (empty when there is no queue). Reads only.

    Raises:
        UnavailableError: (exit 11) the file is not a version-1 queue document; the message
            names it, and it is never rewritten or removed.
    """
    path = state_dir / PENDING_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except IsADirectoryError as error:
        raise UnavailableError(
            f"queue {path} is a directory, not the queue file",
            "move the directory aside; memsync writes the queue as a file there",
        ) from error
    except OSError as error:
        raise UnavailableError(
            f"queue {path} cannot be read: {error.strerror}", "check its permissions"
        ) from error
    try:
        document = _Queue.model_validate_json(text)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "document"
        raise UnavailableError(
            f"queue {path} is not a memsync queue document ({where}: {problem['msg']})",
            "move it aside and ask again for the writes it held (memsync never deletes it)",
        ) from None
    requests = [
        PendingRequest(**{**row.model_dump(), "memory_ids": tuple(row.memory_ids)})
        for row in document.requests
    ]
    return sorted(requests, key=lambda request: parse(request.requested_at))


def _utc_text(value: str) -> str:
    parse(value)  # ValueError: not ISO 8601 with an offset
    return value


class _Row(BaseModel):
    """One request as stored: every field typed and checked (an unknown kind is refused)."""

    model_config = ConfigDict(strict=True, extra="forbid")
    id: Annotated[str, Field(min_length=1)]
    kind: Kind
    requested_at: Annotated[str, AfterValidator(_utc_text)]
    requested_by: dict[str, Any]
    memory_ids: list[str] = Field(default_factory=list)
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    note: dict[str, Any] = Field(default_factory=dict)


class _Queue(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    version: Literal[1]
    requests: list[_Row]


def oldest_age_s(requests: Sequence[PendingRequest], now: datetime) -> float | None:
    """The age in seconds of the oldest request, or None for an empty queue. Pure."""
    return max((request.age_s(now) for request in requests), default=None)


@contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    """Hold ``pending.lock`` (waits for another memsync changing the queue: milliseconds).

    Raises:
        TryLaterError: the state directory cannot be written.
    """
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        with flock.hold(state_dir / PENDING_LOCK, wait=True):
            yield
    except OSError as error:
        raise TryLaterError(
            f"queue {state_dir / PENDING_FILE} cannot be written: {error.strerror}",
            "set state_dir to a writable directory",
        ) from error


def _save(state_dir: Path, requests: Sequence[PendingRequest]) -> None:
    document = {"version": VERSION, "requests": [r.as_json() for r in requests]}
    write_json_atomic(state_dir / PENDING_FILE, document)


def add(state_dir: Path, request: PendingRequest) -> list[PendingRequest]:
    """Append ``request``; return the whole queue. Writes atomically.

    Raises:
        UnavailableError: the queue file is unreadable; TryLaterError: it is busy.
    """
    with _locked(state_dir):
        requests = [*load(state_dir), request]
        _save(state_dir, requests)
    return requests


def remove(state_dir: Path, request_id: str) -> bool:
    """Drop one applied request; True when it was there. Writes atomically; idempotent."""
    with _locked(state_dir):
        requests = load(state_dir)
        kept = [r for r in requests if r.id != request_id]
        if len(kept) == len(requests):
            return False
        _save(state_dir, kept)
    return True
