"""The three statuses of a doctor result (``memsync.model``'s, where backends read them too)."""

from __future__ import annotations

from memsync.model import ERROR, OK, WARNING

__all__ = ["ERROR", "OK", "WARNING"]
