"""Who holds a file lock (Qdrant's ``.lock``), read from ``/proc/locks`` and psutil.

Never takes the lock itself, not even to probe: a probe races with a starting app.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import psutil

PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True, slots=True, kw_only=True)
class LockHolder:
    """A process holding a lock: pid, command line, and whether it shares our mount namespace.

    Attributes:
        same_mount_namespace: None when it cannot be read (another user's process).
        sees_same_file: whether ``/proc/<pid>/root/<path>`` is the same inode as our ``path``
            (False under a private /tmp); None when it cannot be read.
    """

    pid: int
    cmdline: str
    same_mount_namespace: bool | None
    sees_same_file: bool | None

    def describe(self) -> str:
        """``pid 123 (python app.py)``."""
        return f"pid {self.pid} ({self.cmdline or 'command line unknown'})"


def find_holder(lock_file: Path, path_seen: Path | None = None) -> LockHolder | None:
    """Return the process holding an flock/POSIX lock on ``lock_file``, or None. Reads only.

    Args:
        lock_file: the lock file (for Qdrant local mode: ``<path>/.lock``).
        path_seen: a path to compare between our view and the holder's (the store directory).
    """
    try:
        stat = lock_file.stat()
    except OSError:
        stat = None
    if stat is not None:
        pid = _pid_from_proc_locks(stat.st_dev, stat.st_ino)
        if pid is not None:
            return _holder(pid, path_seen or lock_file.parent)
    # Not held at our inode: is a process holding a file of the same name that we do not
    # see (another mount namespace, e.g. systemd's PrivateTmp=yes)?
    for pid, theirs in _processes_with_open(lock_file):
        same = stat is not None and (stat.st_dev, stat.st_ino) == theirs
        holder = _holder(pid, path_seen or lock_file.parent)
        if not same:
            return LockHolder(
                pid=holder.pid,
                cmdline=holder.cmdline,
                same_mount_namespace=holder.same_mount_namespace,
                sees_same_file=False,
            )
        return holder
    return None


def _pid_from_proc_locks(device: int, inode: int) -> int | None:
    wanted = f"{os.major(device):02x}:{os.minor(device):02x}:{inode}"
    try:
        lines = PROC_LOCKS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" ("->" marks a waiter)
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == wanted:
            pid = int(fields[4])
            if pid > 0 and psutil.pid_exists(pid):
                return pid
    return None


def writers_of(path: Path) -> dict[int, str]:
    """The processes with ``path`` open for writing (``/proc/<pid>/fd``): pid -> command line.

    Only processes this user may inspect (all of them as root). Reads /proc only.
    """
    targets = {str(path.absolute())}
    if path.exists():
        targets.add(str(path.resolve()))
    found: dict[int, str] = {}
    for process in psutil.process_iter(["pid"]):
        try:
            if any(h.path in targets and h.mode != "r" for h in process.open_files()):
                found[int(process.pid)] = " ".join(process.cmdline())
        except (psutil.Error, OSError):
            continue
    return found


def _processes_with_open(lock_file: Path) -> list[tuple[int, tuple[int, int]]]:
    """Processes with a file open at the path ``lock_file`` (as each sees it): pid, (dev, ino).

    Reads each process's descriptors as links (``/proc/<pid>/fd/<n>``) and keeps a regular file
    at one of the paths, as psutil's ``open_files`` does, without reading every descriptor's
    ``fdinfo`` as it does too (about 60% of the scan's CPU on a busy host). By ascending pid.
    """
    targets = {str(lock_file.absolute())}
    if lock_file.exists():
        targets.add(str(lock_file.resolve()))
    try:
        pids = sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        return []
    found = []
    for pid in pids:
        descriptors = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(descriptors)
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                path = os.readlink(f"{descriptors}/{fd}").split("\x00")[0]
                if path.endswith(_DELETED) and not os.path.exists(path):
                    path = path.removesuffix(_DELETED)  # as psutil reads the link
                if path not in targets or not os.path.isfile(path):
                    continue
                theirs = os.stat(f"{descriptors}/{fd}")
            except OSError:
                continue
            found.append((pid, (theirs.st_dev, theirs.st_ino)))
            break
    return found


_DELETED = " (deleted)"


def _holder(pid: int, path_seen: Path) -> LockHolder:
    try:
        cmdline = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        cmdline = ""
    try:
        same_ns = os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt")
    except OSError:
        same_ns = None
    sees_same: bool | None
    try:
        ours = path_seen.stat()
        theirs = os.stat(f"/proc/{pid}/root{path_seen.resolve()}")
        sees_same = (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino)
    except OSError:
        sees_same = None if same_ns is None else bool(same_ns)
    return LockHolder(
        pid=pid, cmdline=cmdline, same_mount_namespace=same_ns, sees_same_file=sees_same
    )


def mount_of(path: Path) -> tuple[str, str, str]:
    """Return ``(mountpoint, fstype, device)`` of the filesystem holding ``path``. Reads only.

    The path is resolved (through the nearest existing ancestor), then the longest mountpoint
    prefix among ``psutil.disk_partitions(all=True)`` wins, the last listed for stacked mounts
    (``all=False`` would drop tmpfs and overlay).
    """
    resolved = _existing_ancestor(path).resolve()
    best: tuple[str, str, str] = ("/", "unknown", "unknown")
    best_length = -1
    for partition in psutil.disk_partitions(all=True):
        mountpoint = partition.mountpoint
        prefix = mountpoint.rstrip("/") + "/"
        if (str(resolved) + "/").startswith(prefix) or str(resolved) == mountpoint:
            if len(mountpoint) >= best_length:
                best, best_length = (
                    (mountpoint, partition.fstype, partition.device),
                    len(mountpoint),
                )
    return best


def free_bytes(path: Path) -> tuple[int, int]:
    """Return ``(free, total)`` bytes of the filesystem holding ``path`` (nearest existing)."""
    usage = psutil.disk_usage(str(_existing_ancestor(path)))
    return int(usage.free), int(usage.total)


def _existing_ancestor(path: Path) -> Path:
    current = path.absolute()
    while not current.exists() and current != current.parent:
        current = current.parent
    return current
