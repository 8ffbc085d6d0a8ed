"""S3 over boto3: the only package that imports boto3.

``ObjectStore`` (``store``) puts and gets files with their sha256, lists and deletes; its
``BucketState`` part (``bucket``) reads versions, incomplete multipart uploads and the bucket's
settings; ``common`` holds the errors both share.
"""

from memsync.s3.bucket import (
    Access,
    BucketSettings,
    MultipartUpload,
    ObjectLockedError,
    ObjectVersion,
    VersionsUnlistedError,
)
from memsync.s3.common import ObjectInfo, TransportError
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
