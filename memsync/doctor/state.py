"""Doctor's probes of memsync's own state: the last snapshot, restores, the daemon's jobs."""

from __future__ import annotations

from datetime import datetime

from memsync import jobs, state
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.model import DoctorResult
from memsync.stores import snapshots
from memsync.stores.embedder import restorable_here

SNAPSHOT_MAX_AGE_S = 36 * 3600


def probe_last_snapshot(deployment: Deployment, now: datetime) -> DoctorResult:
    """Age of the newest complete snapshot in the snapshot directory (by its id's UTC time).

    Safety snapshots do not count: they hold the damage a repair was about to settle. Nor do
    snapshots this deployment cannot restore (``restorable_here``: another embedder's vectors,
    taken before a migration, or the other backend's): ``restore latest`` never chooses them.
    """
    config = deployment.config
    directory = config.snapshot.directory
    if directory is None:
        return DoctorResult(
            code="last-snapshot",
            status=WARNING,
            message="no snapshot directory configured: there is no backup to restore from",
            fix="set [snapshot] directory and run memsync snapshot create",
        )
    try:  # the catalogue's own reading: a damaged, foreign or symlinked entry is not complete
        complete = [e for e in snapshots.iter_local(directory) if e.complete and not e.is_safety]
        mode = deployment.vector_store.mode
        foreign = [e for e in complete if not restorable_here(e.manifest, config, mode)]
        complete = [e for e in complete if e not in foreign]
    except OSError as error:
        return DoctorResult(
            code="last-snapshot",
            status=ERROR,
            path=str(directory),
            message=f"snapshot directory cannot be read: {error.strerror or error}",
            fix="run memsync as the app's user, or give its group access (UMask=0007)",
        )
    if not complete:
        return _only_remote(deployment, directory, now) or DoctorResult(
            code="last-snapshot",
            status=WARNING,
            path=str(directory),
            message="no complete snapshot of this deployment found"
            + (
                f": the {len(foreign)} complete snapshot(s) hold another embedder's vectors or the "
                "other backend's (taken before a migration), which restore latest never chooses"
                if foreign
                else ""
            ),
            fix="memsync snapshot create",
        )
    newest = max(complete, key=lambda entry: entry.created_at)
    age = (now - newest.created_at).total_seconds()
    return DoctorResult(
        code="last-snapshot",
        status=WARNING if age > SNAPSHOT_MAX_AGE_S else OK,
        path=str(newest.path),
        message=f"newest snapshot {newest.id} is {age / 3600:.1f} hours old",
        fix="memsync snapshot create" if age > SNAPSHOT_MAX_AGE_S else None,
    )


def _only_remote(deployment: Deployment, directory: object, now: datetime) -> DoctorResult | None:
    """``last-snapshot`` when none is local but the bucket holds some (a lost disk); else None.

    Lists the bucket (a manifest read per snapshot). The fix is ``restore latest`` when a store
    is missing, else ``snapshot create`` (the bucket's copies stay where they are).
    """
    config = deployment.config
    if config.s3 is None:
        return None
    try:
        mode = deployment.vector_store.mode
        found = [
            e
            for e in deployment.remote.list()
            if e.complete and not e.is_safety and restorable_here(e.manifest, config, mode)
        ]
    except Exception:  # noqa: BLE001 - the bucket's own results (s3-*) say what is wrong
        return None
    if not found:
        return None
    verified = [e for e in found if e.is_verified]
    newest = max(verified or found, key=lambda entry: entry.created_at)
    age = (now - newest.created_at).total_seconds() / 3600
    own = [own.path for own in deployment.vector_store.local_dirs()]
    missing = [str(path) for path in (*own, config.history_db_path) if not path.exists()]
    what = f"{'verified ' if newest.is_verified else ''}snapshot {newest.id}, {age:.1f} hours old"
    if missing:
        return DoctorResult(
            code="last-snapshot",
            status=ERROR,
            path=str(directory),
            message=f"{', '.join(missing)} missing and no snapshot here; the bucket holds "
            f"{len(found)}, the newest {what}",
            fix="memsync restore latest (it fetches the newest verified snapshot from the bucket)"
            if newest.is_verified
            else f"memsync restore s3://{newest.id} (none in the bucket passed verification, "
            "which restore latest needs)",
        )
    return DoctorResult(
        code="last-snapshot",
        status=WARNING,
        path=str(directory),
        message=f"no complete snapshot here; the bucket holds {len(found)}, the newest {what}",
        fix="memsync snapshot create (a local one for a fast restore)",
    )


def probe_daemon(config: Config, now: datetime) -> list[DoctorResult]:
    """Judge the daemon and its jobs: ``daemon`` and one ``daemon-job`` error per job in trouble.

    ``daemon`` (running or not) only when ``[daemon]`` schedules jobs; ``daemon-job`` for each
    job overdue or failing.
    The judgement is ``jobs.judge_jobs``, the one ``memsync status`` exits 3 on: doctor is
    unhealthy exactly when status would exit 3 (and for its own other errors). Reads only.
    """
    results = []
    document = jobs.load_state(config)
    if config.daemon.jobs:
        pid = jobs.daemon_pid(config)
        never = (
            ""
            if document.get("started_at")
            else " (it has never started: its jobs have not run yet)"
        )
        results.append(
            DoctorResult(
                code="daemon",
                status=OK if pid else WARNING,
                message=f"daemon running as pid {pid}"
                if pid
                else f"no memsync daemon runs for this state directory{never}",
                fix=None
                if pid
                else "systemctl enable --now memsync (docs/how-to/install-on-a-vps.md)",
            )
        )
    verdict = jobs.judge_jobs(config, document, now)
    for row in verdict.problems:
        problem = " and ".join(
            ([] if not row["overdue"] else ["overdue"])
            + ([] if not row["failing"] else [f"failing ({row['last_outcome']})"])
        )
        success = row["last_success_at"]
        results.append(
            DoctorResult(
                code="daemon-job",
                status=ERROR,
                message=f"job {row['job']} is {problem}: {row['reason']}"
                + (f"; last success {success}" if success else ""),
                fix=row["next_step"] or "memsync status; journalctl -u memsync",
            )
        )
    return results


def probe_restores(config: Config) -> list[DoctorResult]:
    """An unfinished restore (error); the copies it kept are ``doctor.copies``' to list."""
    results = []
    pending = state.unfinished_restore(config.state_dir)
    if pending is not None:
        results.append(
            DoctorResult(
                code="restore-unfinished",
                status=ERROR,
                path=str(config.state_dir / state.RESTORE_JOURNAL),
                message=f"a restore of snapshot {pending} did not finish",
                fix="memsync restore --resume (finishes it or rolls it back)",
            )
        )
    return results
