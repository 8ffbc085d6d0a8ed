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
from pathlib import Path
from typing import Any

import boto3
import boto3.exceptions
import botocore.config
import botocore.exceptions
from boto3.s3.transfer import TransferConfig

from memsync.config import S3Config
from memsync.config.redact import scrub_url
from memsync.errors import MemsyncError, UnavailableError
from memsync.s3.bucket import TIMEOUTS, BucketState
from memsync.s3.common import ObjectInfo, TransportError, error_code

# boto3's own defaults (8 MiB parts, 10 threads): larger parts were slower against moto here.
MULTIPART_THRESHOLD = 8 * 1024 * 1024
MULTIPART_CHUNK = 8 * 1024 * 1024


class ObjectStore(BucketState):
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

    def get_file(
        self,
        key: str,
        dest: Path,
        progress: Callable[[int], None] | None = None,
        action: str | None = None,
    ) -> None:
        """Download ``key`` to ``dest`` (overwritten).

        ``action`` names what the caller was doing in an error (default ``download KEY``).

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
            raise self._translate(error, action or f"download {key}") from error
        except boto3.exceptions.RetriesExceededError as error:  # s3transfer's retries of reads
            raise self._translate(
                error.last_exception or error, action or f"download {key}"
            ) from error

    def iter_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (a full key prefix), without metadata. Reads only."""
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    yield ObjectInfo(
                        key=item["Key"],
                        size=int(item["Size"]),
                        sha256=None,
                        modified=item.get("LastModified"),
                    )
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            raise self._translate(error, f"list {prefix}") from error

    def delete(self, keys: list[str]) -> None:
        """Delete ``keys`` (idempotent: missing keys are fine).

        Raises:
            UnavailableError: the request failed, or S3 refused some keys (DeleteObjects answers
                200 with per-key errors, e.g. a bucket policy denying deletes): the message
                names how many and the first.
        """
        refused: list[str] = []
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            try:
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
                raise self._translate(error, "delete objects") from error
            refused += [
                f"{failure.get('Key')} ({failure.get('Code')}: {failure.get('Message')})"
                for failure in response.get("Errors", [])
            ]
        if refused:
            raise UnavailableError(
                f"S3 delete at {self.where} refused {len(refused)} object(s), first {refused[0]}",
                "check the bucket policy and the credentials' s3:DeleteObject permission, then "
                "run the command again (it is idempotent)",
            )

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
            if error_code(error) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._translate(error, action) from error
        except botocore.exceptions.BotoCoreError as error:
            raise self._translate(error, action) from error

    def _translate(self, error: BaseException, action: str) -> MemsyncError:
        code = error_code(error) if isinstance(error, botocore.exceptions.ClientError) else ""
        if isinstance(
            error,
            botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectTimeoutError,
        ):
            return TransportError(
                f"S3 {action} at {self.where} failed: endpoint unreachable",
                "check s3.endpoint_url and the network; nothing local was removed",
            )
        if isinstance(error, TIMEOUTS):
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
