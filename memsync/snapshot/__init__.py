"""``snapshot``: both stores captured in one job into one dated directory, verified, uploaded, pruned.

Split by concern: ``create`` (capture, check, manifest, commit), ``verify`` (one path for a
directory and a bucket), ``verify_scheduled`` (a scheduled run: manifests, the newest, a slice
planned by the pure ``verify_schedule``), ``retention`` (``plan_retention``, pure: one decision over
both sides), ``prune`` (``apply_retention`` deletes on each side) and ``transfer`` (upload,
download). Where snapshots are stored is ``memsync.repository``; the
manifest is ``memsync.stores.manifest``. Layout and codes: docs/reference/contract.md ("Snapshot layout").
"""

from __future__ import annotations

from memsync.repository import object_store, parse_s3_target, snapshot_dir
from memsync.snapshot.create import (
    Created,
    build_manifest,
    create_snapshot,
    finish_directory,
    signing_key,
)
from memsync.snapshot.retention import Candidate, PruneDecision, merge, plan_retention
from memsync.snapshot.retention_apply import (
    Sides,
    apply_retention,
    open_sides,
    purge_versions,
    survey,
    versions_left,
)
from memsync.snapshot.transfer import download_snapshot, upload_snapshot
from memsync.snapshot.verify import (
    VERIFY_CODES,
    VerifyReport,
    verified_document,
    verify_directory,
    verify_remote,
    verify_snapshot,
)

__all__ = [
    "VERIFY_CODES",
    "Candidate",
    "Created",
    "PruneDecision",
    "Sides",
    "VerifyReport",
    "apply_retention",
    "build_manifest",
    "create_snapshot",
    "download_snapshot",
    "finish_directory",
    "merge",
    "object_store",
    "open_sides",
    "parse_s3_target",
    "plan_retention",
    "purge_versions",
    "signing_key",
    "snapshot_dir",
    "survey",
    "upload_snapshot",
    "verified_document",
    "verify_directory",
    "verify_remote",
    "verify_snapshot",
    "versions_left",
]
