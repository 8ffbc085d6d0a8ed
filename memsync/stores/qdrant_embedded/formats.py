"""qdrant-client's local-mode file formats, decoded without running their code. Pure.

qdrant-client 1.20.0 local mode stores each point as a pickled ``PointStruct`` (pydantic v2)
in ``points.point``. ``PointUnpickler`` admits only ``PointStruct`` and ``SparseVector`` and
loads them into stand-ins that keep the pickled state and run nothing. ``parse_meta`` reads
``meta.json`` (collections and their vector parameters).

``decode_point`` (what the judge reads: id, payload, vector size) counts a dense vector's floats
in the bytes instead of unpickling them when the blob is exactly what local mode writes;
``decode_stored`` (restore's re-adds, recover, migrate: the vector itself) unpickles them all.

Point ids are read as qdrant-client reads them (1.20.0 ``local/utils.py: normalize_point_id``,
used by ``local/persistence.py: load``): a UUID is one point whatever its spelling (upper case,
no hyphens, braces, ``urn:uuid:``), and its canonical spelling is lower case with hyphens.
Older clients stored one point under several row keys (one per spelling, or per pickle
protocol of the key); ``load`` keeps the row with the highest rowid among them.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsync.errors import UnavailableError
from memsync.model import CollectionInfo, Point
from memsync.stores.point_ids import normalize_point_id

_QDRANT_MODELS = "qdrant_client.http.models.models"
# Payload keys memsync never needs (a copy of ``data`` prepared for BM25, mem0ai 2.2.1).
_DROPPED_PAYLOAD_KEYS = frozenset({"text_lemmatized"})


class PointDecodeError(Exception):
    """A stored point is not a pickle of the classes qdrant-client writes."""


class Decoded:
    """Stand-in for qdrant-client's pydantic models: keeps the pickled state, runs no code."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def fields(self) -> dict[str, Any]:
        """The model's field values (pydantic v2 pickles them under ``__dict__``); not a copy."""
        state = self.state
        if isinstance(state, dict):
            inner = state.get("__dict__", state)
            return inner if isinstance(inner, dict) else {}
        if isinstance(state, tuple) and state and isinstance(state[0], dict):
            return state[0]  # pydantic v1 style (dict, fields_set)
        return {}


class PointStructStandIn(Decoded):
    """Decoded ``PointStruct``."""

    __slots__ = ()


class SparseVectorStandIn(Decoded):
    """Decoded ``SparseVector`` (mem0's ``bm25``)."""

    __slots__ = ()


_ALLOWED = {
    (_QDRANT_MODELS, "PointStruct"): PointStructStandIn,
    (_QDRANT_MODELS, "SparseVector"): SparseVectorStandIn,
}


class PointUnpickler(pickle.Unpickler):
    """Unpickle a stored point, admitting only PointStruct and SparseVector (as stand-ins)."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        stand_in = _ALLOWED.get((module, name))
        if stand_in is None:
            raise PointDecodeError(f"refused class {module}.{name} in a stored point")
        return stand_in


class _KeyUnpickler(pickle.Unpickler):
    """Unpickle a row key: a pickled str or int, no class at all."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        raise PointDecodeError(f"refused class {module}.{name} in a row key")


def decode_key(key: str) -> str | None:
    """The normalised point id of a ``points.id`` row key, or None when it is not one. Pure.

    qdrant-client writes the key as base64 of a pickle of the point id (1.20.0: protocol 4;
    older versions, or Python 3.14's default, protocol 5; older clients the id as spelt).
    """
    try:
        point_id = _KeyUnpickler(io.BytesIO(base64.b64decode(key, validate=True))).load()
    except (binascii.Error, ValueError, PointDecodeError, pickle.UnpicklingError, EOFError):
        return None
    except Exception:  # noqa: BLE001 - any other unpickling failure: not a key memsync can read
        return None
    if isinstance(point_id, bool) or not isinstance(point_id, str | int):
        return None
    return normalize_point_id(point_id)


def decode_point(blob: bytes, keys: frozenset[str] | None = None) -> Point:
    """Decode one ``points.point`` blob into a ``Point`` (vector dropped, size kept). Pure.

    The id is normalised as qdrant-client 1.20.0 loads it (``normalize_point_id``).

    Args:
        blob: the pickled point.
        keys: keep only these payload keys (None: the whole payload but ``text_lemmatized``).

    Raises:
        PointDecodeError: the blob is not a pickled PointStruct of the admitted classes.
    """
    fields, vector_size = _fields_and_size(blob)
    point_id = fields.get("id")
    if not isinstance(point_id, str | int):
        raise PointDecodeError(f"point has no valid id ({point_id!r})")
    payload = fields.get("payload") or {}
    if not isinstance(payload, dict):
        raise PointDecodeError(f"point {point_id} has a payload of type {type(payload).__name__}")
    if keys is not None:
        payload = {key: payload[key] for key in keys & payload.keys()}
    else:
        for key in _DROPPED_PAYLOAD_KEYS & payload.keys():
            del payload[key]
    return Point(
        id=normalize_point_id(point_id),
        payload=payload,
        vector_size=vector_size,
    )


# A point as qdrant-client's local mode pickles it (``pickle.dumps(PointStruct)``: protocol 4
# or 5, one frame, pydantic v2) from after the frame's length up to a str id's length.
_HEAD = (
    b"\x8c\x20qdrant_client.http.models.models\x94\x8c\x0bPointStruct\x94\x93\x94"
    b")\x81\x94}\x94(\x8c\x08__dict__\x94}\x94(\x8c\x02id\x94\x8c"
)
_FRAMED = (b"\x80\x04\x95", b"\x80\x05\x95")  # PROTO 4 or 5, FRAME
_ID_LENGTH = 11 + len(_HEAD)
# After the id, up to the dense list's ``EMPTY_LIST MEMOIZE``: the ``vector`` key, then the
# list itself, or mem0's ``{"": list}`` (``SETITEM``) or ``{"": list, ...}`` (``SETITEMS``).
_VECTOR_KEY = b"\x94\x8c\x06vector\x94"
_DENSE = (b"]\x94", b"}\x94\x8c\x00\x94]\x94", b"}\x94(\x8c\x00\x94]\x94")
_FLOAT_BYTES = 9


def _fields_and_size(blob: bytes) -> tuple[dict[str, Any], int | None]:
    """A point's fields (its dense vector left empty when it can be) and that vector's size.

    Unpickling the vector's floats is most of a point's decoding, and only their number is
    read. When the blob is exactly what qdrant-client's local mode writes (``_HEAD``, then a
    dense list of BINFLOATs under ``vector`` or ``vector[""]``), the floats are counted in the
    bytes and the rest is unpickled with the list spliced empty (``EMPTY_LIST MEMOIZE`` stay,
    so the memo indices hold). Anything else (named vectors only, another protocol, pydantic
    v1, an int id), and any failure of the spliced blob, takes the full decode, so a damaged
    blob gives the same error as ever.

    Raises:
        PointDecodeError: as ``_point_fields``.
    """
    spliced = _without_floats(blob)
    if spliced is not None:
        short, size = spliced
        try:
            fields = _point_fields(short)
        except PointDecodeError:
            fields = None
        vector = fields.get("vector") if fields is not None else None
        if isinstance(vector, dict):
            vector = vector.get("")
        if fields is not None and isinstance(vector, list) and not vector:
            return fields, size
    fields = _point_fields(blob)
    return fields, _vector_size(fields.get("vector"))


def _without_floats(blob: bytes) -> tuple[bytes, int] | None:
    """``blob`` with its dense vector's floats cut out, and their number; None when not plain."""
    if (
        blob[:3] not in _FRAMED
        or len(blob) <= _ID_LENGTH
        or not blob.startswith(_HEAD, 11)
        or int.from_bytes(blob[3:11], "little") != len(blob) - 11
    ):
        return None
    key = _ID_LENGTH + 1 + blob[_ID_LENGTH]
    if not blob.startswith(_VECTOR_KEY, key):
        return None
    key += len(_VECTOR_KEY)
    for dense in _DENSE:
        if blob.startswith(dense, key):
            break
    else:
        return None
    start = end = key + len(dense)
    floats = 0
    # Pickle appends a list's items in batches of up to 1,000: MARK, BINFLOATs, APPENDS (the
    # opcodes every 9 bytes from the MARK: the first that is not BINFLOAT ends the batch), or
    # one BINFLOAT and APPEND for a batch of one.
    while True:
        if blob[end : end + 2] == b"(G":
            opcodes = blob[end + 1 : end + 2 + _FLOAT_BYTES * 1000 : _FLOAT_BYTES]
            batch = opcodes.find(b"e")
            if batch < 1 or opcodes.count(b"G", 0, batch) != batch:
                return None
            end += 1 + _FLOAT_BYTES * batch
        elif blob[end : end + 1] == b"G" and blob[end + _FLOAT_BYTES : end + 10] == b"a":
            batch = 1
            end += _FLOAT_BYTES
        else:
            break
        end += 1
        floats += batch
    if not floats:
        return None
    body = blob[11:start] + blob[end:]
    return blob[:3] + len(body).to_bytes(8, "little") + body, floats


def _point_fields(blob: bytes) -> dict[str, Any]:
    """Unpickle one ``points.point`` blob (admitted classes only) into its PointStruct fields.

    Raises:
        PointDecodeError: the blob is not a pickled PointStruct of the admitted classes.
    """
    try:
        decoded = PointUnpickler(io.BytesIO(blob)).load()
    except PointDecodeError:
        raise
    except Exception as error:  # noqa: BLE001 - any unpickling failure means undecodable
        raise PointDecodeError(f"not a pickled point: {type(error).__name__}: {error}") from error
    if not isinstance(decoded, PointStructStandIn):
        raise PointDecodeError(f"stored value is a {type(decoded).__name__}, not a PointStruct")
    return decoded.fields()


def decode_stored(blob: bytes) -> tuple[str, dict[str, Any], Any]:
    """Decode one ``points.point`` blob into ``(id, payload, vector)``, the vector as stored. Pure.

    The id is normalised (``normalize_point_id``); an id that is neither str nor int is ``""``.

    mem0's vector is ``{"": [floats], "bm25": {indices, values}}`` (sparse vectors as dicts).

    Raises:
        PointDecodeError: the blob is not a pickled PointStruct of the admitted classes.
    """
    fields = _point_fields(blob)
    vector = fields.get("vector")
    if isinstance(vector, dict):
        vector = {
            name: (value.fields() if isinstance(value, Decoded) else value)
            for name, value in vector.items()
        }
    point_id = fields.get("id")
    normalized = normalize_point_id(point_id) if isinstance(point_id, str | int) else ""
    return normalized, dict(fields.get("payload") or {}), vector


def _vector_size(vector: Any) -> int | None:
    if isinstance(vector, dict):
        vector = vector.get("")
    if isinstance(vector, list) and vector and not isinstance(vector[0], list):
        return len(vector)
    return None


COLLECTION_NAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,255}$")


def parse_meta(text: str, where: Path) -> dict[str, CollectionInfo]:
    """Parse meta.json text into collection parameters. Pure.

    Collection names become paths, so a name that is not a plain file name (``..``, ``/``)
    makes the file invalid rather than a path outside the store.

    Raises:
        UnavailableError: the text is not Qdrant's meta.json.
    """
    try:
        data = json.loads(text)
        collections = data["collections"]
        if not isinstance(collections, dict):
            raise TypeError("collections is not an object")
        for name in collections:
            if not COLLECTION_NAME.match(name):
                raise ValueError(f"invalid collection name {name!r}")
        return {name: _collection_info(name, params) for name, params in collections.items()}
    except (
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        OverflowError,
        RecursionError,
    ) as error:
        raise UnavailableError(
            f"Qdrant metadata {where} is not valid ({type(error).__name__}: {error})",
            "the embedded Qdrant directory is damaged: restore it from a snapshot",
        ) from error


def _collection_info(name: str, params: Mapping[str, Any]) -> CollectionInfo:
    vectors = params.get("vectors")
    size = distance = None
    if isinstance(vectors, dict) and "size" in vectors:
        if not isinstance(vectors["size"], int) or isinstance(vectors["size"], bool):
            raise TypeError(f"collection {name!r} has a vector size of {vectors['size']!r}")
        size, distance = vectors["size"], vectors.get("distance")
    sparse = params.get("sparse_vectors") or {}
    return CollectionInfo(
        name=name,
        vector_size=size,
        distance=str(distance) if distance is not None else None,
        sparse_vectors=tuple(sorted(sparse)) if isinstance(sparse, dict) else (),
    )
