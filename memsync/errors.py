"""memsync's exception hierarchy and its one exit-code table (docs/reference/exit-codes.md).

Only ``memsync.cli.main`` turns an exception into an exit status; everything else raises.
Any exit status not listed here means failure (scripts must treat it so).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class ExitCode(enum.IntEnum):
    """Exit statuses of every memsync command."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    PROBLEMS_FOUND = 3
    PARTIAL = 4
    QUEUED = 5
    CONFIG = 10
    UNAVAILABLE = 11
    LOCKED = 12
    TRY_LATER = 75
    INTERRUPTED = 130


EXIT_CODE_TABLE: tuple[tuple[int, str], ...] = (
    (0, "success; for check/doctor/verify: no error-severity finding"),
    (1, "unexpected failure (a bug)"),
    (2, "usage error (bad arguments, confirmation needed)"),
    (3, "the command ran and found error-severity problems"),
    (4, "partial: some actions failed or were unrecoverable"),
    (5, "queued: no route to write now; the request is recorded and applied later"),
    (10, "configuration missing or invalid"),
    (11, "a store, snapshot or endpoint unreadable or unreachable"),
    (12, "locked: another process holds what this command must write"),
    (75, "temporary condition (low disk, SQLite busy, the app's agent busy): try later"),
    (130, "interrupted"),
)


@dataclass(frozen=True, slots=True)
class ExitError:
    """The one stderr line of a failed command (exit 1 or >= 10), as ``--json`` writes it."""

    code: int
    message: str
    hint: str | None

    def to_json(self) -> dict[str, Any]:
        """``{"type": "exit_error", "code", "message", "hint"}`` (docs/reference/json-output.md)."""
        return {"type": "exit_error", "code": self.code, "message": self.message, "hint": self.hint}


class MemsyncError(Exception):
    """An error the user can act on: a one-line message, an optional hint, an exit code.

    Args:
        message: what failed, on which object, and why.
        hint: the next thing to do (usually a command), or None.
    """

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(MemsyncError):
    """Bad arguments, or a confirmation that was needed and not given (exit 2)."""

    exit_code = ExitCode.USAGE


class ConfigError(MemsyncError):
    """The configuration is missing or invalid (exit 10).

    Args:
        source: the file (or other source) the configuration came from.
        problems: every problem found, each ``"<dotted.path>: <what is wrong>"``.
    """

    exit_code = ExitCode.CONFIG

    def __init__(self, source: str, problems: list[str], hint: str | None = None) -> None:
        self.source = source
        self.problems = list(problems)
        joined = "; ".join(self.problems)
        super().__init__(
            f"configuration {source}: {joined}",
            hint
            or "fix the listed keys (see ops/memsync.example.toml and docs/reference/config.md)",
        )


class UnavailableError(MemsyncError):
    """A store, snapshot or endpoint is unreadable or unreachable (exit 11)."""

    exit_code = ExitCode.UNAVAILABLE


class LockedError(MemsyncError):
    """Another process holds what this command must write (exit 12)."""

    exit_code = ExitCode.LOCKED


class TryLaterError(MemsyncError):
    """A temporary condition such as low disk space or a busy SQLite writer (exit 75)."""

    exit_code = ExitCode.TRY_LATER
