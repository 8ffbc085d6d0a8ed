"""Doctor's probe of copies memsync knows of that still hold memories, with their age.

Pre-restore copies (``<store>.pre-restore-<id>``, moved aside by ``restore``) and the stores left
at mem0's default places after a move (``/tmp/qdrant`` moved off /tmp, ``$MEM0_DIR/history.db``
moved elsewhere): each holds the same personal texts as the deployment. Reads only (``stat``
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

# mem0ai 2.2.1's default embedded Qdrant path (vector_store.config.path when none is given).
MEM0_DEFAULT_QDRANT = Path("/tmp/qdrant")  # noqa: S108 - looked at, never written


def probe_copies(deployment: Deployment, now: datetime) -> list[DoctorResult]:
    """``pre-restore-copy`` (ok) and ``old-store-copy`` (warning) results, each with its age."""
    config = deployment.config
    store = deployment.vector_store
    results = []
    live_paths = [path for path in (store.location, config.history_db_path) if path is not None]
    for copy in state.pre_restore_copies(live_paths):
        facts = _facts(store, copy, now)
        results.append(
            DoctorResult(
                code="pre-restore-copy",
                status=OK,
                path=str(copy),
                message="files a restore moved aside (kept, never deleted by memsync): "
                + (facts or "no memories in them"),
                fix=f"remove it once the restored deployment is trusted: rm -r {copy}",
            )
        )
    results += store.probe_set_aside()  # a server backend's copies (pgvector: tables)
    pairs: list[tuple[Path, Path]] = [_default_history(config)]
    if store.location is not None:  # a server backend leaves no store files behind
        pairs.insert(0, (MEM0_DEFAULT_QDRANT, store.location))
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


def _age(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:.1f} hours" if hours < 48 else f"{hours / 24:.1f} days"
