"""Notifications through Apprise (``[daemon] notify``): the only module that imports apprise.

An Apprise URL (``ntfy://topic``, ``mailto://user:pass@host``, ``json://host:port/path``, ...)
names a service and usually carries its secret (a token, a password, a private topic), so
this module never puts a URL, or anything Apprise says about one, into a message or a log:
Apprise's own logger is turned off when this module first uses it, and a caller names a URL by its index.
apprise is imported inside the functions: a config without ``notify`` never loads its
plugins (about 0.15 s).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

Kind = Literal["failure", "warning", "success"]
KINDS: tuple[Kind, ...] = ("failure", "warning", "success")
URL_PROBLEM = (
    "not a URL Apprise can send to (an unknown service, or one missing its required parts; "
    "the services and their URL forms: https://github.com/caronc/apprise/wiki)"
)


@dataclass(frozen=True, slots=True)
class Notice:
    """One notification: a one-line ``title``, a plain-text ``body``, its ``kind``."""

    title: str
    body: str
    kind: Kind


def find_url_problem(url: str) -> str | None:
    """Why Apprise cannot send to ``url``, or None when it can. Reads only (loads plugins).

    Apprise's own parser decides (``Apprise.instantiate``): the scheme must name a service and
    the URL must carry what that service requires. The problem text never repeats the URL.
    """
    import apprise

    _silence_apprise()
    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    return None if plugin is not None else URL_PROBLEM


def scheme_of(url: str) -> str:
    """The service name of ``url`` (its scheme, e.g. ``ntfy``), never more of it. Pure."""
    scheme, separator, _rest = url.partition("://")
    return scheme.lower() if separator and scheme.isalnum() else "unknown"


def deliver(url: str, notice: Notice) -> bool:
    """Send ``notice`` to the one service ``url`` names; True when Apprise says it was delivered.

    Blocks for as long as the service takes (Apprise's own timeouts: 4 s to connect and 4 s
    for each read, unless the URL sets ``cto``/``rto``); callers run it in a thread and bound
    their wait. Never raises for a failed delivery: that is False.
    """
    import apprise

    _silence_apprise()
    sender = apprise.Apprise()
    if not sender.add(url):
        return False
    return bool(sender.notify(body=notice.body, title=notice.title, notify_type=notice.kind))


def _silence_apprise() -> None:
    """Turn off the ``apprise`` logger for good: its lines name the URL, so could carry secrets."""
    logger = logging.getLogger("apprise")
    logger.disabled, logger.propagate = True, False
