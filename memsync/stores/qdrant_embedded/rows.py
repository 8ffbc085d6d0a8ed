"""The rows of one embedded-Qdrant ``storage.sqlite``: read, find and delete points. Reads copies.

qdrant-client 1.20.0 local mode keeps a collection in ``points(id TEXT PRIMARY KEY, point BLOB)``:
``id`` is base64 of a pickled point id, ``point`` a pickled ``PointStruct``. Older files can hold
several rows for one point (other UUID spellings, another key pickle protocol): every reader here
takes the highest rowid among them, as qdrant-client's own ``load`` does
(``point_ids.normalize_point_id``), and a delete removes every row of the point. Points are
decoded only through ``formats.PointUnpickler``, which admits the classes qdrant-client
writes and nothing else. ``memsync.stores.qdrant_embedded.store.EmbeddedQdrant`` is the port over these.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memsync.errors import UnavailableError
from memsync.model import EntityLink, Point
from memsync.stores.point_ids import normalize_point_id
from memsync.stores.qdrant_embedded.formats import (
    PointDecodeError,
    decode_key,
    decode_point,
    decode_stored,
)
from memsync.stores.sqlite_files import connect_readonly, in_id_order, translate

T = TypeVar("T")

# Above this many rows ``points_in_order`` sorts through a temporary SQLite database instead of
# holding every point (a module constant: the tests lower it to cover that path on small stores).
SPILL_ROWS = 50_000


def iter_points(storage: Path) -> Iterator[Point]:
    """Yield every current point of a captured ``storage.sqlite`` (newest row per id wins).

    Ids are normalised (``normalize_point_id``): the rows of every spelling of a UUID are one
    point, as qdrant-client 1.20.0's ``load`` reads them.

    Streams: one decoded point in memory at a time (the ids seen are kept). Reads only.

    Raises:
        UnavailableError: the file is not a valid collection store, or a point is undecodable
            (the message names the file and the row).
    """
    return _newest_rows(storage, decode_point, lambda point: point.id)


def count_rows(storage: Path) -> int:
    """The rows of a captured ``storage.sqlite``'s ``points`` table (nothing decoded). Reads only.

    One row per point, or a few more where an older client left several rows for one point:
    the rows qdrant-client reads into memory when it opens the store.

    Raises:
        UnavailableError: the file cannot be opened or has no ``points`` table.
    """
    connection = connect_readonly(storage)
    try:
        return int(connection.execute("SELECT count(*) FROM points").fetchone()[0])
    except sqlite3.Error as error:
        raise translate(error, storage, "count its points") from error
    finally:
        connection.close()


def iter_stored(storage: Path) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Yield ``(id, payload, vector as stored)`` of every current point of a ``storage.sqlite``.

    The points ``iter_points`` yields (newest row per normalised id), with their vectors
    (mem0: ``{"": [floats], ...}``). Streams. Reads only.

    Raises:
        UnavailableError: as ``iter_points``.
    """
    return _newest_rows(storage, decode_stored, lambda stored: stored[0])


def _newest_rows(
    storage: Path, decode: Callable[[bytes], T], id_of: Callable[[T], str]
) -> Iterator[T]:
    """``decode(row)`` of each point's newest row (by ``id_of``), newest first. Streams."""
    connection = connect_readonly(storage)
    seen: set[str] = set()
    try:
        cursor = connection.execute("SELECT rowid, point FROM points ORDER BY rowid DESC")
        for rowid, blob in cursor:
            try:
                decoded = decode(blob)
            except PointDecodeError as error:
                raise _undecodable(storage, rowid, error) from error
            point_id = id_of(decoded)
            if point_id not in seen:
                seen.add(point_id)
                yield decoded
    except sqlite3.Error as error:
        raise translate(error, storage, "read its points") from error
    finally:
        connection.close()


def read_points(
    storage: Path,
    keys: frozenset[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Point]:
    """Read every current point of a captured ``storage.sqlite`` into a dict by id.

    Rows are read in rowid order and a later row replaces an earlier one, so the newest row
    of a point id (in any spelling, normalised) wins, as qdrant-client 1.20.0's ``load`` decides. With ``keys``, each payload is
    trimmed to those keys, so memory stays bounded whatever metadata the app stores (100,000
    points: about 110 MB of payload objects with mem0's own keys). Reads only.

    Args:
        storage: the captured storage.sqlite.
        keys: payload keys to keep (None: all).
        progress: called as ``progress(rows_read, rows_total)`` every 1,000 rows and at the end.

    Raises:
        UnavailableError: as ``iter_points``.
    """
    connection = connect_readonly(storage)
    points: dict[str, Point] = {}
    try:
        total = (
            int(connection.execute("SELECT count(*) FROM points").fetchone()[0]) if progress else 0
        )
        read = 0
        for rowid, blob in connection.execute("SELECT rowid, point FROM points ORDER BY rowid"):
            read += 1
            if progress is not None and read % 1000 == 0:
                progress(read, total)
            try:
                point = decode_point(blob, keys)
            except PointDecodeError as error:
                raise _undecodable(storage, rowid, error) from error
            points[point.id] = point
        if progress is not None:
            progress(read, total)
    except sqlite3.Error as error:
        raise translate(error, storage, "read its points") from error
    finally:
        connection.close()
    return points


def points_in_order(
    storage: Path,
    keys: frozenset[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[Point]:
    """Yield ``read_points``' points by ascending id; memory stays flat at any size.

    qdrant-client's row keys are pickles of the id as spelt, so the file has no order by
    normalised id. Up to ``SPILL_ROWS`` rows the points are read whole and sorted; above, each
    row is decoded once, in rowid order, and its point (payload cut to ``keys``, no vector)
    sorted through a temporary SQLite database (``sqlite_files.in_id_order``), the newest row
    of each id winning. The same points as ``read_points``, in the same order. Reads only;
    errors are raised while iterating.

    Raises:
        UnavailableError: as ``read_points``.
        TryLaterError: the temporary directory is full (``in_id_order``).
    """
    connection = connect_readonly(storage)
    try:
        total = int(connection.execute("SELECT count(*) FROM points").fetchone()[0])
        if total > SPILL_ROWS:
            yield from _spilled_in_order(connection, storage, total, keys, progress)
            return
    except sqlite3.Error as error:
        raise translate(error, storage, "read its points") from error
    finally:
        connection.close()
    points = read_points(storage, keys, progress)
    for point_id in sorted(points):
        yield points[point_id]


def _spilled_in_order(
    connection: sqlite3.Connection,
    storage: Path,
    total: int,
    keys: frozenset[str] | None,
    progress: Callable[[int, int], None] | None,
) -> Iterator[Point]:
    """``points_in_order`` through a temporary database (see there)."""

    def decoded() -> Iterator[tuple[Point, int]]:
        read = 0
        try:
            for rowid, blob in connection.execute("SELECT rowid, point FROM points ORDER BY rowid"):
                try:
                    point = decode_point(blob, keys)
                except PointDecodeError as error:
                    raise _undecodable(storage, rowid, error) from error
                yield point, rowid
                read += 1
                if progress is not None and read % 1000 == 0:
                    progress(read, total)
        except sqlite3.Error as error:  # the copy's, never the temporary database's
            raise translate(error, storage, "read its points") from error
        if progress is not None:
            progress(read, total)

    yield from in_id_order(decoded())


def _undecodable(storage: Path, rowid: int, error: PointDecodeError) -> UnavailableError:
    return UnavailableError(
        f"point at rowid {rowid} of {storage} cannot be decoded: {error}",
        "the collection store is damaged or was not written by qdrant-client",
    )


def read_entities(storage: Path) -> tuple[EntityLink, ...]:
    """Read mem0's entity points (``<collection>_entities``) from a captured storage file.

    Returns the entities sorted by id; ``linked_memory_ids`` keep their stored order.

    Raises:
        UnavailableError: as ``iter_points``.
    """
    links = []
    for point in iter_points(storage):
        linked = point.payload.get("linked_memory_ids")
        ids = tuple(str(item) for item in linked) if isinstance(linked, list) else ()
        text = point.payload.get("data")
        links.append(
            EntityLink(
                entity_id=point.id,
                text=text if isinstance(text, str) else None,
                linked_memory_ids=ids,
            )
        )
    return tuple(sorted(links, key=lambda link: link.entity_id))


def rows_of(connection: sqlite3.Connection, point_ids: frozenset[str]) -> list[int]:
    """The rowids of every row of the (normalised) ``point_ids``, newest first. Reads only.

    Matches each row by its key (``decode_key``: any UUID spelling, any key pickle protocol);
    a row whose key memsync cannot read is matched by the id in its point, as qdrant-client
    1.20.0's ``load`` identifies rows (``normalize_point_id(point.id)``).

    Raises:
        sqlite3.Error: the file cannot be read.
        PointDecodeError: a row with an unreadable key holds an undecodable point.
    """
    rowids = []
    for rowid, key in connection.execute("SELECT rowid, id FROM points ORDER BY rowid DESC"):
        point_id = decode_key(key) if isinstance(key, str) else None
        if point_id is None:
            (blob,) = connection.execute(
                "SELECT point FROM points WHERE rowid = ?", (rowid,)
            ).fetchone()
            point_id = decode_point(blob, frozenset()).id
        if point_id in point_ids:
            rowids.append(rowid)
    return rowids


def delete_points(storage: Path, point_ids: Sequence[str]) -> int:
    """Delete every row of ``point_ids`` from a ``storage.sqlite`` copy, then VACUUM it.

    Every spelling of an id and every key pickle protocol counts (``rows_of``), so no older
    row is left to become the point again. Only for copies (a snapshot being rewritten, a
    pre-restore copy): the live store changes through mem0. Returns the rows removed.
    Idempotent.

    Raises:
        TryLaterError, UnavailableError: the file is busy or cannot be written.
    """
    wanted = frozenset(normalize_point_id(point_id) for point_id in point_ids)
    connection = sqlite3.connect(storage, timeout=5.0)
    try:
        with connection:
            rowids = rows_of(connection, wanted)
            connection.executemany("DELETE FROM points WHERE rowid = ?", [(r,) for r in rowids])
        connection.execute("VACUUM")
        return len(rowids)
    except sqlite3.Error as error:
        raise translate(error, storage, "delete points") from error
    except PointDecodeError as error:
        raise UnavailableError(f"{storage} cannot be read: {error}") from error
    finally:
        connection.close()


def find_point(storage: Path, point_id: str) -> tuple[dict[str, Any], Any] | None:
    """Return ``(payload, vector)`` of one point of a captured or snapshot ``storage.sqlite``.

    The point qdrant-client 1.20.0 loads: the newest row among every spelling of the id and
    every key pickle protocol (``rows_of``). The vector is as stored (mem0: ``{"": [floats],
    ...}``). None when absent. Reads only; decodes through ``PointUnpickler``.

    Raises:
        UnavailableError: the file is unreadable.
    """
    wanted = normalize_point_id(point_id)
    connection = connect_readonly(storage)
    try:
        for rowid in rows_of(connection, frozenset({wanted})):
            (blob,) = connection.execute(
                "SELECT point FROM points WHERE rowid = ?", (rowid,)
            ).fetchone()
            stored_id, payload, vector = decode_stored(blob)
            if stored_id == wanted:  # qdrant-client goes by the point's id, not its key
                return payload, vector
        return None
    except (sqlite3.Error, PointDecodeError) as error:
        raise UnavailableError(f"point {point_id} of {storage} cannot be read: {error}") from error
    finally:
        connection.close()
