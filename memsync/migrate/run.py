"""``run_migrate``: plan, copy while the app runs, journal, verify; the I/O half of migrate.

Steps: refuse what ``plan.find_refusal`` refuses (and another migration's journal, or a
resumed target of another vector size); capture the source with vectors into a scratch
``capture-*`` directory (``capture.scratch_directory``: removed by the next memsync
command if this one dies; read-only on the live stores: the app keeps running); plan; with
``dry_run`` stop there. Otherwise, under the operation lock: check the journal again, probe
the new embedder's size (re-embedding), write the journal, open mem0 on the new config (a
hot target journal is rolled back), bring a resumed target level with the new capture
(``resume.catch_up``), copy (``copy.copy_points``), capture the target and compare it with
the source capture (``verify``), search a sample, list the memories written in the source
after the capture (``not_copied``: a re-run, or the catch-up of ``--switch``, copies them), and
run ``check`` on the new config.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memsync import check, utc
from memsync.config import Config
from memsync.deployment import Deployment
from memsync.errors import ConfigError, ExitCode
from memsync.migrate import journal
from memsync.migrate.copy import Copied, copy_points, embed, require_dims
from memsync.migrate.plan import (
    MigratePlan,
    Side,
    find_refusal,
    find_target_refusal,
    plan_migrate,
    side_of,
)
from memsync.migrate.resume import Resumed, catch_up
from memsync.migrate.verify import (
    Difference,
    Summary,
    compare,
    compare_entities,
    pick_sample,
    search_sample,
    summarize,
)
from memsync.model import CheckReport
from memsync.state import operation_lock
from memsync.stores import capture, history, interpreter
from memsync.stores.interpreter import AppInterpreter
from memsync.stores.mem0 import PROBE_TEXT, open_embedder, open_memory
from memsync.stores.vector_store import VectorCapture, VectorStore

logger = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Migrated:
    """What a migration did (or, dry, would do), and its verification."""

    plan: MigratePlan
    dry_run: bool
    resumed: bool = False
    copied: Copied = field(default_factory=Copied)
    removed: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    differences: tuple[Difference, ...] = ()
    sampled: int = 0
    index_misses: tuple[str, ...] = ()
    not_copied: tuple[str, ...] = ()
    check_after: CheckReport | None = None

    @property
    def exit_code(self) -> ExitCode:
        """3 (PROBLEMS_FOUND) when verification found a difference, else 0."""
        return ExitCode.PROBLEMS_FOUND if self.differences else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        """``migrate --json`` (docs/reference/json-output.md, commands/migrate.md)."""
        return {
            "command": "migrate",
            "plan": self.plan.to_json(),
            "dry_run": self.dry_run,
            "resumed": self.resumed,
            "copied": self.copied.copied,
            "re_embedded": self.copied.re_embedded,
            "skipped": self.copied.skipped,
            "batches": self.copied.batches,
            "indexes_built_after": list(self.copied.indexes_built_after),
            "removed": list(self.removed),
            "replaced": list(self.replaced),
            "verified": None if self.dry_run else not self.differences,
            "differences": [d.to_json() for d in self.differences],
            "search_sampled": self.sampled,
            "search_index_misses": list(self.index_misses),
            "not_copied": list(self.not_copied),
            "check_after": self.check_after.counts() if self.check_after else None,
        }


def run_migrate(
    deployment: Deployment,
    new_config: Config,
    to: Path,
    now: datetime,
    *,
    dry_run: bool,
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
    lock: bool = True,
) -> Migrated:
    """Migrate the deployment of ``config`` to the store and embedder of ``new_config``.

    Args:
        deployment: the current deployment.
        new_config: the config naming the target (loaded from ``to``).
        to: the new config's path (the journal names it, resolved).
        now: the current time (aware UTC), for the journal and check.
        dry_run: plan only; nothing is written (not even the journal).
        batch_size: points per batch (> 0).
        progress: ``progress(points_done, points_total)`` while copying.
        lock: take ``operation.lock`` for the copy (False: the caller holds it, as the switch).

    Raises:
        ConfigError: (exit 10) the migration is refused (``plan.find_target_refusal``,
            ``plan.find_refusal``), another
            migration's journal is there, or the embedder's vectors have the wrong size.
        UnavailableError: (exit 11) a store is unreadable, or the embedder keeps failing.
        LockedError: (exit 12) another memsync operation runs.
    """
    config = deployment.config
    new = Deployment.open(new_config)  # the target: a second store, built by the same factory
    source, target = side_of(config), side_of(new_config)
    unrunnable = find_target_refusal(target)
    if unrunnable is not None:  # before the journal or the target's server are touched
        raise ConfigError(new_config.source, [unrunnable[0]], unrunnable[1])
    recorded = journal.load(config.state_dir)
    if recorded is not None and recorded.get("phase") == "cleaned":  # finished: start afresh
        if not dry_run:
            journal.set_aside_cleaned(config.state_dir, recorded)
        recorded = None
    if recorded is not None:
        journal.require_same_target(
            recorded, str(to.resolve()), target.where, new_config.source, config.state_dir
        )
    target_store = new.vector_store
    exists = recorded is None and (target_store.present() or target_store.holds_data())
    refusal = find_refusal(source, target, target_exists=exists)
    if refusal is not None:
        raise ConfigError(new_config.source, [refusal[0]], refusal[1])
    if recorded is not None:
        require_target_size(target_store, target, config.state_dir)
    with capture.scratch_directory(config) as scratch:
        # mem0 writes a point before its history row: every write the capture may miss has
        # a history row above this one (a superset: not_copied may name a copied memory).
        before = history.last_rowid(config.history_db_path) if not dry_run else 0
        captured = capture.capture(
            deployment.vector_store, config, scratch / "source", vectors=not dry_run
        )
        with capture.naming_live_files(captured):
            plan = _plan(source, target, captured, batch_size)
        if dry_run:
            if plan.re_embed:  # built, never called: a dry run spends no embedder call
                with open_embedder(
                    new.vector_store, new_config, target_interpreter(deployment, new)
                ):
                    pass
            return Migrated(plan=plan, dry_run=True, resumed=recorded is not None)
        with operation_lock(config.state_dir, "migrate") if lock else nullcontext():
            return _migrate(deployment, new, to, now, plan, captured, scratch, before, progress)


def require_target_size(store: VectorStore, target: Side, state_dir: Path) -> None:
    """Refuse (exit 10) to resume into a target collection of another vector size.

    Raises:
        ConfigError: the target's memory collection was created with another size than the
            new config's ``embedding_model_dims`` (edited since the first run); the message
            names the new config file, the target and the journal.
    """
    info = (store.read_collections() or {}).get(store.collection)
    if info is None or info.vector_size in (None, target.dims):
        return
    raise ConfigError(
        target.source,
        [
            f"the target {target.where} was created with {info.vector_size}-dimension vectors; "
            f"the new config's embedding_model_dims is now {target.dims}"
        ],
        f"remove the target {target.where} and the journal {journal.path_of(state_dir)} "
        "(memsync created both), then run the same memsync migrate again",
    )


def _plan(source: Any, target: Any, captured: capture.Captured, batch_size: int) -> MigratePlan:
    """Count the capture's points and payload bytes, then ``plan_migrate``."""
    store = captured.store
    counts, payload_bytes = [], 0
    for collection in (store.collection, store.entities_collection):
        count = 0
        for point in store.iter_points(captured.vectors, collection):
            count += 1
            payload_bytes += len(repr(point.payload))
        counts.append(count)
    return plan_migrate(
        source, target, memories=counts[0], entities=counts[1],
        payload_bytes=payload_bytes, batch_size=batch_size,
    )  # fmt: skip


def _migrate(
    deployment: Deployment,
    new: Deployment,
    to: Path,
    now: datetime,
    plan: MigratePlan,
    captured: capture.Captured,
    scratch: Path,
    last_rowid: int,
    progress: Callable[[int, int], None] | None,
) -> Migrated:
    """The copy, verification and check (under the operation lock).

    ``last_rowid``: history's last row before the capture (``not_copied`` is what came after).
    """
    config, new_config = deployment.config, new.config
    recorded = journal.load(config.state_dir)
    if recorded is not None:  # another run may have finished since the first look, unlocked
        journal.require_same_target(
            recorded, str(to.resolve()), plan.target.where, new_config.source, config.state_dir
        )
    if plan.re_embed:  # before mem0 creates the target: a wrong size creates nothing
        _probe_size(new, plan, target_interpreter(deployment, new))
    document = _start_journal(config.state_dir, recorded, to, plan, now, captured, last_rowid)
    batches_before = int(document["batches_done"])
    points_before = int(document.get("points_copied", 0))

    def on_batch(done: Copied) -> None:
        document["batches_done"] = batches_before + done.batches
        document["points_copied"] = points_before + done.copied
        journal.save(config.state_dir, document)

    target_store = new.vector_store
    app = target_interpreter(deployment, new)
    with open_memory(
        target_store, new_config, app=app
    ) as writer:  # rolls back a hot journal a killed write left
        resumed = Resumed()
        if recorded is not None:
            resumed = catch_up(
                writer, captured.store, captured.vectors, target_store, scratch / "target-before"
            )
        copied = copy_points(
            writer, captured.store, captured.vectors, plan, resumed.have, on_batch, progress
        )
        logger.info("migrate_copied", point_count=copied.copied, skipped=copied.skipped)
        with capture.naming_live_files(captured):
            differences, sampled, index_misses = _verify(
                captured, target_store, scratch, plan, writer, copied
            )
    not_copied = _written_since(config, scratch, last_rowid)
    report = check.run_check(new, now)
    document["phase"] = "differs" if differences else "verified"
    journal.save(config.state_dir, document)
    return Migrated(
        plan=plan, dry_run=False, resumed=recorded is not None, copied=copied,
        removed=tuple(resumed.removed), replaced=tuple(resumed.replaced),
        differences=tuple(differences), sampled=sampled, index_misses=tuple(index_misses),
        not_copied=not_copied,
        check_after=report,
    )  # fmt: skip


def _start_journal(
    state_dir: Path,
    recorded: dict[str, Any] | None,
    to: Path,
    plan: MigratePlan,
    now: datetime,
    captured: capture.Captured,
    last_rowid: int,
) -> dict[str, Any]:
    """The journal of this run (the recorded one when resuming), in phase ``copy``; saved."""
    document = recorded or {
        "to": str(to.resolve()),
        "source": plan.source.where,
        "target": plan.target.where,
        "started_at": utc.iso(now),
        "batches_done": 0,
    }
    document.update(
        phase="copy", captured_at=utc.iso(captured.window.vectors_at), history_rowid=last_rowid
    )
    journal.save(state_dir, document)
    return document


def target_interpreter(deployment: Deployment, new: Deployment) -> AppInterpreter:
    """The interpreter that will run the app on the target: NEW.toml's, else the app's now.

    Raises:
        ConfigError: (exit 10) neither is known (``interpreter.require``).
    """
    if new.config.app_python is not None:
        return interpreter.require(new.vector_store, new.config)
    return interpreter.require(deployment.vector_store, deployment.config)


def _probe_size(new: Deployment, plan: MigratePlan, app: AppInterpreter) -> None:
    """Embed one text with the new config's embedder and refuse a size other than the plan's.

    Raises:
        ConfigError: (exit 10) the size differs (``copy.require_dims``), or the embedder
            cannot be built.
        UnavailableError: (exit 11) the embedder keeps failing (``copy.embed``).
    """
    with open_embedder(new.vector_store, new.config, app) as embed_text:
        vector = embed(embed_text, PROBE_TEXT, "(probe)", plan.target.embedder_provider)
    require_dims(plan, len(vector), "a probe text")


def _summaries(store: VectorStore, capture: VectorCapture, collection: str) -> dict[str, Summary]:
    return {i: summarize(stored) for i, stored in store.iter_stored(capture, collection)}


def _verify(
    captured: capture.Captured,
    target_store: VectorStore,
    scratch: Path,
    plan: MigratePlan,
    writer: Any,
    copied: Copied,
) -> tuple[list[Difference], int, list[str]]:
    """Compare a capture of the target with the source capture; search a sample.

    Returns the differences, the memories searched, and those the target's approximate
    index missed although their vectors are exact (``verify.search_sample``).
    """
    source_store = captured.store
    target_copy = target_store.capture(scratch / "target", vectors=True)
    copied_as_is = not plan.re_embed
    differences: list[Difference] = []
    index_misses: list[str] = []
    for source_name, target_name in (
        (source_store.collection, target_store.collection),
        (source_store.entities_collection, target_store.entities_collection),
    ):
        before = _summaries(source_store, captured.vectors, source_name)
        after = _summaries(target_store, target_copy, target_name)
        differences += compare(before, after, plan.target.dims, vectors_copied=copied_as_is)
        if source_name == source_store.collection:
            sample = pick_sample(after, copied.without_text)
            searched, index_misses = search_sample(writer, after, sample)
            differences += searched
    differences += compare_entities(
        source_store.read_entities(captured.vectors), target_store.read_entities(target_copy)
    )
    return differences, len(sample), index_misses


def _written_since(config: Config, scratch: Path, last_rowid: int) -> tuple[str, ...]:
    """Memory ids with a history event after ``last_rowid`` (read from a fresh history copy)."""
    if not config.history_db_path.is_file():
        return ()
    copy = history.capture(config.history_db_path, scratch / "history-after.db")
    return tuple(sorted(history.memory_ids_since(copy.dest, last_rowid)))
