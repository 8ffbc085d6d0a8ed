"""What a bucket holds besides current objects, and what it says of itself.

Object versions (a versioned bucket keeps what memsync overwrote or deleted), incomplete
multipart uploads (billed, invisible), object lock retention, access, and the bucket's
versioning, object lock and lifecycle settings. ``BucketState`` is a part of ``ObjectStore``
(``memsync.s3.store``), which provides the client and the error translation.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import botocore.exceptions
import urllib3.exceptions

from memsync.errors import MemsyncError
from memsync.s3.common import (
    DENIED,
    Access,
    BucketSettings,
    MultipartUpload,
    ObjectInfo,
    ObjectLockedError,
    ObjectVersion,
    TransportError,
    VersionsUnlistedError,
    error_code,
)

__all__ = [  # the values live in memsync.s3.common (no botocore); imported here as before
    "TIMEOUTS",
    "Access",
    "BucketSettings",
    "BucketState",
    "MultipartUpload",
    "ObjectLockedError",
    "ObjectVersion",
    "VersionsUnlistedError",
]

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


NO_CALL = ("NotImplemented", "MethodNotAllowed")  # a service without the call answers so
UNLISTED_HINT = (
    "this provider does not list object versions, so memsync cannot find or delete old "
    "versions: set the provider's lifecycle rule that expires noncurrent versions under the "
    "prefix, or delete them in the provider's console"
)


class BucketState:
    """``ObjectStore``'s operations on versions, incomplete uploads and bucket settings."""

    client: Any
    bucket: str
    prefix: str

    @property
    def where(self) -> str:
        """``s3://bucket/prefix`` for messages (``ObjectStore`` provides it)."""
        raise NotImplementedError

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` under the prefix (``ObjectStore`` provides it)."""
        raise NotImplementedError

    def iter_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every current object under ``prefix`` (``ObjectStore`` provides it)."""
        raise NotImplementedError

    def _translate(self, error: BaseException, action: str) -> MemsyncError:
        raise NotImplementedError

    def list_versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version and delete marker under ``prefix`` (a full key prefix). Reads only.

        An unversioned bucket lists each object once, with version id ``"null"``; a service
        without the ListObjectVersions call lists the current objects that way only when the
        bucket says its versioning was never enabled (no noncurrent version can exist).

        Raises:
            VersionsUnlistedError: the service lacks the call and the bucket is (or was) versioned,
                or does not say.
            UnavailableError: the endpoint, bucket or credentials fail.
        """
        found: list[ObjectVersion] = []
        try:
            paginator = self.client.get_paginator("list_object_versions")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Versions", []):
                    found.append(_version(item, delete_marker=False))
                for item in page.get("DeleteMarkers", []):
                    found.append(_version(item, delete_marker=True))
        except botocore.exceptions.ClientError as error:
            if error_code(error) not in NO_CALL:
                raise self._translate(error, f"list versions under {prefix}") from error
            self._never_versioned(prefix, error)
            return [
                ObjectVersion(
                    key=info.key,
                    version_id="null",
                    latest=True,
                    delete_marker=False,
                    size=info.size,
                    last_modified=datetime.fromtimestamp(0, UTC),
                )
                for info in self.iter_objects(prefix)
            ]
        except botocore.exceptions.BotoCoreError as error:
            raise self._translate(error, f"list versions under {prefix}") from error
        return sorted(found, key=lambda v: (v.key, v.last_modified))

    def _never_versioned(self, prefix: str, refusal: botocore.exceptions.ClientError) -> None:
        """Return when the bucket says versioning was never enabled; raise otherwise.

        Raises:
            VersionsUnlistedError: the bucket is or was versioned, or its versioning is unknown.
        """
        try:
            status = self.client.get_bucket_versioning(Bucket=self.bucket).get("Status")
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
            status = "unknown"
        if status:
            raise VersionsUnlistedError(
                f"S3 list versions under {prefix} at {self.where} failed: the service does not "
                f"implement ListObjectVersions ({error_code(refusal)}) and the bucket's "
                f"versioning is {status.lower()}",
                UNLISTED_HINT,
            ) from refusal

    def get_version_bytes(self, version: ObjectVersion) -> bytes:
        """The bytes of one object version (delete markers: empty). Reads only.

        Raises:
            UnavailableError: the version is gone or the endpoint fails.
        """
        if version.delete_marker:
            return b""
        try:
            response = self.client.get_object(
                Bucket=self.bucket, Key=version.key, VersionId=version.version_id
            )
            return bytes(response["Body"].read())
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, f"download {version.label}") from error

    def delete_versions(self, versions: list[ObjectVersion]) -> None:
        """Delete these object versions for good (no delete marker is left). Idempotent.

        Raises:
            ObjectLockedError: S3 refused one or more of them (the others are gone); the message
                names the first, ``refused`` every one with S3's code.
            UnavailableError: the endpoint, bucket or credentials fail, or the service refused
                a whole request (a batch of up to 1,000: none of it was deleted).
        """
        refused: dict[str, str] = {}
        for start in range(0, len(versions), 1000):
            chunk = versions[start : start + 1000]
            batch = [{"Key": v.key, "VersionId": v.version_id} for v in chunk]
            try:
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
                raise self._translate(error, "delete object versions") from error
            for failure in response.get("Errors", []):
                why = f"{failure.get('Code')}: {failure.get('Message')}"
                # An error without its version id (moto's) refuses every version of its key;
                # one naming no version of the batch, the whole batch: never counted deleted.
                named = [
                    v
                    for v in chunk
                    if v.key == failure.get("Key")
                    and failure.get("VersionId") in (None, v.version_id)
                ]
                refused.update((v.label, why) for v in named or chunk)
        if refused:
            first = next(iter(refused.items()))
            if all(why.startswith("AccessDenied") for why in refused.values()):
                raise ObjectLockedError(
                    f"S3 delete at {self.where} refused {len(refused)} object version(s), "
                    f"first {first[0]} ({first[1]}): object lock (retention or legal hold) "
                    "protects them",
                    "they go when their retention ends; an operator with "
                    "s3:BypassGovernanceRetention can remove governance-mode locks",
                    refused,
                )
            raise ObjectLockedError(
                f"S3 delete at {self.where} refused {len(refused)} object version(s), "
                f"first {first[0]} ({first[1]})",
                "check that the provider deletes object versions (memsync doctor: "
                "s3-delete-version) and the credentials' s3:DeleteObjectVersion permission",
                refused,
            )

    def retention_of(self, version: ObjectVersion) -> tuple[str | None, datetime | None]:
        """The object lock retention of a version: ``(mode, retain-until UTC)``. Reads only.

        Read from the version's HEAD (``x-amz-object-lock-*``); ``(None, None)`` when it has
        none (a legal hold alone, or no object lock).

        Raises:
            UnavailableError: the version is gone, or the endpoint, bucket or credentials fail.
        """
        try:
            response = self.client.head_object(
                Bucket=self.bucket, Key=version.key, VersionId=version.version_id
            )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, f"read retention of {version.label}") from error
        until = response.get("ObjectLockRetainUntilDate")
        return response.get("ObjectLockMode"), until.astimezone(UTC) if until else None

    def list_multipart_uploads(
        self, prefix: str, action: str | None = None
    ) -> list[MultipartUpload]:
        """Multipart uploads started under ``prefix`` and never completed or aborted. Reads only.

        ``action`` names what the caller was doing in the error (default: the listing).

        Raises:
            UnavailableError: the endpoint, bucket or credentials fail.
        """
        found: list[MultipartUpload] = []
        try:
            paginator = self.client.get_paginator("list_multipart_uploads")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Uploads", []):
                    found.append(
                        MultipartUpload(
                            key=item["Key"],
                            upload_id=item["UploadId"],
                            initiated=item["Initiated"].astimezone(UTC),
                        )
                    )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(
                error, action or f"list multipart uploads under {prefix}"
            ) from error
        return found

    def abort_multipart_uploads(self, uploads: list[MultipartUpload]) -> None:
        """Abort these incomplete multipart uploads (their parts stop being billed). Idempotent.

        Raises:
            UnavailableError: the endpoint, bucket or credentials fail.
        """
        for upload in uploads:
            try:
                self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=upload.key, UploadId=upload.upload_id
                )
            except botocore.exceptions.ClientError as error:
                if error_code(error) != "NoSuchUpload":  # already completed or aborted
                    raise self._translate(error, f"abort upload of {upload.key}") from error
            except botocore.exceptions.BotoCoreError as error:
                raise self._translate(error, f"abort upload of {upload.key}") from error

    def check_access(self) -> Access:
        """List one key under the prefix: is the endpoint reachable, the bucket there, access granted?

        Never raises for S3's answer (it becomes the ``Access`` status). Reads only.
        """
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.key("") + "/", MaxKeys=1)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            translated = self._translate(error, "list")
            code = error_code(error) if isinstance(error, botocore.exceptions.ClientError) else ""
            if isinstance(translated, TransportError) or isinstance(error, TIMEOUTS):
                status = "unreachable"
            elif isinstance(error, botocore.exceptions.NoCredentialsError):
                status = "no-credentials"  # nothing was sent: reachability is unknown
            elif code == "NoSuchBucket":
                status = "no-bucket"
            elif code in DENIED:
                status = "denied"
            else:
                status = "failed"
            return Access(status=status, message=translated.message, hint=translated.hint)
        return Access(status="ok", message=f"{self.where} answers a list call")

    def bucket_settings(self) -> BucketSettings:
        """The bucket's versioning, object lock and incomplete-upload lifecycle rule. Reads only.

        Raises:
            UnavailableError: the endpoint, bucket or credentials fail.
        """
        try:
            versioning = self.client.get_bucket_versioning(Bucket=self.bucket).get("Status")
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, "read bucket versioning") from error
        locked, lock_unknown = None, None
        try:
            locked = self.client.get_object_lock_configuration(Bucket=self.bucket).get(
                "ObjectLockConfiguration"
            )
        except botocore.exceptions.ClientError as error:
            code = error_code(error)
            if code in NO_CALL:
                lock_unknown = f"GetObjectLockConfiguration answered {code}"
            elif code != "ObjectLockConfigurationNotFoundError":
                raise self._translate(error, "read bucket settings (object lock)") from error
        except botocore.exceptions.BotoCoreError as error:
            raise self._translate(error, "read bucket settings (object lock)") from error
        lifecycle = self._optional("get_bucket_lifecycle_configuration", "Rules")
        return BucketSettings(
            versioning=versioning or "Off",
            object_lock=bool(locked and locked.get("ObjectLockEnabled") == "Enabled"),
            object_lock_unknown=lock_unknown,
            abort_incomplete_days=_abort_days(lifecycle or [], self.prefix),
        )

    def probe_version_calls(self) -> dict[str, str | None]:
        """Try the version calls memsync depends on: ``{call: None (answered) or why not}``.

        ``ListObjectVersions`` lists at most one version under the prefix; ``DeleteObjects``
        deletes the ``null`` version of a key that does not exist (a fresh random name under
        the prefix), which removes nothing and leaves no delete marker. Never raises for S3's
        answer.
        """
        answers: dict[str, str | None] = {}
        try:
            self.client.list_object_versions(
                Bucket=self.bucket, Prefix=self.key("") + "/", MaxKeys=1
            )
            answers["ListObjectVersions"] = None
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            answers["ListObjectVersions"] = self._translate(error, "list versions").message
        absent = self.key(f".memsync-doctor-{uuid.uuid4().hex}")
        try:
            response = self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": absent, "VersionId": "null"}], "Quiet": True},
            )
            failures = response.get("Errors", [])
            answers["DeleteObjects (a version)"] = (
                f"S3 delete of a version at {self.where} refused: "
                f"{failures[0].get('Code')}: {failures[0].get('Message')}"
                if failures
                else None
            )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            answers["DeleteObjects (a version)"] = self._translate(
                error, "delete of a version"
            ).message
        return answers

    def _optional(self, call: str, field: str) -> Any:
        """A bucket setting that may not exist (None then, or when the service lacks the call)."""
        try:
            return getattr(self.client, call)(Bucket=self.bucket).get(field)
        except botocore.exceptions.ClientError as error:
            if error_code(error) in ("NoSuchLifecycleConfiguration", *NO_CALL):
                return None
            raise self._translate(error, f"read bucket settings ({call})") from error
        except botocore.exceptions.BotoCoreError as error:
            raise self._translate(error, f"read bucket settings ({call})") from error


def _version(item: dict[str, Any], *, delete_marker: bool) -> ObjectVersion:
    return ObjectVersion(
        key=item["Key"],
        version_id=str(item.get("VersionId") or "null"),
        latest=bool(item.get("IsLatest")),
        delete_marker=delete_marker,
        size=0 if delete_marker else int(item.get("Size", 0)),
        last_modified=item["LastModified"].astimezone(UTC),
    )


def _abort_days(rules: list[dict[str, Any]], prefix: str) -> int | None:
    """Days of the shortest enabled rule aborting incomplete uploads that covers ``prefix``."""
    days = []
    for rule in rules:
        if rule.get("Status") != "Enabled" or "AbortIncompleteMultipartUpload" not in rule:
            continue
        rule_prefix = rule.get("Prefix") or (rule.get("Filter") or {}).get("Prefix") or ""
        if prefix.startswith(rule_prefix.rstrip("/")):
            days.append(int(rule["AbortIncompleteMultipartUpload"].get("DaysAfterInitiation", 0)))
    return min(days) if days else None
