"""Copy a captured source into the target through mem0's own vector store objects, in batches.

Each batch is one transaction in the app's interpreter: one ``COPY`` into a pgvector table, the
rows qdrant-client's local mode pickles committed once into embedded Qdrant
(``agent/ops.py: op_insert_points``). A pgvector target loads without its indexes, which are
built after the load (``defer_indexes``, ``build_indexes``: mem0's own ``create_col``).
Points keep their ids and whole payloads; vectors are copied as they are, or computed again
by the target's embedder (``AppWriter.embed_batch``, once a batch: the memory's ``data`` text,
an entity's ``data`` text) when the plan re-embeds. The embedder's transient errors are retried with
exponential backoff through tenacity (``RETRY_ATTEMPTS`` attempts at most), then the
migration stops with exit 11 naming the point and the embedder; the journal stays, so the
same command resumes. Ids the target already holds are skipped (a resumed run).
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog
from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from memsync.errors import ConfigError, TryLaterError, UnavailableError
from memsync.migrate.plan import MigratePlan
from memsync.stores.agent_client import AgentError
from memsync.stores.mem0 import AppWriter
from memsync.stores.vector_store import StoredPoint, VectorCapture, VectorStore

logger = structlog.get_logger(__name__)

Text = TypeVar("Text", str, list[str])
Vectors = TypeVar("Vectors", list[float], list[list[float]])

RETRY_ATTEMPTS = 6  # per embedding, the first included
RETRY_FIRST_WAIT_S = 0.2  # then 0.4, 0.8, ... seconds
RETRY_MAX_WAIT_S = 10.0
RETRY_AFTER_MAX_S = 120.0  # the longest Retry-After honoured (a rate-limited embedding service)
# Programming and input errors: retrying cannot help.
PERMANENT = (TypeError, ValueError, KeyError, AttributeError, NotImplementedError)


@dataclass(slots=True)
class Copied:
    """What the copy did: counts of points, and the ids it could not write.

    Attributes:
        copied: points written to the target (both collections).
        re_embedded: of those, points whose vector the target's embedder computed.
        skipped: points the target held already (a resumed migration).
        batches: batches written by this run.
        without_text: ids not written: a re-embedding needs the point's ``data`` text (or a
            copy its vector) and the point has none.
        indexes_built_after: a pgvector target's indexes dropped while its empty table was
            loaded and built after the load (mem0's own definitions).
    """

    copied: int = 0
    re_embedded: int = 0
    skipped: int = 0
    batches: int = 0
    without_text: list[str] = field(default_factory=list)
    indexes_built_after: list[str] = field(default_factory=list)


def copy_points(
    writer: AppWriter,
    store: VectorStore,
    capture: VectorCapture,
    plan: MigratePlan,
    have: set[str],
    on_batch: Callable[[Copied], None],
    progress: Callable[[int, int], None] | None = None,
) -> Copied:
    """Write every captured point the target lacks, in ``plan.batch_size`` batches.

    Args:
        writer: mem0 opened on the NEW config (the target).
        store: the source's vector store (reads ``capture``).
        capture: the source capture, with vectors.
        plan: the plan (batch size, re-embedding, the target's vector size).
        have: ids the target holds already (skipped).
        on_batch: called after each batch is written (the journal is saved there).
        progress: ``progress(points_done, points_total)`` after each batch.

    Raises:
        UnavailableError: (exit 11) the embedder keeps failing on a point (named), or the
            capture is unreadable.
        ConfigError: (exit 10) the embedder returns vectors of another size than the target's.
        TryLaterError: (exit 75) the target's disk is full (``target_writes``).
    """
    done = Copied()
    total = plan.memories + plan.entities
    collections = (
        (store.collection, False, plan.memories),
        (store.entities_collection, True, plan.entities),
    )
    for collection, entities, count in collections:
        if count == 0:
            continue
        deferred = writer.defer_indexes(entities=entities)
        points = store.iter_stored(capture, collection)
        for batch in _batches(points, plan.batch_size, have, done):
            ids, vectors, payloads = _rows_of(writer, plan, batch, done.without_text)
            if ids:
                with target_writes(plan.target.where):
                    writer.insert_points(ids, vectors, payloads, entities=entities)
            done.copied += len(ids)
            done.re_embedded += len(ids) if plan.re_embed else 0
            done.batches += 1
            on_batch(done)
            if progress is not None:
                progress(done.copied + done.skipped + len(done.without_text), total)
        _build_indexes(writer, plan, entities, deferred)
        done.indexes_built_after += deferred
    return done


def _build_indexes(
    writer: AppWriter, plan: MigratePlan, entities: bool, deferred: list[str]
) -> None:
    """Build the target's indexes after its load (any a killed run left unbuilt too).

    Raises:
        UnavailableError: (exit 11) an index dropped for the load is not there after.
    """
    with target_writes(plan.target.where):
        present = writer.build_indexes(entities=entities)
    missing = sorted(set(deferred) - set(present))
    if missing:
        raise UnavailableError(
            f"the target {plan.target.where} lacks the indexes {', '.join(missing)} after its load",
            "run the same memsync migrate again: it builds the indexes a table lacks",
        )


def _batches(
    points: Iterable[tuple[str, StoredPoint]], size: int, have: set[str], done: Copied
) -> Iterator[list[tuple[str, StoredPoint]]]:
    """Group the points the target lacks into lists of ``size``; count the others as skipped."""
    batch: list[tuple[str, StoredPoint]] = []
    for point_id, stored in points:
        if point_id in have:
            done.skipped += 1
            continue
        batch.append((point_id, stored))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _rows_of(
    writer: AppWriter,
    plan: MigratePlan,
    batch: list[tuple[str, StoredPoint]],
    without_text: list[str],
) -> tuple[list[str], list[list[float]], list[dict[str, Any]]]:
    """The target's ids, vectors and payloads for one batch: vectors copied, or re-embedded.

    Re-embedding asks the target's embedder once for the whole batch (``embed_batch``). A point
    with no vector to copy, or no ``data`` text to embed, is added to ``without_text``.
    """
    kept: list[tuple[str, StoredPoint]] = []
    for point_id, stored in batch:
        text = stored.payload.get("data")
        usable = (isinstance(text, str) and bool(text)) if plan.re_embed else stored.vector
        if usable:
            kept.append((point_id, stored))
        else:
            without_text.append(point_id)
    ids = [point_id for point_id, _ in kept]
    payloads = [stored.payload for _, stored in kept]
    if not plan.re_embed or not kept:
        return ids, [list(stored.vector or ()) for _, stored in kept], payloads
    texts = [str(stored.payload["data"]) for _, stored in kept]
    named = ids[0] if len(ids) == 1 else f"{ids[0]} (and {len(ids) - 1} more of its batch)"
    vectors = embed(writer.embed_batch, texts, named, plan.target.embedder_provider)
    if len(vectors) != len(ids):
        raise UnavailableError(
            f"the embedder {plan.target.embedder_provider} returned {len(vectors)} vectors "
            f"for {len(ids)} texts (point {named})",
            "check the new config's [mem0.embedder]; the journal is kept",
        )
    for point_id, vector in zip(ids, vectors, strict=True):
        require_dims(plan, len(vector), f"point {point_id}")
    return ids, vectors, payloads


def require_dims(plan: MigratePlan, size: int, what: str) -> None:
    """Return when the embedder's ``size`` is the target's; else refuse (exit 10).

    Raises:
        ConfigError: naming the new config file, the embedder, ``what`` it embedded and both
            sizes.
    """
    if size == plan.target.dims:
        return
    raise ConfigError(
        plan.target.source or plan.target.where,
        [
            f"the embedder {plan.target.embedder_provider} returned {size} dimensions for "
            f"{what}; the target {plan.target.where} expects {plan.target.dims} "
            "(embedding_model_dims)"
        ],
        "make the new config's embedding_model_dims match its embedder, then run the "
        "same memsync migrate again",
    )


@contextmanager
def target_writes(where: str) -> Iterator[None]:
    """Translate a full disk under the target's writes into TryLaterError (exit 75).

    Raises:
        TryLaterError: SQLite's "database or disk is full", or OSError ENOSPC/EDQUOT, while
            writing the target ``where``; the journal makes the re-run resume.
    """
    try:
        yield
    except AgentError as error:  # the app's interpreter wrote: its SQLite's own words
        if not any(m in error.message for m in ("database or disk is full", "No space left")):
            raise
        raise TryLaterError(
            f"the target {where} has no space left: {error.message}",
            "free space on its disk, then run the same memsync migrate again (the journal "
            "makes it resume)",
        ) from error
    except (sqlite3.OperationalError, OSError) as error:
        full = (
            "full" in str(error).lower()
            if isinstance(error, sqlite3.OperationalError)
            else error.errno in (errno.ENOSPC, errno.EDQUOT)
        )
        if not full:
            raise
        raise TryLaterError(
            f"the target {where} has no space left: {error}",
            "free space on its disk, then run the same memsync migrate again (the journal "
            "makes it resume)",
        ) from error


def _transient(error: BaseException) -> bool:
    """Whether an embedder error may pass (network, rate limit, timeout): any other ``Exception``.

    Never a ``BaseException`` that is not an ``Exception``: Ctrl-C, SIGTERM (memsync maps it to
    ``KeyboardInterrupt``) and a window's deadline (``Overrun``) stop the copy at once.
    """
    return isinstance(error, Exception) and not isinstance(error, PERMANENT)


def embed(
    embed_text: Callable[[Text], Vectors], text: Text, point_id: str, provider: str
) -> Vectors:
    """Embed ``text`` with ``embed_text`` (the target's embedder), retrying transient errors.

    ``text``: one text (``embed``), or a batch's texts (``embed_batch``: ``point_id`` then
    names the batch's first point).

    Waits ``RETRY_FIRST_WAIT_S`` doubling up to ``RETRY_MAX_WAIT_S`` seconds between at most
    ``RETRY_ATTEMPTS`` attempts (tenacity), or the service's ``Retry-After`` when longer (up to
    ``RETRY_AFTER_MAX_S``); each retry is logged (``embedder_retry``). An HTTP 400, 401, 403,
    404 or 422 is not retried (``AppWriter.embed`` raises it as ``ValueError``).

    Raises:
        UnavailableError: (exit 11) every attempt failed, or a permanent error; the message
            names the point and the embedder.
    """
    backoff = wait_exponential(multiplier=RETRY_FIRST_WAIT_S, max=RETRY_MAX_WAIT_S)

    def wait(state: RetryCallState) -> float:
        """The backoff, or the service's ``Retry-After`` when it asked for longer."""
        failed = state.outcome.exception() if state.outcome is not None else None
        asked = getattr(failed, "retry_after_s", None)
        return max(backoff(state), min(float(asked), RETRY_AFTER_MAX_S) if asked else 0.0)

    retrying = Retrying(
        stop=stop_after_attempt(RETRY_ATTEMPTS),
        wait=wait,
        retry=retry_if_exception(_transient),
        before_sleep=lambda state: logger.warning(
            "embedder_retry", memory_id=point_id, attempt=state.attempt_number
        ),
    )
    try:
        return retrying(embed_text, text)
    except RetryError as error:
        last = error.last_attempt.exception()
        raise UnavailableError(
            f"the embedder {provider} failed {RETRY_ATTEMPTS} times embedding point {point_id}: "
            f"{type(last).__name__}: {last}",
            "the journal is kept: run the same memsync migrate again when the embedder answers",
        ) from last
    except Exception as error:  # noqa: BLE001 - a permanent embedder error, named
        raise UnavailableError(
            f"the embedder {provider} failed embedding point {point_id}: "
            f"{type(error).__name__}: {error}",
            "check the new config's [mem0.embedder]; the journal is kept",
        ) from error
