"""Every copy memsync knows of that still holds erased memories, with the command removing it.

Looked at, in order: local snapshots (``<snapshot.directory>/<id>/``, read as the stores read
them, sealed ones opened with the configured key), snapshots still being created, the work
directories an interrupted ``purge-memory`` left (``<id>.purging``, ``<id>.purged-old``),
``.pre-restore-*`` copies ``restore`` moved aside, the copies ``restore --to DIR`` made, an unfinished reconcile journal naming the
memories (its actions carry texts), the target a ``memsync migrate`` journal names, and with ``[s3]`` the bucket: remote snapshots (a remote
copy with the same manifest as a local one is judged by the local one; others are not
downloaded: "maybe") and noncurrent object versions (``erase.versions``). An unreachable
bucket is one entry ``"holds": "unknown"``. The forget and erase journals, the pending queue,
the erasure ledger and window markers hold ids or scopes, never text, and are not listed;
copies memsync did not make or does not track (``snapshot download DIR``, copies an operator
made) are outside what it knows.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memsync import repository, state
from memsync.config import Config
from memsync.config.scratch import ScratchLayout
from memsync.deployment import Deployment
from memsync.erase import ledger, versions
from memsync.erase.holding import history_holds, other_backend, points_held, snapshot_holds
from memsync.errors import UnavailableError
from memsync.s3 import VersionsUnlistedError
from memsync.stores import snapshots

RECONCILE_JOURNAL = "reconcile-journal.json"
MIGRATE_JOURNAL = "migrate.json"  # memsync.migrate.journal.JOURNAL (another layer)


OLD_CONFIG = (
    "OLD.toml: memsync's config as it was before the switch: memsync.toml.bak beside it, or "
    "your config with mem0_config_file naming the app's .bak"
)


def _copy(
    kind: str, where: str, holds: str, why: str, remove: str, snapshot_id: str | None = None
) -> dict[str, Any]:
    return {
        "kind": kind,
        "where": where,
        "snapshot_id": snapshot_id,
        "holds": holds,
        "why": why,
        "remove": remove,
    }


def selector(memory_ids: Sequence[str], scope: Mapping[str, str] | None) -> str:
    """The ``purge-memory`` arguments naming these memories (``--user ID`` or the ids). Pure."""
    flags = {"user_id": "--user", "agent_id": "--agent", "run_id": "--run"}
    if scope and len(scope) == 1:
        ((key, value),) = scope.items()
        return f"{flags[key]} {value}"
    return " ".join(sorted(memory_ids))


def copies_holding(
    deployment: Deployment, memory_ids: Sequence[str], scope: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every copy that holds, may hold or could not be read for ``memory_ids``.

    ``[{kind, where, snapshot_id, holds, why, remove}]``: ``holds`` is ``"yes"``, ``"maybe"``
    or ``"unknown"`` (not reachable); ``remove`` the command that removes it.

    Reads the copies (noncurrent S3 versions are downloaded into ``work_dir`` and removed
    afterwards); writes only the versions' verdict cache (``erase.versions``). A copy that
    cannot be read is ``"maybe"`` with the reason.

    Raises:
        ConfigError: a key file is unreadable.
    """
    config = deployment.config
    if not memory_ids:
        return []
    purge = f"memsync snapshot purge-memory {selector(memory_ids, scope)} --yes"
    local, found = _local(deployment, memory_ids, purge)
    found += _pre_restore(deployment, memory_ids) + _restored_to(deployment, memory_ids)
    found += _journal(config, memory_ids)
    found += _migration_target(deployment)
    if config.s3 is not None:
        found += _remote(deployment, memory_ids, purge, local)
    return found


def _local(
    deployment: Deployment, memory_ids: Sequence[str], purge: str
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """``({snapshot id: "yes"|"maybe"}, copies)`` of the local snapshot directory."""
    config = deployment.config
    verdicts: dict[str, str] = {}
    found: list[dict[str, Any]] = []
    directory = config.snapshot.directory
    if directory is None:
        return verdicts, found
    for info in snapshots.iter_local(directory):
        if not info.complete:
            found.append(
                _copy("local-snapshot-partial", str(info.path), "maybe",
                      "a snapshot being created: not read",
                      f"let it finish, then {purge}", info.id)
            )  # fmt: skip
            continue
        remove, other = purge, other_backend(deployment, info)
        try:
            holds = snapshot_holds(deployment, info, memory_ids)
            why = "its files hold them" if holds else "sealed and no snapshot.encrypt_key_file set"
        except UnavailableError as error:
            holds, why = None, f"not readable: {error.message}"
        if holds is False:
            continue
        if other is not None:  # taken before a migrate --switch: this config cannot rewrite it
            why = f"a snapshot of the {other} deployment before a migrate --switch: {why}"
            remove = f"memsync --config OLD.toml {purge.removeprefix('memsync ')} ({OLD_CONFIG})"
        verdicts[info.id] = "yes" if holds else "maybe"
        found.append(
            _copy("local-snapshot", str(info.path), verdicts[info.id], why, remove, info.id)
        )
    for leftover in sorted([*directory.glob("*.purging"), *directory.glob("*.purged-old")]):
        snapshot_id = leftover.name.rsplit(".", 1)[0]
        found.append(
            _copy("purge-leftover", str(leftover), "maybe",
                  "an interrupted purge-memory left it",
                  f"if memsync snapshot verify {snapshot_id} passes: rm -r {leftover}; "
                  f"otherwise move it back to {directory / snapshot_id} and run {purge}",
                  snapshot_id)
        )  # fmt: skip
    return verdicts, found


def _pre_restore(deployment: Deployment, memory_ids: Sequence[str]) -> list[dict[str, Any]]:
    config = deployment.config
    store = deployment.vector_store
    live = [path for path in (store.location, config.history_db_path) if path is not None]

    def held(copy: Path) -> set[str]:
        if copy.is_dir():
            return points_held(store, copy, store.collection, memory_ids)
        return history_holds(copy, memory_ids)

    return _held_copies("pre-restore-copy", state.pre_restore_copies(live), held,
                        "files a restore moved aside")  # fmt: skip


def _restored_to(deployment: Deployment, memory_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The copies ``restore --to DIR`` made (``state.restored_to``) still holding the memories."""
    store = deployment.vector_store

    def held(copy: Path) -> set[str]:
        layout = ScratchLayout(root=copy)
        found = set()
        if layout.history_db.is_file():
            found = history_holds(layout.history_db, memory_ids)
        if layout.vectors.is_dir():  # an embedded store's copy (a server's: history only)
            found |= points_held(store, layout.vectors, store.collection, memory_ids)
        return found

    return _held_copies("restore-to-copy", state.restored_to(deployment.config.state_dir), held,
                        "a copy restore --to made")  # fmt: skip


def _held_copies(
    kind: str, copies: Sequence[Path], held: Callable[[Path], set[str]], why: str
) -> list[dict[str, Any]]:
    """Each copy that holds some memory (``held``), or cannot be read ("maybe"): ``rm -r``."""
    found = []
    for copy in copies:
        try:
            holds, said = ("yes" if held(copy) else ""), why
        except UnavailableError as error:
            holds, said = "maybe", f"{why}, not readable: {error.message}"
        if holds:
            found.append(_copy(kind, str(copy), holds, said, f"rm -r {shlex.quote(str(copy))}"))
    return found


def _journal(config: Config, memory_ids: Sequence[str]) -> list[dict[str, Any]]:
    path: Path = config.state_dir / RECONCILE_JOURNAL
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(document, dict) or document.get("status") == "done":
        return []
    actions = document.get("actions")
    if not isinstance(actions, list):
        return []
    if not {a.get("memory_id") for a in actions if isinstance(a, dict)} & set(memory_ids):
        return []
    return [
        _copy("reconcile-journal", str(path), "yes",
              "an unfinished reconcile plan: its actions carry texts",
              "memsync reconcile --yes (finishes it), then memsync forget --erase again")
    ]  # fmt: skip


def _migration_target(deployment: Deployment) -> list[dict[str, Any]]:
    """The target ``memsync migrate`` recorded in its journal: a copy of every memory.

    Not read (it may be a server's table, or being written by a migration): ``"maybe"``.
    After the switch it is the live store (erased as such), unless the config names another
    store again (the old config put back by hand): then it is a copy again.
    """
    config = deployment.config
    path: Path = config.state_dir / MIGRATE_JOURNAL
    if not path.exists():
        return []
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # damaged: a target may still be there, unnamed
        document = {}
    target = document.get("target") if isinstance(document, dict) else None
    switched = isinstance(document, dict) and document.get("phase") in ("switched", "cleaned")
    if switched and target == deployment.vector_store.where:
        return []  # the target is the live store now: erased as such (the old one: old_store)
    where = str(target) if isinstance(target, str) else f"the target named in {path}"
    return [
        _copy("migration-target", where, "maybe",
              f"the target of memsync migrate (journal {path}): memories copied before the "
              "erasure are in it; erase does not write into it",
              f"remove the target {where} and {path}, then run memsync migrate again onto a "
              "fresh target (after the erasure, it copies only what the source holds)")
    ]  # fmt: skip


def _remote(
    deployment: Deployment, memory_ids: Sequence[str], purge: str, local: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The bucket's snapshots and noncurrent versions; one ``unknown`` entry when unreachable."""
    config = deployment.config
    bucket = deployment.remote
    local_repo = repository.local_or_none(config)
    command = f"{purge} --remote"
    found: list[dict[str, Any]] = []
    try:
        for entry in bucket.list():
            where = bucket.location(entry.id)
            if not entry.complete:
                found.append(
                    _copy("remote-snapshot", where, "maybe", "an incomplete upload: not read",
                          "memsync snapshot prune --remote --yes", entry.id)
                )  # fmt: skip
            elif _local_manifest(local_repo, entry.id) != entry.manifest:
                found.append(
                    _copy("remote-snapshot", where, "maybe",
                          "not read here (remote only, or other than the local copy)",
                          command, entry.id)
                )  # fmt: skip
            elif entry.id in local:  # the same bytes as the local copy that holds them
                found.append(
                    _copy("remote-snapshot", where, local[entry.id],
                          "the same snapshot as the local copy holding them", command, entry.id)
                )  # fmt: skip
        # the ledger's whole set, as purge-memory scans: one verdict cache serves both
        wanted = sorted(
            set(memory_ids)
            | ledger.erased_ids(config.state_dir)
            | set(versions.scope_marks(sorted(ledger.erased_scopes(config.state_dir))))
        )
        scan = versions.scan(deployment, bucket.store, wanted)
    except UnavailableError as error:
        return [*found, _unknown(bucket.where, error, purge)]
    ours = set(memory_ids)
    delete = f"{purge} --delete-versions"
    found += [
        _copy("s3-version", h.version.label, "yes", "a noncurrent object version holds them",
              delete, h.snapshot_id)
        for h in scan.hits
        if ours & set(h.memory_ids)
    ]  # fmt: skip
    found += [
        _copy("s3-version", label, "maybe", f"not readable: {why}", delete)
        for label, why in sorted(scan.unreadable.items())
    ]
    return found


def _local_manifest(local_repo: repository.LocalRepository | None, snapshot_id: str) -> object:
    """The local copy's manifest, or None when there is no readable local copy."""
    if local_repo is None or not local_repo.exists(snapshot_id):
        return None
    try:
        return local_repo.read_manifest(snapshot_id)
    except UnavailableError:
        return None


def _unknown(where: str, error: UnavailableError, purge: str) -> dict[str, Any]:
    unlisted = isinstance(error, VersionsUnlistedError)  # no answer will ever come: what to do
    return _copy(
        "s3", where, "unknown", versions.unknown_why(error),
        error.hint if unlisted and error.hint else
        f"once S3 answers: {purge} --remote --delete-versions",
    )  # fmt: skip
