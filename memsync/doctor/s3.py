"""Doctor's backup-side probes: the bucket (when ``[s3]`` is set) and room for the next snapshot.

``probe_backups`` changes nothing: one list call (is the endpoint reachable, the bucket there,
access granted?), the bucket's versioning, object lock and lifecycle settings, the version calls
memsync depends on (a one-version list, and a delete of a version of a key that does not exist),
the incomplete multipart uploads under memsync's prefix, the pending uploads, and the snapshot
directory's free space.
An S3 that does not answer is a result (``s3-reachable`` error), never a crash; the other S3
probes are then left out. Result codes: docs/reference/commands/doctor.md.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from memsync.config import Config
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.errors import MemsyncError
from memsync.model import DoctorResult
from memsync.repository import upload_marks
from memsync.s3 import BucketSettings, MultipartUpload
from memsync.stores import locks, snapshots
from memsync.stores.manifest_schema import ID_PATTERN, valid_id

S3_RESULT_CODES = (
    "s3-reachable", "s3-access", "s3-versioning", "s3-object-lock", "s3-lifecycle",
    "s3-list-versions", "s3-delete-version", "s3-incomplete-uploads", "uploads-pending",
    "snapshot-space",
)  # fmt: skip
# What memsync does with each version call, and what it cannot do without it.
VERSION_CALLS = {
    "ListObjectVersions": (
        "s3-list-versions",
        "snapshot purge-memory and forget --erase cannot see the noncurrent versions that hold "
        "erased memories (they report them unknown and exit non-zero), nor snapshot prune the "
        "versions it leaves",
    ),
    "DeleteObjects (a version)": (
        "s3-delete-version",
        "purge-memory --delete-versions and snapshot prune --purge-versions cannot delete old "
        "versions holding erased memories or removed snapshots",
    ),
}
VERSION_FIX = (
    "set the provider's lifecycle rule that expires noncurrent versions under the prefix (or "
    "delete them in the provider's console), and check the credentials' permissions "
    "(s3:ListBucketVersions, s3:DeleteObjectVersion)"
)
STALE_UPLOAD = timedelta(days=1)  # an incomplete multipart upload older than this is left over
SPACE_FACTOR = 2  # warn when the snapshot directory has less room than twice the last snapshot
CONNECT_TIMEOUT_S = 5.0
LIFECYCLE_DAYS = 7


def probe_backups(config: Config, now: datetime) -> list[DoctorResult]:
    """Every backup-side result: snapshot space, pending uploads, then the bucket's. Reads only."""
    results = [*probe_snapshot_space(config), *probe_uploads_pending(config)]
    if config.s3 is None:
        return results
    from memsync.s3 import ObjectStore  # boto3: only with [s3]

    store = ObjectStore(config.s3, connect_timeout_s=CONNECT_TIMEOUT_S)
    access = store.check_access()
    if access.status == "unreachable":
        return [*results, _result("s3-reachable", ERROR, access.message, access.hint)]
    if access.status == "no-credentials":  # boto3 sends nothing unsigned: not tried
        results.append(
            _result(
                "s3-reachable",
                WARNING,
                f"{store.where}: not tried, no credentials to sign a request with",
                "see s3-access",
            )
        )
        return [*results, _result("s3-access", ERROR, access.message, access.hint)]
    results.append(_result("s3-reachable", OK, f"{store.where} answers"))
    if access.status != "ok":
        return [*results, _result("s3-access", ERROR, access.message, access.hint)]
    results.append(_result("s3-access", OK, f"{access.message}: the credentials work"))
    try:  # a read failing after the list call is its own result: each code appears once
        settings = store.bucket_settings()
    except MemsyncError as error:
        return [*results, _result("s3-versioning", ERROR, error.message, error.hint)]
    results += judge_bucket(settings, store.bucket, store.prefix)
    results += judge_version_calls(store.probe_version_calls(), settings.versioning)
    try:
        uploads = store.list_multipart_uploads(store.key("") + "/")
    except MemsyncError as error:
        return [*results, _result("s3-incomplete-uploads", ERROR, error.message, error.hint)]
    return [*results, judge_incomplete(uploads, now, store.prefix, store.where)]


def judge_bucket(settings: BucketSettings, bucket: str, prefix: str) -> list[DoctorResult]:
    """Versioning, object lock and the abort-incomplete lifecycle rule. Pure.

    Versioning off is a warning unless object lock is on: either keeps the snapshots a
    compromised host (or a bad prune) deletes or overwrites.
    """
    protected = settings.versioning == "Enabled" or settings.object_lock
    versioning = _result(
        "s3-versioning",
        OK if protected else WARNING,
        f"bucket {bucket}: versioning {settings.versioning.lower()}",
        None
        if protected
        else f"aws s3api put-bucket-versioning --bucket {bucket} --versioning-configuration "
        "Status=Enabled (and a lifecycle rule expiring noncurrent versions): a host that can "
        "delete can otherwise erase every backup",
    )
    lock = (
        _result(
            "s3-object-lock",
            WARNING,
            f"bucket {bucket}: object lock unknown ({settings.object_lock_unknown}): memsync "
            "cannot tell whether object lock keeps the versions it deletes",
            "none if the provider has no object lock (purge-memory and prune report each "
            "version S3 refuses to delete); otherwise ask the provider for "
            "GetObjectLockConfiguration",
        )
        if settings.object_lock_unknown
        else _result(
            "s3-object-lock",
            OK,
            f"bucket {bucket}: object lock {'enabled' if settings.object_lock else 'not enabled'}",
        )
    )
    days = settings.abort_incomplete_days
    lifecycle = _result(
        "s3-lifecycle",
        OK if days is not None else WARNING,
        f"bucket {bucket}: incomplete multipart uploads are aborted after {days} day(s)"
        if days is not None
        else f"bucket {bucket}: no lifecycle rule aborts incomplete multipart uploads under "
        f"{prefix or '/'} (their parts are billed and invisible)",
        None if days is not None else lifecycle_command(bucket, prefix),
    )
    return [versioning, lock, lifecycle]


def judge_version_calls(answers: dict[str, str | None], versioning: str) -> list[DoctorResult]:
    """One result per version call memsync depends on: ok, or what fails and its cost. Pure.

    A call that fails is an error when the bucket is (or was) versioned: noncurrent versions
    exist that memsync cannot list or delete; a warning while versioning was never enabled.
    """
    results = []
    for call, (code, consequence) in VERSION_CALLS.items():
        why = answers.get(call)
        if why is None:
            results.append(_result(code, OK, f"{call} answers"))
            continue
        status = WARNING if versioning == "Off" else ERROR
        results.append(
            _result(
                code, status,
                f"{call} fails ({why}): {consequence}"
                + (" once versioning is enabled" if status == WARNING else ""),
                VERSION_FIX,
            )
        )  # fmt: skip
    return results


def lifecycle_command(bucket: str, prefix: str) -> str:
    """The ``aws s3api`` command adding the recommended rule (it replaces existing rules). Pure."""
    rule = {
        "ID": "abort-incomplete-multipart-uploads",
        "Status": "Enabled",
        "Filter": {"Prefix": f"{prefix}/" if prefix else ""},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": LIFECYCLE_DAYS},
    }
    document = json.dumps({"Rules": [rule]}, separators=(",", ":"))
    return (
        f"aws s3api put-bucket-lifecycle-configuration --bucket {bucket} "
        f"--lifecycle-configuration '{document}' (this replaces the bucket's rules: merge it "
        "into the output of get-bucket-lifecycle-configuration when there are some)"
    )


def judge_incomplete(
    uploads: list[MultipartUpload], now: datetime, prefix: str, where: str
) -> DoctorResult:
    """Incomplete multipart uploads under the prefix; older than a day is a warning. Pure.

    The age is taken from the snapshot id in the key (``<prefix>/<id>/<path>``) when there is
    one: some services (moto) report a fixed ``Initiated`` time.
    """
    ages = sorted(((now - _started(upload, prefix)), upload.key) for upload in uploads)
    stale = [(age, key) for age, key in ages if age > STALE_UPLOAD]
    if not stale:
        message = f"{len(uploads)} incomplete multipart upload(s) under {where}" + (
            " (in progress: younger than a day)" if uploads else ""
        )
        return _result("s3-incomplete-uploads", OK, message)
    age, key = stale[-1]
    return _result(
        "s3-incomplete-uploads",
        WARNING,
        f"{len(stale)} incomplete multipart upload(s) older than a day under {where}, the "
        f"oldest {key} ({age.days} days): billed, never completed",
        "memsync snapshot create --upload --pending-only (resumes pending snapshots and aborts "
        "their uploads); memsync snapshot prune --remote removes incomplete remote snapshots; "
        "a lifecycle rule (s3-lifecycle) aborts the rest",
    )


def _started(upload: MultipartUpload, prefix: str) -> datetime:
    relative = upload.key[len(prefix) + 1 :] if prefix else upload.key
    snapshot_id = relative.partition("/")[0]
    if ID_PATTERN.match(snapshot_id) and valid_id(snapshot_id):
        return snapshots.id_time(snapshot_id)
    return upload.initiated


def probe_uploads_pending(config: Config) -> list[DoctorResult]:
    """Local snapshots waiting for their upload (``upload-pending.json``); none without ``[s3]``."""
    if config.s3 is None or config.snapshot.directory is None:
        return []
    pending = upload_marks.pending(config.snapshot.directory)
    limit = config.snapshot.max_pending_uploads
    if not pending:
        return [_result("uploads-pending", OK, "no snapshot waits for its upload")]
    marker = upload_marks.read(pending[0].path) or {}
    status = ERROR if len(pending) >= limit else WARNING
    return [
        _result(
            "uploads-pending",
            status,
            f"{len(pending)} snapshot(s) wait for upload (max_pending_uploads = {limit}), "
            f"oldest {pending[0].id}: {marker.get('last_error') or 'upload interrupted'}",
            "fix S3 (the s3-* results), then memsync snapshot create --upload --pending-only"
            + ("; no new snapshot is captured until then" if status == ERROR else ""),
            str(pending[0].path),
        )
    ]


def probe_snapshot_space(config: Config) -> list[DoctorResult]:
    """Free bytes of the snapshot directory against twice the newest snapshot's stored size."""
    directory = config.snapshot.directory
    if directory is None:
        return []
    try:
        complete = [info for info in snapshots.iter_local(directory) if info.complete]
        free, _total = locks.free_bytes(directory)
    except OSError:  # an unreadable directory is last-snapshot's and path-permissions' to say
        return []
    if not complete:
        return []
    newest = max(complete, key=lambda info: info.id)
    size = newest.manifest.stored_bytes if newest.manifest else newest.size_bytes
    enough = free >= SPACE_FACTOR * size
    return [
        _result(
            "snapshot-space",
            OK if enough else ERROR if free < size else WARNING,
            f"{free} bytes free for snapshots; the newest in the directory ({newest.id}, of "
            f"any deployment: last-snapshot counts this one's) took {size} bytes",
            None
            if enough
            else "free space or prune old snapshots (memsync snapshot prune): the next "
            "snapshot needs about as much as the last one",
            str(directory),
        )
    ]


def _result(
    code: str, status: str, message: str, fix: str | None = None, path: str | None = None
) -> DoctorResult:
    return DoctorResult(code=code, status=status, message=message, fix=fix, path=path)
