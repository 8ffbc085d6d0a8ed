"""Read and rewrite a pgvector export's files: ``COPY`` in binary or in CSV.

A snapshot's table is exported in PostgreSQL's binary ``COPY`` format (``<table>.pgcopy``,
since 0.3: the server sends each float's four bytes instead of printing it, so the export is
about 4x faster and 2.5x smaller at 384 dimensions) when its ``id``, ``vector`` and ``payload``
columns have types this module decodes (``uuid`` or text, ``vector(N)``, ``jsonb`` or ``json``);
other tables, inventory exports and snapshots of 0.2 use CSV (``<table>.csv``). Readers tell
the two apart by the binary format's signature, so both kinds of snapshot stay readable.

Binary (PostgreSQL's "Binary Format" of ``COPY``): an 11-byte signature, a 32-bit flags field
(0), a header extension (its length, then bytes), then per row a 16-bit field count and per field
a 32-bit length (-1: NULL) and that many bytes, then a trailer (-1). A binary file's columns are
``schema.json``'s beside it. CSV: Python's ``csv`` module reads PostgreSQL's CSV (RFC 4180
quoting): a NULL is an unquoted empty field, so a NULL ``vector`` reads as ``""`` (no vector),
which pgvector never prints for a value. Rows are streamed, one in memory at a time.
"""

from __future__ import annotations

import array
import csv
import json
import math
import os
import struct
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from memsync.errors import UnavailableError
from memsync.model import EntityLink, Point
from memsync.stores.sqlite_files import work_dir_error
from memsync.stores.vector_store import StoredPoint

REQUIRED = ("id", "vector", "payload")  # mem0ai 2.2.1 create_col
DIMS_COLUMN = "vector_dims"  # an inventory-only export's stand-in for "vector" (export.export)
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # a payload may exceed csv's 128 KiB default

SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_VECTOR_HEAD = struct.Struct(">hh")
_FIELD_MAX = 1 << 30  # PostgreSQL's own limit on one field (1 GB): a longer length is damage
_ID_TYPES = ("uuid", "text")
_PAYLOAD_TYPES = ("jsonb", "json")


def binary_columns(columns: Sequence[dict[str, str]]) -> bool:
    """Whether a table of these ``schema.json`` columns is exported in binary (see above). Pure."""
    types = {c.get("name"): str(c.get("type", "")) for c in columns}
    return (
        (types.get("id") in _ID_TYPES or types.get("id", "").startswith("character varying"))
        and types.get("vector", "").startswith("vector")
        and types.get("payload") in _PAYLOAD_TYPES
    )


def is_binary(path: Path) -> bool:
    """Whether ``path`` starts with binary COPY's signature. Raises OSError when unreadable."""
    with path.open("rb") as handle:
        return handle.read(len(SIGNATURE)) == SIGNATURE


# (row number, id text, payload text, vector: pgvector text (CSV), bytes (binary) or None,
#  vector size or None)
_Record = tuple[int, str, str, "str | bytes | None", "int | None"]


class _Rows:
    """The rows of one export file (binary or CSV) with the fields of ``REQUIRED``."""

    def __init__(self, path: Path, *, count_only: bool = False) -> None:
        self.path = path
        self.count_only = count_only  # records only counted: no field is read (count_rows)
        self.where: dict[str, int] = {}
        self.unit = "line"  # how a record is numbered in messages: a CSV's line, a binary row

    @property
    def has_vectors(self) -> bool:
        return "vector" in self.where

    def __iter__(self) -> Iterator[_Record]:
        try:
            binary = is_binary(self.path)
        except OSError as error:
            raise UnavailableError(
                f"pgvector export {self.path} is not readable: {error}"
            ) from None
        self.unit = "row" if binary else "line"
        yield from (self._binary() if binary else self._csv())

    def _positions(self, header: list[str]) -> None:
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
        self.where = where

    def _csv(self) -> Iterator[_Record]:
        reader = None
        try:
            with self.path.open(encoding="utf-8", newline="") as handle:
                reader = csv.reader(handle)
                header = next(reader, None)
                if header is None:
                    raise UnavailableError(f"pgvector export {self.path} is empty (no header line)")
                self._positions(header)
                where = self.where
                last = max(where.values())
                for number, row in enumerate(reader, start=2):
                    if self.count_only:
                        yield number, "", "", None, None
                        continue
                    if len(row) <= last:
                        raise UnavailableError(
                            f"pgvector export {self.path} line {number}: {len(row)} fields, a "
                            "truncated row"
                        )
                    if "vector" in where:
                        vector = row[where["vector"]]
                        yield (
                            number,
                            row[where["id"]],
                            row[where["payload"]],
                            vector,
                            vector_size(vector),
                        )
                        continue
                    dims = row[where[DIMS_COLUMN]]
                    try:
                        size = int(dims) if dims else None
                    except ValueError:
                        raise UnavailableError(
                            f"pgvector export {self.path} line {number} (point "
                            f"{row[where['id']]}): {DIMS_COLUMN} is not a number"
                        ) from None
                    yield number, row[where["id"]], row[where["payload"]], None, size
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            line = f" line {reader.line_num}" if reader is not None and reader.line_num else ""
            raise UnavailableError(
                f"pgvector export {self.path}{line} is not readable: {error}"
            ) from None

    def _binary(self) -> Iterator[_Record]:
        columns = binary_layout(self.path)
        self._positions([c["name"] for c in columns])
        where = self.where
        id_uuid = columns[where["id"]]["type"] == "uuid"
        jsonb = columns[where["payload"]]["type"] == "jsonb"
        count = len(columns)
        number = 0
        try:
            with self.path.open("rb") as handle:
                _binary_header(handle, self.path)
                read = handle.read
                while True:
                    number += 1
                    fields = _fields(read, self.path, number, count)
                    if fields is None:
                        return
                    if self.count_only:
                        yield number, "", "", None, None
                        continue
                    raw_id, raw_payload = fields[where["id"]], fields[where["payload"]]
                    vector = fields[where["vector"]]
                    if raw_id is None:
                        point_id = ""
                    elif id_uuid:
                        if len(raw_id) != 16:
                            raise self._bad(number, "its id is not a 16-byte uuid")
                        point_id = str(uuid.UUID(bytes=raw_id))
                    else:
                        point_id = raw_id.decode("utf-8")
                    if raw_payload is None:
                        text = ""
                    elif jsonb:
                        if raw_payload[:1] != b"\x01":
                            raise self._bad(number, "its payload is not jsonb version 1")
                        text = raw_payload[1:].decode("utf-8")
                    else:
                        text = raw_payload.decode("utf-8")
                    size = None
                    if vector is not None:
                        size = self._vector_size(number, vector)
                    yield number, point_id, text, vector, size
        except UnicodeDecodeError as error:
            raise self._bad(number, f"a field is not UTF-8 ({error})") from None
        except OSError as error:
            raise UnavailableError(
                f"pgvector export {self.path} is not readable: {error}"
            ) from None

    def _vector_size(self, number: int, vector: bytes) -> int:
        """The dims of a binary vector, refused as pgvector's ``vector_recv`` would refuse it."""
        if len(vector) < 4:
            raise self._bad(number, "its vector is shorter than its header")
        size, unused = _VECTOR_HEAD.unpack_from(vector)
        if len(vector) != 4 + 4 * size or unused != 0:
            raise self._bad(
                number, f"its vector of {size} dims has {len(vector)} bytes (header {unused})"
            )
        values = array.array("f", vector[4:])
        if sys.byteorder == "little":
            values.byteswap()
        if not math.isfinite(sum(values)):  # NaN, or an infinity (no float4 sum overflows a double)
            raise self._bad(number, "its vector holds NaN or an infinite value")
        return int(size)

    def _bad(self, number: int, why: str) -> UnavailableError:
        return UnavailableError(f"pgvector export {self.path} row {number}: {why}")


def binary_layout(path: Path) -> list[dict[str, str]]:
    """The columns of binary export ``path``: ``schema.json``'s beside it for the table whose file it is.

    Raises UnavailableError when schema.json is missing, unreadable or lists no such file.
    """
    schema = path.parent / "schema.json"
    try:
        document = json.loads(schema.read_text(encoding="utf-8"))
        tables = document["tables"].values()
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as error:
        raise UnavailableError(
            f"pgvector export {path} is binary, and {schema} that names its columns is not "
            f"readable: {error}"
        ) from None
    for table in tables:
        if isinstance(table, dict) and table.get("file") == path.name:
            columns = table.get("columns")
            if isinstance(columns, list) and all(isinstance(c, dict) for c in columns):
                return columns
    raise UnavailableError(
        f"pgvector export {path} is binary, and {schema} lists no columns for it"
    )


def _binary_header(handle: BinaryIO, path: Path) -> None:
    """Read past the signature, flags and header extension; raise when they are not COPY's."""
    head = handle.read(len(SIGNATURE) + 8)
    if len(head) < len(SIGNATURE) + 8 or not head.startswith(SIGNATURE):
        raise UnavailableError(f"pgvector export {path}: its binary COPY header is truncated")
    flags, extension = struct.unpack_from(">ii", head, len(SIGNATURE))
    if flags != 0 or not 0 <= extension <= _FIELD_MAX or len(handle.read(extension)) != extension:
        raise UnavailableError(
            f"pgvector export {path}: its binary COPY header has flags {flags} (OIDs or an "
            "unknown extension), not an export of memsync's"
        )


def _fields(read: Any, path: Path, number: int, count: int) -> list[bytes | None] | None:
    """The fields of row ``number`` (None at the trailer). Raises on a truncated or altered row."""
    raw = read(2)
    if len(raw) != 2:
        raise UnavailableError(
            f"pgvector export {path} ends before row {number} and before its trailer: the file "
            "is truncated"
        )
    fields = _INT16.unpack(raw)[0]
    if fields == -1:
        if read(1):
            raise UnavailableError(f"pgvector export {path} has bytes after its trailer: altered")
        return None
    if fields != count:
        raise UnavailableError(
            f"pgvector export {path} row {number}: {fields} fields, schema.json lists {count}"
        )
    values: list[bytes | None] = []
    for _ in range(fields):
        raw = read(4)
        if len(raw) != 4:
            raise UnavailableError(f"pgvector export {path} row {number} is truncated")
        length = _INT32.unpack(raw)[0]
        if length == -1:
            values.append(None)
            continue
        value = read(length) if 0 <= length <= _FIELD_MAX else b""
        if length < 0 or len(value) != length:
            raise UnavailableError(f"pgvector export {path} row {number} is truncated")
        values.append(value)
    return values


def _decode(rows: _Rows, number: int, point_id: str, text: str, vector: object) -> dict[str, Any]:
    """The payload of one row. Raises UnavailableError naming the file and its line or row."""
    path, place = rows.path, f"{rows.unit} {number}"
    try:
        payload = json.loads(text) if text else {}
    except ValueError as error:
        raise UnavailableError(
            f"pgvector export {path} {place} (point {point_id}): payload is not JSON: {error}"
        ) from None
    if not isinstance(payload, dict):
        raise UnavailableError(
            f"pgvector export {path} {place} (point {point_id}): payload is not a JSON object"
        )
    if isinstance(vector, str) and vector and not (vector.startswith("[") and vector.endswith("]")):
        raise UnavailableError(
            f"pgvector export {path} {place} (point {point_id}): vector is not pgvector's text",
            "the table's vector column is not of pgvector's type vector(N) (memsync doctor: "
            "pg-dimension); mem0 creates it so with the vector extension",
        )
    return payload


def _floats(vector: str | bytes | None) -> list[float] | None:
    """A vector's values from its text or binary form (None for NULL). Pure."""
    if not vector:
        return None
    if isinstance(vector, bytes):
        size = _VECTOR_HEAD.unpack_from(vector)[0]
        return list(struct.unpack_from(f">{size}f", vector, 4))
    return [float(x) for x in json.loads(vector)]


def vector_size(vector: str) -> int | None:
    """The length of pgvector's text form ``[x,y,...]``; None for NULL (``""``). Pure."""
    if not vector:
        return None
    return 0 if vector == "[]" else vector.count(",") + 1


def iter_points(
    path: Path, keys: frozenset[str] | None = None, dimension: int | None = None
) -> Iterator[Point]:
    """Every row of an export file as a point (payload cut to ``keys`` when given). Streams.

    ``dimension``: the column's ``vector(N)``; a vector of another size is refused.

    Raises:
        UnavailableError: the file is unreadable, truncated, or a row does not decode (the
            message names the file and line or row).
    """
    rows = _Rows(path)
    for number, point_id, text, vector, size in rows:
        payload = _decode(rows, number, point_id, text, vector)
        if dimension is not None and size is not None and size != dimension:
            raise UnavailableError(
                f"pgvector export {path} {rows.unit} {number} (point {point_id}): a vector of "
                f"{size} dims, but schema.json declares vector({dimension})"
            )
        if keys is not None:  # interned: one key string for every point, not one per row
            payload = {sys.intern(k): v for k, v in payload.items() if k in keys}
        yield Point(id=point_id.lower(), payload=payload, vector_size=size)


def iter_stored(path: Path) -> Iterator[tuple[str, StoredPoint]]:
    """Every row of an export file with its whole payload and vector (floats). Streams.

    Raises:
        UnavailableError: as ``iter_points``; also for an inventory-only export (no vectors).
    """
    rows = _Rows(path)
    for number, point_id, text, vector, _size in rows:
        if not rows.has_vectors:
            raise UnavailableError(
                f"pgvector export {path} holds vector sizes only (an inventory capture), "
                "not the vectors"
            )
        payload = _decode(rows, number, point_id, text, vector)
        yield point_id.lower(), StoredPoint(payload=payload, vector=_floats(vector))


def header_verdict(path: Path, columns: Any, *, vectors: bool = True) -> str:
    """``"ok"`` when the file's header names ``schema.json``'s ``columns`` in order, else why not.

    A header of other columns cannot be loaded back (``COPY ... FROM`` takes the table's
    columns). ``vectors=False``: an inventory-only export, whose ``vector`` column is exported
    as ``vector_dims``. A binary export has no names: its signature and its first row's field
    count are compared instead. Reads the first record only. Raises UnavailableError when
    unreadable.
    """
    names = [c.get("name") for c in columns] if isinstance(columns, list) else None
    if names is not None and not vectors:
        names = ["vector_dims" if name == "vector" else name for name in names]
    try:
        if is_binary(path):
            with path.open("rb") as handle:
                _binary_header(handle, path)
                raw = handle.read(2)
            fields = _INT16.unpack(raw)[0] if len(raw) == 2 else None
            if names is None or fields in (-1, len(names)):
                return "ok"
            return (
                f"pgvector export {path.name} has rows of {fields} fields, but its schema.json "
                f"records {len(names)} columns: the file or schema.json was altered"
            )
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


def count_rows(path: Path) -> tuple[int, str]:
    """(data rows, where the last one is: ``line N`` of a CSV, ``row N`` of a binary file).

    A CSV's line number counts records (header: line 1), so a payload with newlines inside
    quotes is one line. Raises as ``iter_points``.
    """
    count = last = 0
    rows = _Rows(path, count_only=True)
    for number, _id, _text, _vector, _size in rows:
        count, last = count + 1, number
    return count, f"{rows.unit} {last}"


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
    rows = _Rows(path)
    for number, found, text, vector, _size in rows:
        if found.lower() == wanted:
            if not rows.has_vectors:
                raise UnavailableError(
                    f"pgvector export {path} holds vector sizes only (an inventory capture), "
                    "not the vectors"
                )
            payload = _decode(rows, number, found, text, vector)
            return StoredPoint(payload=payload, vector=_floats(vector))
    return None


def remove_rows(path: Path, point_ids: Sequence[str]) -> tuple[int, int]:
    """Rewrite ``path`` without the rows of ``point_ids``; (rows removed, rows left). Atomic.

    Writes a temporary file beside it, fsyncs, renames it over ``path``; unchanged when no row
    matched. Raises UnavailableError (unreadable) or TryLaterError (disk full).
    """
    wanted = {i.lower() for i in point_ids}
    temporary = path.with_name(path.name + ".tmp")
    try:
        binary = is_binary(path)
    except OSError as error:
        raise UnavailableError(f"pgvector export {path} is not readable: {error}") from None
    try:
        removed, kept = (_remove_binary if binary else _remove_csv)(path, temporary, wanted)
        if removed:
            temporary.replace(path)
    except (UnicodeDecodeError, csv.Error) as error:
        raise UnavailableError(f"pgvector export {path} is not readable: {error}") from None
    except OSError as error:
        raise work_dir_error(path.parent, error) from error
    finally:
        temporary.unlink(missing_ok=True)
    return removed, kept


def _remove_csv(path: Path, temporary: Path, wanted: set[str]) -> tuple[int, int]:
    removed = kept = 0
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
    return removed, kept


def _remove_binary(path: Path, temporary: Path, wanted: set[str]) -> tuple[int, int]:
    columns = binary_layout(path)
    names = [c.get("name") for c in columns]
    if "id" not in names:
        raise UnavailableError(f"pgvector export {path} has no id column (schema.json)")
    column, id_uuid = names.index("id"), columns[names.index("id")].get("type") == "uuid"
    removed = kept = number = 0
    with path.open("rb") as source, temporary.open("wb") as out:
        _binary_header(source, path)
        header_end = source.tell()
        source.seek(0)
        out.write(source.read(header_end))  # signature, flags and extension as they were
        read = source.read
        while True:
            number += 1
            fields = _fields(read, path, number, len(columns))
            if fields is None:
                out.write(_INT16.pack(-1))
                break
            raw = fields[column]
            try:
                point_id = (
                    "" if raw is None else str(uuid.UUID(bytes=raw)) if id_uuid else raw.decode()
                )
            except ValueError:  # a short uuid, a text id that is not UTF-8
                raise UnavailableError(
                    f"pgvector export {path} row {number}: its id does not decode"
                ) from None
            if point_id.lower() in wanted:
                removed += 1
                continue
            out.write(_INT16.pack(len(fields)))
            for value in fields:
                out.write(_INT32.pack(-1) if value is None else _INT32.pack(len(value)) + value)
            kept += 1
        out.flush()
        os.fsync(out.fileno())
    return removed, kept
