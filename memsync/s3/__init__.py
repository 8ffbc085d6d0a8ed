"""S3 over boto3: the only package that imports boto3.

``ObjectStore`` (``store``) puts and gets files with their sha256, lists and deletes; its
``BucketState`` part (``bucket``) reads versions, incomplete multipart uploads and the bucket's
settings; ``common`` holds the errors both share.

Importing this package loads neither boto3 nor botocore: ``ObjectStore`` and the multipart sizes
load ``store`` (and boto3) when first named, so only a command that uses S3 pays for them.
"""

from typing import TYPE_CHECKING, Any

from memsync.s3.common import (
    Access,
    BucketSettings,
    MultipartUpload,
    ObjectInfo,
    ObjectLockedError,
    ObjectVersion,
    TransportError,
    VersionsUnlistedError,
)

if TYPE_CHECKING:
    from memsync.s3.store import MULTIPART_CHUNK, MULTIPART_THRESHOLD, ObjectStore

__all__ = [
    "MULTIPART_CHUNK",
    "MULTIPART_THRESHOLD",
    "Access",
    "BucketSettings",
    "MultipartUpload",
    "ObjectInfo",
    "ObjectLockedError",
    "ObjectStore",
    "ObjectVersion",
    "TransportError",
    "VersionsUnlistedError",
]
_FROM_STORE = ("MULTIPART_CHUNK", "MULTIPART_THRESHOLD", "ObjectStore")


def __getattr__(name: str) -> Any:
    """``ObjectStore`` and the multipart sizes, importing boto3 on first use."""
    if name in _FROM_STORE:
        from memsync.s3 import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
