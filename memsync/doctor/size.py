"""Doctor's ``store-size``: an embedded Qdrant store approaching the size where local mode is slow.

qdrant-client's local mode loads every point of every collection into memory each time the
app opens the store. Issue 14's measurements (2 cores, qdrant-client 1.20.0): 20,000 points took
3.2 s and +478 MB to open, 100,000 points 31.9 s and 2.4 GB; qdrant-client itself warns above
20,000 points in a collection (``LARGE_DATA_THRESHOLD``). Past that a server store is the
answer: Postgres with pgvector, reached by ``memsync migrate``. The points are counted on the
capture's copies (``VectorStore.count_rows``: rows, nothing decoded). A server store (pgvector)
has no such limit: no result.
"""

from __future__ import annotations

from collections.abc import Mapping

from memsync.doctor.status import OK, WARNING
from memsync.errors import UnavailableError
from memsync.model import DoctorResult
from memsync.stores.capture import Captured

SLOW_OPEN_POINTS = 20_000  # qdrant-client's LARGE_DATA_THRESHOLD; measured 3.2 s, +478 MB to open
STORE_SIZE_WARN_POINTS = 15_000  # warn three quarters of the way there, before the app feels it
MOVE_TO_PGVECTOR = (
    "move to Postgres with pgvector: memsync migrate --to NEW.toml --dry-run, then without "
    "--dry-run (docs/how-to/move-from-embedded-qdrant-to-postgres.md)"
)


def probe_store_size(captured: Captured) -> list[DoctorResult]:
    """The ``store-size`` result of an embedded store's capture; [] for a server store.

    Reads the capture's copies only. A copy that cannot be counted gives no result here
    (``sqlite-integrity`` reports the damaged file).
    """
    store = captured.store
    if store.location is None or not captured.qdrant_present:
        return []
    try:
        rows = store.count_rows(captured.vectors)
    except UnavailableError:
        return []
    return [judge_store_size(store.where, rows)]


def judge_store_size(where: str, rows: Mapping[str, int]) -> DoctorResult:
    """``store-size`` from the points of each collection of the store at ``where``. Pure.

    Every collection counts (qdrant-client opens them all): a warning at
    ``STORE_SIZE_WARN_POINTS`` points or more, suggesting pgvector; ok below.
    """
    total = sum(rows.values())
    counted = f"{total:,} point{'' if total == 1 else 's'} in the embedded Qdrant store"
    if total < STORE_SIZE_WARN_POINTS:
        return DoctorResult(
            code="store-size",
            status=OK,
            path=where,
            message=f"{counted} (local mode gets slow from about {SLOW_OPEN_POINTS:,})",
        )
    return DoctorResult(
        code="store-size",
        status=WARNING,
        path=where,
        message=f"{counted}: qdrant-client loads every point into memory each time the app "
        f"opens it (measured: 20,000 points 3.2 s and +478 MB, 100,000 points 31.9 s and "
        f"2.4 GB; it warns itself above {SLOW_OPEN_POINTS:,})",
        fix=MOVE_TO_PGVECTOR,
    )
