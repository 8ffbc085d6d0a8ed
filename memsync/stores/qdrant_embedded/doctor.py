"""Doctor's probes of an embedded Qdrant store's files: reached through the port.

``memsync.doctor`` never imports this module: it asks the store (``LiveStore.probe_capture``,
``sqlite_verdicts``, ``probe_app_view``, ``local_dirs``, ``telemetry``). Result codes:
``collection-params``, ``legacy-point-store``, ``store-size``, ``store-meta``, ``store-decode``
(docs/reference/commands/doctor.md). Reads only.

``store-size``: qdrant-client's local mode loads every point of every collection into memory
each time the app opens the store. Issue 14's measurements (2 cores, qdrant-client 1.20.0):
20,000 points took 3.2 s and +478 MB to open, 100,000 points 31.9 s and 2.4 GB; qdrant-client
itself warns above 20,000 points in a collection (``LARGE_DATA_THRESHOLD``). Past that a server
store is the answer: Postgres with pgvector, reached by ``memsync migrate``. The points are
counted on the capture's copies (``count_rows``: rows, nothing decoded).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsync import findings
from memsync.errors import UnavailableError
from memsync.model import ERROR, OK, WARNING, CollectionInfo, DoctorResult
from memsync.stores.vector_store import VectorCapture, VectorStore

SLOW_OPEN_POINTS = 20_000  # qdrant-client's LARGE_DATA_THRESHOLD; measured 3.2 s, +478 MB to open
STORE_SIZE_WARN_POINTS = 15_000  # warn three quarters of the way there, before the app feels it
MOVE_TO_PGVECTOR = (
    "move to Postgres with pgvector: memsync migrate --to NEW.toml --dry-run, then without "
    "--dry-run (docs/how-to/move-from-embedded-qdrant-to-postgres.md)"
)


def probe_capture(
    store: VectorStore, capture: VectorCapture, expected_dims: tuple[tuple[str, int], ...]
) -> list[DoctorResult]:
    """``legacy-point-store`` and ``collection-params`` of each collection, then ``store-size``.

    Reads the capture's copies only; ``expected_dims``: ``config.expected_dims``.
    """
    if not capture.present:
        return [
            DoctorResult(
                code="collection-params",
                status=ERROR,
                path=store.where,
                message=f"no {store.kind} store at {store.where} ({store.index_file} missing)",
                fix="memsync restore <snapshot>, or fix [mem0] vector_store.config.path",
            )
        ]
    results = [
        DoctorResult(
            code="legacy-point-store",
            status=ERROR,
            path=", ".join(f"{store.where}/{file}" for file in files),
            message=f"collection {name!r} keeps qdrant-client's legacy dbm point store beside or "
            "instead of the storage.sqlite qdrant-client 1.20 reads: its points are invisible to "
            "mem0, not lost",
            fix=findings.spec("legacy-point-store").fix,
        )
        for name, files in sorted(capture.legacy_files.items())
    ]
    results += [
        _collection_params(store, capture, expected_dims, name, info)
        for name, info in sorted(capture.collections.items())
        if name in (store.collection, store.entities_collection)
    ]
    if store.collection not in capture.collections:
        results.append(
            DoctorResult(
                code="collection-params",
                status=WARNING,
                path=store.where,
                message=f"collection {store.collection!r} does not exist yet",
            )
        )
    return results + _probe_store_size(store, capture)


def _collection_params(
    store: VectorStore,
    capture: VectorCapture,
    expected_dims: tuple[tuple[str, int], ...],
    name: str,
    info: CollectionInfo,
) -> DoctorResult:
    """One collection's vector size and distance against the config's sizes.

    A collection of the wrong size that holds points was written by the embedder before the
    change: the fix is check's (``findings.changed_embedder_fix``: ``memsync migrate``).
    """
    mismatched = [(key, size) for key, size in expected_dims if size != info.vector_size]
    wrong = [f"{key} = {size}" for key, size in mismatched]
    distance_ok = info.distance in (None, "Cosine")
    message = (
        f"collection {name!r}: vector size {info.vector_size or 'not recorded'}, "
        f"distance {info.distance or 'not recorded'}"
    )
    if wrong:
        message += f", but the config says {', '.join(wrong)}"
    elif not distance_ok:
        message += " (mem0 creates Cosine collections)"
    fix = None
    if wrong:
        fix = _dimension_fix(store, capture, name, info.vector_size, mismatched[0][0])
    return DoctorResult(
        code="collection-params",
        status=ERROR if wrong else OK if distance_ok else WARNING,
        path=str(store.collection_file(name)),
        message=message,
        fix=fix,
    )


def _dimension_fix(
    store: VectorStore, capture: VectorCapture, name: str, size: int | None, key: str
) -> str:
    """Check's fix when the collection holds points of its size, else the plain one."""
    try:
        stored = store.count_rows(capture).get(name, 0)
    except UnavailableError:  # a damaged copy: sqlite-integrity names it
        stored = 0
    if stored and size is not None:
        return findings.changed_embedder_fix(key, size)
    return "set embedding_model_dims to the collection's size"


def sqlite_verdicts(store: VectorStore, capture: VectorCapture) -> list[tuple[Path, str]]:
    """Each collection's live ``storage.sqlite`` and the quick_check verdict of its copy."""
    verdicts = store.check_copy(capture, quick=True, decode=False)
    files = []
    for name in sorted(capture.copies):
        relative = str(store.collection_file(name, capture.root).relative_to(capture.root))
        files.append((store.collection_file(name), verdicts[relative]))
    return files


def _probe_store_size(store: VectorStore, capture: VectorCapture) -> list[DoctorResult]:
    """The ``store-size`` result of a capture.

    A copy that cannot be counted gives none (``sqlite-integrity`` reports the damaged file).
    """
    try:
        rows = store.count_rows(capture)
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


def probe_app_view(
    where: str, qdrant_client: str | None, found: Mapping[str, Any]
) -> list[DoctorResult]:
    """``store-meta`` and ``store-decode`` from the app interpreter's answer (``app_doctor``)."""
    results = []
    if found.get("meta") is not None:
        results.append(store_meta_result(qdrant_client, found["meta"]))
    if found.get("decode") is not None:
        results.append(store_decode_result(qdrant_client, where, found["decode"]))
    return results


def store_decode_result(
    qdrant_client: str | None, where: str, found: dict[str, Any]
) -> DoctorResult:
    """``store-decode``: whether the app's qdrant-client loads every stored point. Pure.

    ``found``: ``agent.meta.undecodable``'s answer, from the app's interpreter. One row it
    cannot load stops its whole open of the store: the app does not start, and no write
    through mem0 can run. A collection it could not read (a hot journal a killed app left, a
    permission) is named as not checked: a warning, not a verdict on its points.
    """
    bad = {name: c for name, c in found.items() if c.get("undecodable")}
    unread = "; ".join(
        f"collection {n}: not read ({c['error']})" for n, c in found.items() if c.get("error")
    )
    rows = sum(c.get("rows", 0) for c in found.values())
    client = f"the app's qdrant-client {qdrant_client}"
    if not bad and unread:  # what was not read was not judged: no verdict on its points
        return DoctorResult(
            code="store-decode",
            status=WARNING,
            path=where,
            message=f"{client} did not check every stored point of {where}: {unread}",
            fix="make the file readable (see the check result), then run memsync doctor again",
        )
    if not bad:
        return DoctorResult(
            code="store-decode",
            status=OK,
            path=where,
            message=f"{client} loads every point ({rows} rows in {len(found)} collections)",
        )
    parts = []
    for name, c in sorted(bad.items()):
        ids = ", ".join(f"{row['id']} (rowid {row['rowid']})" for row in c["named"])
        more = c["undecodable"] - len(c["named"])
        parts.append(
            f"collection {name}: {c['undecodable']} of {c['rows']} rows: {ids}"
            + (f" and {more} more" if more > 0 else "")
            + f" ({c['named'][0]['error']})"
        )
    return DoctorResult(
        code="store-decode",
        status=ERROR,
        path=where,
        message=f"{client} cannot load these stored points of {where}: {'; '.join(parts)}: "
        "written by another qdrant-client or pydantic, they stop its open of the store, so the "
        "app does not start and memsync cannot write through mem0"
        + (f"; {unread}" if unread else ""),
        fix="run the app with the qdrant-client and pydantic that wrote them, or restore a "
        "snapshot from before they were written (memsync snapshot list)",
    )


def store_meta_result(qdrant_client: str | None, found: dict[str, Any]) -> DoctorResult:
    """``store-meta``: whether the app's qdrant-client loads the store's ``meta.json``. Pure.

    ``found``: ``agent.meta.inspect``'s answer, from the app's interpreter.
    """
    if found["loads"]:
        return DoctorResult(
            code="store-meta",
            status=OK,
            message=f"the app's qdrant-client {qdrant_client} loads {found['path']}",
        )
    refused = "; ".join(
        f"collection {name}: {', '.join(c['refused'] + c['problems'])}"
        for name, c in found["collections"].items()
    )
    repairable = all(c["repairable"] for c in found["collections"].values())
    keys = [key for c in found["collections"].values() for key in c["refused"]]
    # id_tracker: written by qdrant-client 1.20.0, refused by 1.19.1 (measured)
    writer = (
        "qdrant-client 1.20 or later"
        if any(key.endswith("id_tracker") for key in keys)
        else f"a qdrant-client newer than {qdrant_client}"
    )
    return DoctorResult(
        code="store-meta",
        status=ERROR,
        message=f"the app's qdrant-client {qdrant_client} cannot load {found['path']} "
        f"(keys it does not know: {refused}): the app will not start on this store; "
        f"written by {writer} (memsync 0.1's own writes, or another tool)",
        fix="stop the app, then memsync repair-meta (a snapshot first; the old file kept)"
        if repairable
        else "restore a snapshot from before, or run the app with the qdrant-client that wrote it",
        path=found["path"],
    )
