"""What the S3 modules share: the transport error, error codes, the read errors of a stalled endpoint."""

from __future__ import annotations

from dataclasses import dataclass

import botocore.exceptions
import urllib3.exceptions

from memsync.errors import UnavailableError


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectInfo:
    """An object's key, size in bytes and the sha256 memsync stored in its metadata (or None)."""

    key: str
    size: int
    sha256: str | None


class TransportError(UnavailableError):
    """The endpoint could not be reached or did not answer in time (exit 11).

    Never a finding about the data: nothing was read, so nothing can be judged.
    """


DENIED = (
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "403",
    "AllAccessDisabled",
)

# A read that timed out or broke off: urllib3's and the socket's own when s3transfer re-raises them.
TIMEOUTS = (
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ConnectionClosedError,
    botocore.exceptions.IncompleteReadError,
    botocore.exceptions.ResponseStreamingError,
    urllib3.exceptions.HTTPError,
    TimeoutError,
    ConnectionError,
)


def error_code(error: botocore.exceptions.ClientError) -> str:
    """The S3 error code of a client error (``"NoSuchKey"``, ``"403"``, ...), or ``""``."""
    return str(error.response.get("Error", {}).get("Code", ""))
