"""What the S3 modules share and what they return: values and errors, without boto3 or botocore.

Commands import these (an ``except TransportError``, a ``MultipartUpload`` in a report) whether
or not an S3 repository is configured; boto3 loads only with ``ObjectStore`` (``memsync.s3``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memsync.errors import UnavailableError

if TYPE_CHECKING:
    import botocore.exceptions


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectInfo:
    """An object's key, size in bytes and the sha256 memsync stored in its metadata (or None).

    ``modified``: its last-modified time from a listing (None from ``head``).
    """

    key: str
    size: int
    sha256: str | None
    modified: datetime | None = None


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


def error_code(error: botocore.exceptions.ClientError) -> str:
    """The S3 error code of a client error (``"NoSuchKey"``, ``"403"``, ...), or ``""``."""
    return str(error.response.get("Error", {}).get("Code", ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectVersion:
    """One version of an object in a versioned bucket (or the only one in an unversioned one).

    Attributes:
        key: the object key.
        version_id: the version's id (``"null"`` in an unversioned bucket).
        latest: whether it is the current version.
        delete_marker: whether it is a delete marker (no bytes).
        size: bytes (0 for a delete marker).
        last_modified: when it was written (UTC).
    """

    key: str
    version_id: str
    latest: bool
    delete_marker: bool
    size: int
    last_modified: datetime

    @property
    def label(self) -> str:
        """``key?versionId=…`` for messages and reports."""
        return f"{self.key}?versionId={self.version_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MultipartUpload:
    """A multipart upload that was started and never completed or aborted (billed, invisible)."""

    key: str
    upload_id: str
    initiated: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketSettings:
    """What the bucket says of itself.

    Attributes:
        versioning: ``"Enabled"``, ``"Suspended"`` or ``"Off"`` (never enabled).
        object_lock: object lock is enabled on the bucket.
        object_lock_unknown: why the service did not say (it lacks GetObjectLockConfiguration);
            None when it answered.
        abort_incomplete_days: days after which an enabled lifecycle rule covering the whole
            bucket or memsync's prefix aborts incomplete multipart uploads; None without one.
    """

    versioning: str
    object_lock: bool
    abort_incomplete_days: int | None
    object_lock_unknown: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Access:
    """What one list call under the prefix found (``ObjectStore.check_access``).

    Attributes:
        status: ``"ok"``, ``"unreachable"`` (no connection or no answer in time),
            ``"no-bucket"``, ``"no-credentials"`` (nothing was sent), ``"denied"`` or ``"failed"``.
        message: one line for the operator (the error's, or what was listed).
        hint: what to do, or None.
    """

    status: str
    message: str
    hint: str | None = None


class ObjectLockedError(UnavailableError):
    """S3 refused to delete object versions (exit 11): object lock (retention or legal hold).

    Attributes:
        refused: ``{label: "Code: message"}`` of every version S3 refused to delete.
    """

    def __init__(
        self, message: str, hint: str | None = None, refused: dict[str, str] | None = None
    ):
        super().__init__(message, hint)
        self.refused = refused or {}


class VersionsUnlistedError(UnavailableError):
    """The service does not list object versions (ListObjectVersions: NotImplemented), exit 11.

    Noncurrent versions are there (the bucket's versioning is on) and memsync cannot see them:
    whether they hold anything is unknown.
    """
