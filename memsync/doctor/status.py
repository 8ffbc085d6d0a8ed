"""The three statuses of a doctor result."""

from __future__ import annotations

OK, WARNING, ERROR = "ok", "warning", "error"
