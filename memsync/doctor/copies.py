"""Doctor's probe of copies memsync knows of that still hold memories, with their age.

Pre-restore copies (``<store>.pre-restore-<id>``, moved aside by ``restore``) and the stores left
at mem0's default places after a move (the store's ``LocalDir.mem0_default``: ``/tmp/qdrant``
moved off /tmp; ``$MEM0_DIR/history.db`` moved elsewhere): each holds the same personal texts
as the deployment. Reads only (``stat``
and the vector store's index file).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from memsync import state
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.doctor.status import OK, WARNING
from memsync.errors import MemsyncError
from memsync.model import DoctorResult
from memsync.stores.vector_store import VectorStore


def probe_copies(deployment: Deployment, now: datetime) -> list[DoctorResult]:
    """``pre-restore-copy`` (ok) and ``old-store-copy`` (warning) results, each with its age."""
    config = deployment.config
    store = deployment.vector_store
    results = []
    live_paths = [*(own.path for own in store.local_dirs()), config.history_db_path]
    keep = config.settings.restore.keep_pre_restore
    kept = (
        f"the newest {keep} per store kept ([restore] keep_pre_restore)"
        if keep is not None
        else "kept, never deleted by memsync: [restore] keep_pre_restore sets a retention"
    )
    for copy in [
        found for path in live_paths for found in state.pre_restore_sets(path, config.state_dir)
    ]:
        facts = _facts(store, copy.path, now)
        results.append(
            DoctorResult(
                code="pre-restore-copy",
                status=OK,
                path=str(copy.path),
                message=f"files a restore moved aside, {_megabytes(copy.size_bytes)} ({kept}): "
                + (facts or "no memories in them"),
                fix=f"remove it once the restored deployment is trusted: rm -r {copy.path}",
            )
        )
    results += store.probe_set_aside()  # a server backend's copies (pgvector: tables)
    pairs: list[tuple[Path, Path]] = [  # a server backend leaves no store files behind
        *((own.mem0_default, own.path) for own in store.local_dirs() if own.mem0_default),
        _default_history(config),
    ]
    for old, live in pairs:
        facts = None if _same(old, live) else _facts(store, old, now)
        if facts is None:
            continue  # nothing personal left there
        results.append(
            DoctorResult(
                code="old-store-copy",
                status=WARNING,
                path=str(old),
                message=f"an old copy at mem0's default place, not the configured {live}: {facts}",
                fix=f"once the moved store is trusted (memsync check, same counts): rm -r {old}",
            )
        )
    return results


def _default_history(config: Config) -> tuple[Path, Path]:
    """mem0's default history.db (``$MEM0_DIR/history.db``) and the configured one."""
    return config.mem0_dir / "history.db", config.history_db_path


def _same(one: Path, other: Path) -> bool:
    try:
        return one.resolve() == other.resolve()
    except OSError:
        return one == other


def _facts(store: VectorStore, copy: Path, now: datetime) -> str | None:
    """``"3.2 days old, still holding memories (81920 bytes)"``; None when it holds none."""
    try:
        if not copy.exists():
            return None
        if copy.is_dir():
            listed = [copy / name for name in store.files(copy) if name != store.index_file]
        else:
            listed = [copy]
        sizes = [(path.stat().st_size, path.stat().st_mtime) for path in listed if path.is_file()]
    except (OSError, MemsyncError):
        return None
    held = sum(size for size, _mtime in sizes)
    if not held:
        return None
    age = max(now.timestamp() - max(mtime for _size, mtime in sizes), 0.0)
    return f"{_age(age)} old, still holding memories ({held} bytes)"


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def _age(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:.1f} hours" if hours < 48 else f"{hours / 24:.1f} days"
