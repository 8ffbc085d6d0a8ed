"""What a bucket holds beyond current objects: versions, incomplete uploads, its own settings.

Against moto's S3 server on 127.0.0.1 (a real S3 protocol server); the objects are made with
boto3 directly, the way another writer, a killed upload or an operator's console would.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest

from memsync.config import S3Config
from memsync.errors import UnavailableError
from memsync.s3 import ObjectLockedError, ObjectStore, VersionsUnlistedError
from tests.helpers.s3_proxy import provider_lacking


def _store(endpoint: str, bucket: str) -> ObjectStore:
    return ObjectStore(
        S3Config(bucket=bucket, prefix="memsync/p", region="us-east-1", endpoint_url=endpoint)
    )


def test_versions_are_listed_read_and_deleted_for_good(s3_endpoint, bucket):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    store = _store(s3_endpoint, bucket)
    assert store.bucket_settings().versioning == "Enabled"
    for body in (b"first secret", b"second"):
        client.put_object(Bucket=bucket, Key="memsync/p/a", Body=body)
    client.delete_object(Bucket=bucket, Key="memsync/p/a")
    client.put_object(Bucket=bucket, Key="elsewhere/b", Body=b"not ours")
    versions = store.list_versions("memsync/p/")
    assert {v.key for v in versions} == {"memsync/p/a"}
    assert sorted((v.delete_marker, v.latest, v.size) for v in versions) == [
        (False, False, 6),
        (False, False, 12),
        (True, True, 0),
    ]
    assert {store.get_version_bytes(v) for v in versions} == {b"first secret", b"second", b""}
    store.delete_versions(versions)
    assert store.list_versions("memsync/p/") == []
    store.delete_versions(versions)  # idempotent
    assert [v.key for v in store.list_versions("elsewhere/")] == ["elsewhere/b"]


def test_an_unversioned_bucket_lists_each_object_once(s3_endpoint, bucket):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_object(Bucket=bucket, Key="memsync/p/a", Body=b"x")
    store = _store(s3_endpoint, bucket)
    settings = store.bucket_settings()
    assert (settings.versioning, settings.object_lock, settings.abort_incomplete_days) == (
        "Off",
        False,
        None,
    )
    [version] = store.list_versions("memsync/p/")
    assert (version.version_id, version.latest, version.size) == ("null", True, 1)


def test_incomplete_multipart_uploads_are_found_and_aborted(s3_endpoint, bucket):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    started = client.create_multipart_upload(Bucket=bucket, Key="memsync/p/big")
    client.upload_part(
        Bucket=bucket, Key="memsync/p/big", UploadId=started["UploadId"], PartNumber=1, Body=b"x"
    )
    client.create_multipart_upload(Bucket=bucket, Key="other/big")
    store = _store(s3_endpoint, bucket)
    [upload] = store.list_multipart_uploads("memsync/p/")
    assert (upload.key, upload.upload_id) == ("memsync/p/big", started["UploadId"])
    store.abort_multipart_uploads([upload])
    assert store.list_multipart_uploads("memsync/p/") == []
    store.abort_multipart_uploads([upload])  # idempotent: NoSuchUpload is fine
    assert len(store.list_multipart_uploads("other/")) == 1


def test_a_lifecycle_rule_covering_the_prefix_is_read(s3_endpoint, bucket):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    store = _store(s3_endpoint, bucket)
    rules = [
        {
            "ID": "other-prefix",
            "Status": "Enabled",
            "Filter": {"Prefix": "logs/"},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        },
        {
            "ID": "whole-bucket",
            "Status": "Enabled",
            "Filter": {"Prefix": ""},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
        },
    ]
    client.put_bucket_lifecycle_configuration(
        Bucket=bucket, LifecycleConfiguration={"Rules": rules}
    )
    assert store.bucket_settings().abort_incomplete_days == 7  # the logs/ rule does not cover it


def test_object_lock_refusal_names_the_version_and_what_to_do(s3_endpoint, request):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    name = f"locked-{abs(hash(request.node.name)) % 10**8}"
    client.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    client.put_object(
        Bucket=name,
        Key="memsync/p/held",
        Body=b"x",
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=datetime.now(UTC) + timedelta(days=1),
        ChecksumAlgorithm="SHA256",
    )
    store = _store(s3_endpoint, name)
    assert store.bucket_settings().object_lock is True
    versions = store.list_versions("memsync/p/")
    with pytest.raises(ObjectLockedError, match=r"refused 1 object version.*memsync/p/held"):
        store.delete_versions(versions)
    assert store.list_versions("memsync/p/") == versions  # nothing was deleted


def test_a_provider_without_version_listing_is_unlisted_unless_never_versioned(s3_endpoint, bucket):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_object(Bucket=bucket, Key="memsync/p/a", Body=b"only one")
    with provider_lacking(s3_endpoint, "list-versions") as lacking:
        store = _store(lacking.endpoint, bucket)
        [current] = store.list_versions("memsync/p/")  # never versioned: no old version exists
        assert (current.key, current.version_id, current.latest) == ("memsync/p/a", "null", True)
        client.put_bucket_versioning(
            Bucket=bucket, VersioningConfiguration={"Status": "Suspended"}
        )  # versions made while it was enabled would still be there
        with pytest.raises(VersionsUnlistedError, match="does not implement ListObjectVersions"):
            store.list_versions("memsync/p/")
        assert store.probe_version_calls()["ListObjectVersions"] is not None


def test_a_refused_delete_of_versions_deletes_nothing_and_says_so(s3_endpoint, bucket):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    for body in (b"old", b"new"):
        client.put_object(Bucket=bucket, Key="memsync/p/a", Body=body)
    with provider_lacking(s3_endpoint, "delete-version") as lacking:
        store = _store(lacking.endpoint, bucket)
        versions = store.list_versions("memsync/p/")
        with pytest.raises(UnavailableError, match="NotImplemented"):
            store.delete_versions(versions)
        assert store.list_versions("memsync/p/") == versions
        answers = store.probe_version_calls()
        assert answers["ListObjectVersions"] is None
        assert "NotImplemented" in str(answers["DeleteObjects (a version)"])
    assert _store(s3_endpoint, bucket).probe_version_calls() == {
        "ListObjectVersions": None,
        "DeleteObjects (a version)": None,
    }
    assert [v["Key"] for v in client.list_object_versions(Bucket=bucket)["Versions"]] == [
        "memsync/p/a",
        "memsync/p/a",
    ]  # the probe removed nothing and left no delete marker
    assert "DeleteMarkers" not in client.list_object_versions(Bucket=bucket)
