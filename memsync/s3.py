"""ObjectStore over boto3: put/get files with their sha256, list, delete. The only boto3 user.

Credentials come from boto3's own chain only (environment, shared files, instance roles).
Every object memsync writes carries its sha256 in the metadata (``x-amz-meta-sha256``): a
multipart object's ETag is not an MD5 and its ChecksumSHA256 is a checksum of part checksums,
so memsync compares its own digest. Since botocore 1.36 the client adds CRC checksums to every
upload (``s3.checksums = "when_supported"``, boto3's default); several S3-compatible services
(R2, MinIO, others by version) reject them, and ``"when_required"`` keeps them off. Measured against moto here, ``when_required`` halved upload throughput
(bench/README.md), so it is opt-in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import boto3.exceptions
import botocore.config
import botocore.exceptions
import urllib3.exceptions
from boto3.s3.transfer import TransferConfig

from memsync.config import S3Config
from memsync.config.redact import scrub_url
from memsync.errors import MemsyncError, UnavailableError

# boto3's own defaults (8 MiB parts, 10 threads): larger parts were slower against moto here.
MULTIPART_THRESHOLD = 8 * 1024 * 1024
MULTIPART_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectInfo:
    """An object's key, size in bytes and the sha256 memsync stored in its metadata (or None)."""

    key: str
    size: int
    sha256: str | None


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
        abort_incomplete_days: days after which an enabled lifecycle rule covering the whole
            bucket or memsync's prefix aborts incomplete multipart uploads; None without one.
    """

    versioning: str
    object_lock: bool
    abort_incomplete_days: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Access:
    """What one list call under the prefix found (``ObjectStore.check_access``).

    Attributes:
        status: ``"ok"``, ``"unreachable"`` (no connection or no answer in time),
            ``"no-bucket"``, ``"denied"`` (no credentials, or refused) or ``"failed"``.
        message: one line for the operator (the error's, or what was listed).
        hint: what to do, or None.
    """

    status: str
    message: str
    hint: str | None = None


class ObjectLockedError(UnavailableError):
    """Object lock (retention or legal hold) refused to delete an object version (exit 11)."""


class TransportError(UnavailableError):
    """The endpoint could not be reached or did not answer in time (exit 11).

    Never a finding about the data: nothing was read, so nothing can be judged.
    """


class ObjectStore:
    """A bucket and prefix of an S3-compatible service.

    Args:
        config: the ``[s3]`` section (``timeout_s``: connect and read timeout, seconds).
        connect_timeout_s: seconds to wait for a connection when ``timeout_s`` is unset
            (the read timeout is then at least 60 seconds).
    """

    def __init__(self, config: S3Config, connect_timeout_s: float = 10.0) -> None:
        self.config = config
        self.bucket = config.bucket
        self.prefix = config.prefix.strip("/")
        if config.timeout_s is not None:
            connect_timeout_s = read_timeout_s = config.timeout_s
        else:
            read_timeout_s = max(connect_timeout_s, 60.0)
        client_config = botocore.config.Config(
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            retries={"max_attempts": 3, "mode": "standard"},
            s3={"addressing_style": "path" if config.endpoint_url else "auto"},
            request_checksum_calculation=config.checksums,
            response_checksum_validation=config.checksums,
        )
        self.client: Any = boto3.session.Session().client(
            "s3",
            region_name=config.region,
            endpoint_url=config.endpoint_url,
            config=client_config,
        )
        self.transfer = TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD, multipart_chunksize=MULTIPART_CHUNK
        )

    @property
    def where(self) -> str:
        """``s3://bucket/prefix`` for messages (with the endpoint when one is set)."""
        endpoint = f" at {scrub_url(self.config.endpoint_url)}" if self.config.endpoint_url else ""
        return f"s3://{self.bucket}/{self.prefix}{endpoint}"

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` under the prefix."""
        return "/".join(part.strip("/") for part in (self.prefix, *parts) if part)

    def head(self, key: str, action: str | None = None) -> ObjectInfo | None:
        """Return the object's info, or None when it does not exist. Reads only.

        ``action`` is what an error message says was being done (default ``look up KEY``).
        """
        response = self._read(key, self.client.head_object, action or f"look up {key}")
        if response is None:
            return None
        metadata = response.get("Metadata") or {}
        return ObjectInfo(
            key=key, size=int(response["ContentLength"]), sha256=metadata.get("sha256")
        )

    def put_file(
        self,
        key: str,
        path: Path,
        sha256: str,
        progress: Callable[[int], None] | None = None,
        *,
        force: bool = False,
    ) -> bool:
        """Upload ``path`` to ``key`` with its sha256 in the metadata, unless already there.

        An object with the same size and sha256 metadata is not sent again (resume), unless
        ``force`` (its bytes were read back and differ: the metadata alone is trusted otherwise).
        Returns True when bytes were sent. Multipart above ``MULTIPART_THRESHOLD`` (8 MiB).

        Raises:
            UnavailableError: endpoint unreachable, bucket missing, access denied.
        """
        size = path.stat().st_size
        existing = (
            None if force else self.head(key, f"upload {key} (checking the object already there)")
        )
        if existing is not None and existing.size == size and existing.sha256 == sha256:
            if progress is not None:
                progress(size)
            return False
        extra: dict[str, Any] = {"Metadata": {"sha256": sha256}}
        if self.config.storage_class:
            extra["StorageClass"] = self.config.storage_class
        if self.config.sse:
            extra["ServerSideEncryption"] = self.config.sse
            if self.config.sse_kms_key_id:
                extra["SSEKMSKeyId"] = self.config.sse_kms_key_id
        try:
            self.client.upload_file(
                str(path),
                self.bucket,
                key,
                ExtraArgs=extra,
                Config=self.transfer,
                Callback=progress,
            )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, f"upload {key}") from error
        except boto3.exceptions.S3UploadFailedError as error:
            raise UnavailableError(
                f"upload of {key} to {self.where} failed: {error}",
                "check the endpoint, bucket and credentials; nothing local was removed",
            ) from error
        return True

    def get_file(self, key: str, dest: Path, progress: Callable[[int], None] | None = None) -> None:
        """Download ``key`` to ``dest`` (overwritten).

        Raises:
            UnavailableError: as ``put_file``, or the object does not exist.
            TransportError: the endpoint stopped answering (every retry timed out).
        """
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.client.download_file(
                self.bucket, key, str(dest), Config=self.transfer, Callback=progress
            )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, f"download {key}") from error
        except boto3.exceptions.RetriesExceededError as error:  # s3transfer's retries of reads
            raise self._translate(error.last_exception or error, f"download {key}") from error

    def iter_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (a full key prefix), without metadata. Reads only."""
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    yield ObjectInfo(key=item["Key"], size=int(item["Size"]), sha256=None)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, f"list {prefix}") from error

    def noncurrent_versions(self, prefix: str) -> list[str]:
        """``key?versionId=…`` of every non-current version under ``prefix`` (versioned buckets).

        Empty for unversioned buckets or services without versioning. Reads only.
        """
        found = []
        try:
            paginator = self.client.get_paginator("list_object_versions")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for version in page.get("Versions", []):
                    if not version.get("IsLatest") and version.get("VersionId") not in (
                        None,
                        "null",
                    ):
                        found.append(f"{version['Key']}?versionId={version['VersionId']}")
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
            return []
        return found

    def list_versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version and delete marker under ``prefix`` (a full key prefix). Reads only.

        An unversioned bucket lists each object once, with version id ``"null"``; a service
        without the ListObjectVersions call lists the current objects that way.

        Raises:
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
            if _code(error) not in ("NotImplemented", "MethodNotAllowed"):
                raise self._translate(error, f"list versions under {prefix}") from error
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
            ObjectLockedError: object lock refused one or more of them (the others are gone);
                the message names the first.
            UnavailableError: the endpoint, bucket or credentials fail.
        """
        refused: list[str] = []
        for start in range(0, len(versions), 1000):
            batch = [
                {"Key": v.key, "VersionId": v.version_id} for v in versions[start : start + 1000]
            ]
            try:
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
                raise self._translate(error, "delete object versions") from error
            for failure in response.get("Errors", []):
                refused.append(
                    f"{failure.get('Key')}?versionId={failure.get('VersionId')} "
                    f"({failure.get('Code')}: {failure.get('Message')})"
                )
        if refused:
            raise ObjectLockedError(
                f"S3 delete at {self.where} refused {len(refused)} object version(s), "
                f"first {refused[0]}: object lock (retention or legal hold) protects them",
                "they go when their retention ends; an operator with "
                "s3:BypassGovernanceRetention can remove governance-mode locks",
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

    def list_multipart_uploads(self, prefix: str) -> list[MultipartUpload]:
        """Multipart uploads started under ``prefix`` and never completed or aborted. Reads only.

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
            raise self._translate(error, f"list multipart uploads under {prefix}") from error
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
                if _code(error) != "NoSuchUpload":  # already completed or aborted
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
            code = _code(error) if isinstance(error, botocore.exceptions.ClientError) else ""
            if isinstance(translated, TransportError) or isinstance(error, _TIMEOUTS):
                status = "unreachable"
            elif code == "NoSuchBucket":
                status = "no-bucket"
            elif code in _DENIED or isinstance(error, botocore.exceptions.NoCredentialsError):
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
        locked = self._optional("get_object_lock_configuration", "ObjectLockConfiguration")
        lifecycle = self._optional("get_bucket_lifecycle_configuration", "Rules")
        return BucketSettings(
            versioning=versioning or "Off",
            object_lock=bool(locked and locked.get("ObjectLockEnabled") == "Enabled"),
            abort_incomplete_days=_abort_days(lifecycle or [], self.prefix),
        )

    def _optional(self, call: str, field: str) -> Any:
        """A bucket setting that may not exist (None then, or when the service lacks the call)."""
        try:
            return getattr(self.client, call)(Bucket=self.bucket).get(field)
        except botocore.exceptions.ClientError as error:
            if _code(error) in (
                "ObjectLockConfigurationNotFoundError",
                "NoSuchLifecycleConfiguration",
                "NotImplemented",
                "MethodNotAllowed",
            ):
                return None
            raise self._translate(error, f"read bucket settings ({call})") from error
        except botocore.exceptions.BotoCoreError as error:
            raise self._translate(error, f"read bucket settings ({call})") from error

    def delete(self, keys: list[str]) -> None:
        """Delete ``keys`` (idempotent: missing keys are fine)."""
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            try:
                self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
                raise self._translate(error, "delete objects") from error

    def put_bytes(self, key: str, data: bytes, sha256: str) -> None:
        """Write a small object (manifest, verified.json) with its sha256 metadata."""
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=key, Body=data, Metadata={"sha256": sha256}
            )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, f"upload {key}") from error

    def get_bytes(self, key: str) -> bytes | None:
        """Read a small object; None when it does not exist."""
        response = self._read(key, self.client.get_object, f"download {key}")
        if response is None:
            return None
        try:
            return bytes(response["Body"].read())
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, f"download {key}") from error

    def _read(self, key: str, call: Any, action: str) -> Any:
        """``call(Bucket=…, Key=key)``; None when the object does not exist."""
        try:
            return call(Bucket=self.bucket, Key=key)
        except botocore.exceptions.ClientError as error:
            if _code(error) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._translate(error, action) from error
        except botocore.exceptions.BotoCoreError as error:
            raise self._translate(error, action) from error

    def _translate(self, error: BaseException, action: str) -> MemsyncError:
        code = _code(error) if isinstance(error, botocore.exceptions.ClientError) else ""
        if isinstance(
            error,
            botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectTimeoutError,
        ):
            return TransportError(
                f"S3 {action} at {self.where} failed: endpoint unreachable",
                "check s3.endpoint_url and the network; nothing local was removed",
            )
        if isinstance(error, _TIMEOUTS):
            return TransportError(
                f"S3 {action} at {self.where} failed: no answer in time "
                f"({type(error).__name__}, after retries)",
                "check the endpoint and the network (s3.timeout_s sets the timeout); "
                "nothing was judged and nothing local was removed",
            )
        if isinstance(error, botocore.exceptions.NoCredentialsError):
            reason, hint = (
                "no credentials found",
                "provide AWS credentials through boto3's chain (environment, shared files, "
                "role); the systemd units load them with LoadCredential=: to run by hand with "
                "the same ones, see docs/how-to/install-on-a-vps.md (credentials by hand)",
            )
        elif code in ("NoSuchBucket",):
            reason, hint = "bucket does not exist", "create the bucket or fix s3.bucket"
        elif code in (
            "AccessDenied",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "403",
            "AllAccessDisabled",
        ):
            reason, hint = f"access denied ({code})", "check the credentials and the bucket policy"
        else:
            reason, hint = (
                f"{type(error).__name__}: {error}",
                "check the endpoint, bucket and credentials",
            )
        return UnavailableError(f"S3 {action} at {self.where} failed: {reason}", hint)


_DENIED = (
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "403",
    "AllAccessDisabled",
)

# A read that timed out or broke off: urllib3's and the socket's own when s3transfer re-raises them.
_TIMEOUTS = (
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ConnectionClosedError,
    botocore.exceptions.IncompleteReadError,
    botocore.exceptions.ResponseStreamingError,
    urllib3.exceptions.HTTPError,
    TimeoutError,
    ConnectionError,
)


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


def _code(error: botocore.exceptions.ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
