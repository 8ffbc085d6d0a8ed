"""What counts as a secret when memsync prints configuration: by key name, and URL credentials.

Used by ``config show`` (``memsync.config.effective``) and by validation messages
(``memsync.config.messages``), so a secret is never printed by either.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
# Substrings of a key name (lowercased, "-" and "." read as "_") that mark a secret.
_SECRET_PART = re.compile(r"api_?key|password|passwd|passphrase|secret|credential|auth|token")
# Whole words of a key name (split at "_", "-", "." and camelCase) that mark a secret.
_SECRET_WORDS = frozenset(
    {"key", "keys", "pw", "pwd", "pass", "private", "cookie", "cookies", "bearer", "signature"}
)
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")


def is_secret_name(name: str, value: Any = None) -> bool:
    """Whether a value under the key ``name`` may be a secret; case and ``-``/``_`` alike. Pure.

    A number under a name ending in ``tokens`` (``max_tokens``) is a count, not a secret.
    """
    words = _CAMEL.sub(r"\1_\2", name).lower().replace("-", "_").replace(".", "_").split("_")
    if words[-1] == "tokens" and isinstance(value, int | float) and not isinstance(value, bool):
        return False
    return bool(_SECRET_PART.search("_".join(words))) or not _SECRET_WORDS.isdisjoint(words)


def scrub_url(text: str) -> str:
    """``text`` with the credentials of every URL in it (``scheme://user:pass@``) redacted. Pure."""
    return _URL_USERINFO.sub(rf"\1{REDACTED}@", text)
