"""Read and rewrite a pgvector export's CSV files (``COPY ... (FORMAT csv, HEADER)``).

Python's ``csv`` module reads PostgreSQL's CSV (RFC 4180 quoting): a NULL is an unquoted empty
field, so a NULL ``vector`` reads as ``""`` (no vector), which pgvector never prints for a
value. Rows are streamed, one in memory at a time.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memsync.errors import UnavailableError
from memsync.model import EntityLink, Point
from memsync.stores.sqlite_files import work_dir_error
from memsync.stores.vector_store import StoredPoint

REQUIRED = ("id", "vector", "payload")  # mem0ai 2.2.1 create_col
DIMS_COLUMN = "vector_dims"  # an inventory-only export's stand-in for "vector" (export.export)
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # a payload may exceed csv's 128 KiB default


class _Rows:
    """The CSV rows of one export file with the column positions of ``REQUIRED``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[tuple[int, list[str], dict[str, int]]]:
        reader = None
        try:
            with self.path.open(encoding="utf-8", newline="") as handle:
                reader = csv.reader(handle)
                header = next(reader, None)
                if header is None:
                    raise UnavailableError(f"pgvector export {self.path} is empty (no header line)")
                where = {name: header.index(name) for name in REQUIRED if name in header}
                if "vector" not in where and DIMS_COLUMN in header:
                    where[DIMS_COLUMN] = header.index(DIMS_COLUMN)
                missing = [n for n in REQUIRED if n not in where and n != "vector"]
                if "vector" not in where and DIMS_COLUMN not in where:
                    missing.insert(1, "vector")
                if missing:
                    raise UnavailableError(
                        f"pgvector export {self.path} has no column {', '.join(missing)} (header {header})"
                    )
                for number, row in enumerate(reader, start=2):
                    yield number, row, where
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            line = f" line {reader.line_num}" if reader is not None and reader.line_num else ""
            raise UnavailableError(
                f"pgvector export {self.path}{line} is not readable: {error}"
            ) from None


def _decode(
    path: Path, number: int, row: list[str], where: dict[str, int]
) -> tuple[str, dict[str, Any], str, int | None]:
    """(id, payload, vector text, vector size) of one row (text ``""`` in an inventory export).

    Raises UnavailableError naming the file and line.
    """
    if len(row) <= max(where.values()):
        raise UnavailableError(
            f"pgvector export {path} line {number}: {len(row)} fields, a truncated row"
        )
    point_id, text = row[where["id"]], row[where["payload"]]
    if "vector" in where:
        vector = row[where["vector"]]
        size = vector_size(vector)
    else:
        vector, dims = "", row[where[DIMS_COLUMN]]
        try:
            size = int(dims) if dims else None
        except ValueError:
            raise UnavailableError(
                f"pgvector export {path} line {number} (point {point_id}): "
                f"{DIMS_COLUMN} is not a number"
            ) from None
    try:
        payload = json.loads(text) if text else {}
    except ValueError as error:
        raise UnavailableError(
            f"pgvector export {path} line {number} (point {point_id}): payload is not JSON: {error}"
        ) from None
    if not isinstance(payload, dict):
        raise UnavailableError(
            f"pgvector export {path} line {number} (point {point_id}): payload is not a JSON object"
        )
    if vector and not (vector.startswith("[") and vector.endswith("]")):
        raise UnavailableError(
            f"pgvector export {path} line {number} (point {point_id}): vector is not pgvector's text"
        )
    return point_id.lower(), payload, vector, size


def vector_size(vector: str) -> int | None:
    """The length of pgvector's text form ``[x,y,...]``; None for NULL (``""``). Pure."""
    if not vector:
        return None
    return 0 if vector == "[]" else vector.count(",") + 1


def iter_points(path: Path, keys: frozenset[str] | None = None) -> Iterator[Point]:
    """Every row of an export file as a point (payload cut to ``keys`` when given). Streams.

    Raises:
        UnavailableError: the file is unreadable, truncated, or a row does not decode (the
            message names the file and line).
    """
    for number, row, where in _Rows(path):
        point_id, payload, _vector, size = _decode(path, number, row, where)
        if keys is not None:  # interned: one key string for every point, not one per row
            payload = {sys.intern(k): v for k, v in payload.items() if k in keys}
        yield Point(id=point_id, payload=payload, vector_size=size)


def iter_stored(path: Path) -> Iterator[tuple[str, StoredPoint]]:
    """Every row of an export file with its whole payload and vector (floats). Streams.

    Raises:
        UnavailableError: as ``iter_points``; also for an inventory-only export (no vectors).
    """
    for number, row, where in _Rows(path):
        if "vector" not in where:
            raise UnavailableError(
                f"pgvector export {path} holds vector sizes only (an inventory capture), "
                "not the vectors"
            )
        point_id, payload, vector, _size = _decode(path, number, row, where)
        floats = [float(x) for x in json.loads(vector)] if vector else None
        yield point_id, StoredPoint(payload=payload, vector=floats)


def header_verdict(path: Path, columns: Any, *, vectors: bool = True) -> str:
    """``"ok"`` when the file's header names ``schema.json``'s ``columns`` in order, else why not.

    A header of other columns cannot be loaded back (``COPY ... FROM`` takes the table's
    columns). ``vectors=False``: an inventory-only export, whose ``vector`` column is exported
    as ``vector_dims``. Reads the first CSV record only. Raises UnavailableError when unreadable.
    """
    names = [c.get("name") for c in columns] if isinstance(columns, list) else None
    if names is not None and not vectors:
        names = ["vector_dims" if name == "vector" else name for name in names]
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise UnavailableError(f"pgvector export {path} is not readable: {error}") from None
    if names is None or header == names:
        return "ok"
    return (
        f"pgvector export {path.name} has the columns {header}, but its schema.json "
        f"records {names}: the file or schema.json was altered"
    )


def count_rows(path: Path) -> tuple[int, int]:
    """(data rows, line number of the last row) of an export file (header: line 1).

    A line number counts CSV records, so a payload with newlines inside quotes is one line.
    Raises as ``iter_points``.
    """
    count = last = 0
    for number, _row, _where in _Rows(path):
        count, last = count + 1, number
    return count, last


def read_entities(path: Path) -> tuple[EntityLink, ...]:
    """mem0's entity links of an entity table's export, sorted by entity id."""
    links = [entity_link(point.id, point.payload) for point in iter_points(path)]
    return tuple(sorted(links, key=lambda link: link.entity_id))


def entity_link(entity_id: str, payload: object) -> EntityLink:
    """mem0's entity link from an entity row's payload (``data``, ``linked_memory_ids``). Pure."""
    payload = payload if isinstance(payload, dict) else {}
    linked = payload.get("linked_memory_ids")
    text = payload.get("data")
    return EntityLink(
        entity_id=entity_id,
        text=text if isinstance(text, str) else None,
        linked_memory_ids=tuple(str(i) for i in linked) if isinstance(linked, list) else (),
    )


def find_point(path: Path, point_id: str) -> StoredPoint | None:
    """The row of ``point_id`` with its vector (floats), or None. Reads the file until found."""
    wanted = point_id.lower()
    for number, row, where in _Rows(path):
        if row and row[where["id"]].lower() == wanted:
            if "vector" not in where:
                raise UnavailableError(
                    f"pgvector export {path} holds vector sizes only (an inventory capture), "
                    "not the vectors"
                )
            found, payload, vector, _size = _decode(path, number, row, where)
            return StoredPoint(
                payload=payload, vector=[float(x) for x in json.loads(vector)] if vector else None
            )
    return None


def remove_rows(path: Path, point_ids: Sequence[str]) -> tuple[int, int]:
    """Rewrite ``path`` without the rows of ``point_ids``; (rows removed, rows left). Atomic.

    Writes a temporary file beside it, fsyncs, renames it over ``path``; unchanged when no row
    matched. Raises UnavailableError (unreadable) or TryLaterError (disk full).
    """
    wanted = {i.lower() for i in point_ids}
    temporary = path.with_name(path.name + ".tmp")
    removed = kept = 0
    try:
        with (
            path.open(encoding="utf-8", newline="") as source,
            temporary.open("w", encoding="utf-8", newline="") as out,
        ):
            reader, writer = csv.reader(source), csv.writer(out, lineterminator="\n")
            header = next(reader, None)
            if header is None or "id" not in header:
                raise UnavailableError(f"pgvector export {path} has no header with an id column")
            writer.writerow(header)
            column = header.index("id")
            for row in reader:
                if row and row[column].lower() in wanted:
                    removed += 1
                    continue
                writer.writerow(row)
                kept += 1
            out.flush()
            os.fsync(out.fileno())
        if removed:
            temporary.replace(path)
    except (UnicodeDecodeError, csv.Error) as error:
        raise UnavailableError(f"pgvector export {path} is not readable: {error}") from None
    except OSError as error:
        raise work_dir_error(path.parent, error) from error
    finally:
        temporary.unlink(missing_ok=True)
    return removed, kept
