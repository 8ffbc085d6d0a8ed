"""Logging setup: the only caller of ``structlog.configure``. Logs always go to stderr."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "warning", fmt: str = "auto") -> None:
    """Send structlog (and stdlib logging) to stderr at ``level``.

    Args:
        level: ``debug``, ``info``, ``warning`` or ``error``.
        fmt: ``json``, ``console``, or ``auto`` (console on a terminal, JSON otherwise, so
            journald gets one JSON object per line).
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.WARNING
    as_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor
    if as_json:
        # Tracebacks without local variables: they would carry memory texts and secrets.
        shared.append(
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            )
        )
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # Libraries (mem0, qdrant-client, botocore) log through stdlib logging: keep them quiet
    # at the same level, on stderr.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)
