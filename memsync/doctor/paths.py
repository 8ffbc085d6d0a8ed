"""Doctor's probes of paths and locks: mounts, tmpfs, /tmp, free space, permissions, lock holders.

Reads only (``statvfs``, ``/proc``); never takes a lock.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memsync.deployment import Deployment
from memsync.doctor.status import ERROR, OK, WARNING
from memsync.errors import MemsyncError
from memsync.model import DoctorResult
from memsync.stores import locks
from memsync.stores.vector_store import LocalDir

VOLATILE_FS = frozenset({"tmpfs", "ramfs"})
# A container's writable layer: removing the container (a redeploy, a pod rescheduled) loses
# the file; mem0ai/mem0 #3717 lost history.db that way (mem0's REST server on Kubernetes).
CONTAINER_LAYER_FS = frozenset({"overlay", "aufs"})
MIN_FREE_BYTES = 256 * 1024 * 1024


def probe_paths(deployment: Deployment) -> list[DoctorResult]:
    """Mount, filesystem type, /tmp placement, free space and permissions of every path.

    The store's own directories (``LiveStore.local_dirs``) and history.db must exist (mem0
    creates both at its first start): absent means lost or, more likely, a wrong path.
    """
    config, store = deployment.config, deployment.vector_store
    # (label, path, precious, required, the store whose files it holds)
    data_paths: list[tuple[str, Path, bool, bool, LocalDir | None]] = [
        *((own.label, own.path, True, True, own) for own in store.local_dirs()),
        ("history.db", config.history_db_path, True, True, None),
        ("MEM0_DIR", config.mem0_dir, False, False, None),
        *(
            (telemetry.label, telemetry.path, False, False, None)
            for telemetry in store.telemetry(config.migrations_qdrant_path)
            if _exists(telemetry.path)  # optional (telemetry off): an absent one is no news
        ),
        ("memsync state directory", config.state_dir, False, False, None),
        ("memsync work directory", config.work_dir, False, False, None),
    ]
    if config.snapshot.directory is not None:
        data_paths.append(("snapshot directory", config.snapshot.directory, True, False, None))
    results: list[DoctorResult] = []
    for label, path, precious, required, own in data_paths:
        try:
            results += _probe_one_path(label, path, precious, required)
            if own is not None:
                results += _probe_store_files(own)
        except OSError as error:
            results.append(
                DoctorResult(
                    code="path-permissions",
                    status=ERROR if precious else WARNING,
                    path=str(path),
                    message=f"{label} cannot be inspected: {error.strerror}",
                    fix="run memsync as the app's user, or give its group access (UMask=0007)",
                )
            )
    return results


def _probe_mount(label: str, path: Path, precious: bool) -> DoctorResult:
    """The filesystem under ``path``: tmpfs (a reboot wipes it), a container layer, or fine."""
    mountpoint, fstype, _device = locks.mount_of(path)
    if fstype in VOLATILE_FS:
        return DoctorResult(
            code="path-volatile",
            status=ERROR if precious else WARNING,
            path=str(path),
            message=f"{label} is on {fstype} ({mountpoint}): a reboot wipes it",
            fix="move it to persistent storage (docs/how-to/move-store-off-tmp.md)",
        )
    if fstype in CONTAINER_LAYER_FS and precious:  # one mount, one verdict for every store
        return DoctorResult(
            code="path-volatile",
            status=ERROR,
            path=str(path),
            message=f"{label} is on {fstype} ({mountpoint}), a container's writable layer: "
            "removing or rescheduling the container loses it",
            fix="mount a volume (a PersistentVolumeClaim on Kubernetes) at its directory "
            "and point the config there",
        )
    return DoctorResult(
        code="path-mount",
        status=OK,
        path=str(path),
        message=f"{label} is on {fstype} mounted at {mountpoint}"
        if _exists(path)
        else f"{label} (not there) would be on {fstype} mounted at {mountpoint}",
    )


def _probe_one_path(label: str, path: Path, precious: bool, required: bool) -> list[DoctorResult]:
    results = [_probe_mount(label, path, precious)]
    if precious and _under_tmp(path):
        results.append(
            DoctorResult(
                code="path-under-tmp",
                status=WARNING,
                path=str(path),
                message=f"{label} is under /tmp: systemd-tmpfiles cleans it, /tmp is tmpfs on "
                "current distributions, and a service with PrivateTmp=yes sees its own /tmp",
                fix="move it to persistent storage (docs/how-to/move-store-off-tmp.md)",
            )
        )
    results.append(_probe_free_space(label, path))
    if path.exists():
        results.append(_probe_permissions(label, path))
    elif required:
        results.append(
            DoctorResult(
                code="path-permissions",
                status=ERROR,
                path=str(path),
                message=f"{label} does not exist: a wrong mem0_dir or [mem0] path looks "
                "exactly like a lost store",
                fix="check the path first (memsync config show); if it is right: memsync "
                "restore <snapshot>",
            )
        )
    return results


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; True when it cannot be told (the probes then say why)."""
    try:
        return path.exists()
    except OSError:
        return True


def _probe_store_files(own: LocalDir) -> list[DoctorResult]:
    """Owner and mode of every file of the store in ``own``.

    They hold the same personal texts as history.db.
    """
    try:
        names = own.store.files(own.path) if own.store.present() else []
    except MemsyncError:  # an unreadable index is check's and collection-params' to report
        return []
    return [_probe_permissions(f"{own.files_label} {name}", own.path / name) for name in names]


def _under_tmp(path: Path) -> bool:
    absolute = str(path.absolute())
    roots = ("/tmp", "/var/tmp")  # noqa: S108 - we detect them, we do not write there
    return any(absolute == root or absolute.startswith(root + "/") for root in roots)


def _probe_free_space(label: str, path: Path) -> DoctorResult:
    free, total = locks.free_bytes(path)
    ratio = free / total if total else 0.0
    status = ERROR if free < MIN_FREE_BYTES else WARNING if ratio < 0.10 else OK
    return DoctorResult(
        code="disk-space",
        status=status,
        path=str(path),
        message=f"{label}: {_gib(free)} free of {_gib(total)} ({ratio:.0%}; {free} bytes)",
        fix=None
        if status == OK
        else "free space: SQLite writes and memsync's captures fail on a full disk",
    )


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


def _probe_permissions(label: str, path: Path) -> DoctorResult:
    info = path.stat()
    mode = stat.S_IMODE(info.st_mode)
    readable = os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0))
    detail = f"owner uid {info.st_uid} gid {info.st_gid}, mode {mode:04o}"
    if not readable:
        return DoctorResult(
            code="path-permissions",
            status=ERROR,
            path=str(path),
            message=f"{label} is not readable by memsync (uid {os.getuid()}): {detail}",
            fix="run memsync as the app's user or a group that can read the store (UMask=0007)",
        )
    if mode & stat.S_IROTH and path.is_file():
        return DoctorResult(
            code="path-permissions",
            status=WARNING,
            path=str(path),
            message=f"{label} is readable by every user ({detail}); it holds personal memories",
            fix=f"chmod o-rwx {path}",
        )
    return DoctorResult(
        code="path-permissions", status=OK, path=str(path), message=f"{label}: {detail}"
    )


def probe_locks(deployment: Deployment) -> list[DoctorResult]:
    """Which process holds each lock of the store's directories, and whether it sees them.

    The directories: ``LiveStore.local_dirs`` and ``telemetry`` (none for a server store).
    """
    config, live = deployment.config, deployment.vector_store
    results = []
    for own in (*live.local_dirs(), *live.telemetry(config.migrations_qdrant_path)):
        label, directory, lock_file = own.label, own.path, own.store.lock_path()
        if lock_file is None:
            continue  # nothing to hold
        holder = own.store.holder()
        if holder is None:
            if lock_file.exists():
                results.append(
                    DoctorResult(
                        code="store-lock",
                        status=OK,
                        path=str(lock_file),
                        message=f"no process holds {lock_file}",
                    )
                )
            continue  # no lock file and no holder: nothing to say
        results.append(
            DoctorResult(
                code="store-lock",
                status=OK,
                path=str(lock_file),
                message=f"{label} is held by {holder.describe()}: only it can write the "
                "store now (write-route below says how memsync's writes reach it)",
            )
        )
        if holder.sees_same_file is False:
            results.append(
                DoctorResult(
                    code="private-tmp-mismatch",
                    status=ERROR,
                    path=str(directory),
                    message=f"{holder.describe()} holds {lock_file} in another mount namespace "
                    f"(PrivateTmp=yes?): the {directory} it writes is not the one memsync "
                    "sees, so checks and snapshots here cover the wrong files",
                    fix="move the store out of /tmp (docs/how-to/move-store-off-tmp.md), or "
                    "set PrivateTmp=no on the app's unit",
                )
            )
    return results
