"""The strict schema of manifest format 1: what every field of ``manifest.json`` may hold. Pure.

``validated`` is the one check: every field's type and range (pydantic, strict: no coercion, a
bool is not an int), snapshot ids, and the snapshot layout of every listed path. Anything it
refuses is one line naming the field (``Invalid``). ``memsync.stores.manifest`` builds the typed
``Manifest`` from what passes; nothing else reads a manifest document.
"""

from __future__ import annotations

import re
import reprlib
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from memsync import utc

FORMAT_VERSION = 1
SUPPORTED_FORMATS = frozenset({1})
ID_PATTERN = re.compile(r"^(\d{8}T\d{6}Z)(?:-(\d+))?\Z")  # \Z: "$" would take a final newline
_NAME = r"(?!\.{1,2}(?:/|\Z))[A-Za-z0-9_.-]{1,255}"
_COLLECTION = re.compile(_NAME + r"\Z")
_LAYOUT = re.compile(  # embedded Qdrant's files, or a pgvector export's (since issue 13)
    rf"(history\.db|qdrant/meta\.json|qdrant/collection/{_NAME}/storage\.sqlite"
    rf"|pgvector/schema\.json|pgvector/{_NAME}\.(?:csv|pgcopy))\Z"
)
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_EARLIEST, _LATEST = datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC)


class Invalid(ValueError):
    """One line: what keeps a document from being a manifest (the field first)."""


def _timestamp(text: str) -> str:
    try:
        moment = utc.parse(text)
    except (ValueError, OverflowError):  # an offset can carry year 9999 past the range
        raise ValueError("not a UTC timestamp") from None
    if not _EARLIEST <= moment < _LATEST:
        raise ValueError("not a UTC timestamp between 1970 and 9998")
    return text


def _matching(pattern: re.Pattern[str], what: str) -> AfterValidator:
    def check(text: str) -> str:
        if not pattern.match(text):
            raise ValueError(what)
        return text

    return AfterValidator(check)


_Timestamp = Annotated[StrictStr, AfterValidator(_timestamp)]
_Count = Annotated[StrictInt, Field(ge=0, lt=2**63)]
_Sha256 = Annotated[StrictStr, _matching(_SHA256, "not a lowercase hex sha256")]
_Name = Annotated[StrictStr, _matching(_COLLECTION, "not a collection name ([A-Za-z0-9_.-])")]
_Path = Annotated[StrictStr, _matching(_LAYOUT, "not part of the snapshot layout")]
_STRICT = ConfigDict(strict=True, extra="ignore", frozen=True)
_OPEN = ConfigDict(strict=True, extra="allow", frozen=True)  # fields a newer memsync adds


class _File(BaseModel):
    model_config = _STRICT
    path: _Path
    size: _Count
    sha256: _Sha256
    stored_size: _Count | None = None
    stored_sha256: _Sha256 | None = None
    journal_mode: Literal["wal", "rollback"] | None = None  # SQLite files since issue 11

    @model_validator(mode="after")
    def _both_or_neither(self) -> _File:
        if (self.stored_size is None) != (self.stored_sha256 is None):
            raise ValueError("stored_size and stored_sha256 go together")
        return self


class _Capture(BaseModel):
    model_config = _STRICT
    vectors_at: _Timestamp
    vectors_finished_at: _Timestamp
    history_at: _Timestamp
    history_finished_at: _Timestamp
    longest_read_s: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] = 0.0
    quiesced: StrictBool | None = None  # since issue 10: app writes paused by the agent
    # since issue 23: why an agent's pause did not hold every app write (quiesced false)
    not_quiesced: Annotated[StrictStr, Field(max_length=2000)] | None = None


class _Collection(BaseModel):
    model_config = _OPEN
    vector_size: Annotated[StrictInt, Field(ge=1, le=65536)] | None = None
    distance: StrictStr | None = None
    points: _Count | None = None


class _Check(BaseModel):
    model_config = _OPEN
    points: _Count | None = None
    history_memories: _Count | None = None
    errors: _Count | None = None
    warnings: _Count | None = None
    infos: _Count | None = None
    findings: list[dict[str, Any]] | None = None
    unsettled: list[StrictStr] | None = None


class _Scopes(BaseModel):
    """Memory counts per scope (since issue 12; the tripwire compares them)."""

    model_config = _OPEN
    total: _Count
    user_id: dict[StrictStr, _Count] = Field(default_factory=dict)
    agent_id: dict[StrictStr, _Count] = Field(default_factory=dict)
    run_id: dict[StrictStr, _Count] = Field(default_factory=dict)


class _Embedder(BaseModel):
    """The embedder of the snapshot's vectors (since issue 14; restore compares it)."""

    model_config = _OPEN
    provider: StrictStr
    dims: Annotated[StrictInt, Field(gt=0)]
    model: StrictStr | None = None


class _Label(BaseModel):
    """Why memsync took the snapshot, when not on schedule or by hand (since issue 24)."""

    model_config = _OPEN
    kind: Annotated[StrictStr, Field(min_length=1, max_length=64)]  # "safety"
    by: Annotated[StrictStr, Field(max_length=200)] | None = None  # the command that took it


class _Encryption(BaseModel):
    model_config = _OPEN
    algorithm: StrictStr


class _Document(BaseModel):
    """The format-1 document, every field typed (strict: no coercion, a bool is not an int)."""

    model_config = _OPEN
    format: StrictInt
    id: StrictStr
    created_at: _Timestamp
    mode: StrictStr = "embedded"
    collection: _Name
    versions: dict[StrictStr, StrictStr | None] = Field(default_factory=dict)
    capture: _Capture
    files: Annotated[list[_File], Field(min_length=1)]
    collections: dict[_Name, _Collection] = Field(default_factory=dict)
    history: dict[StrictStr, _Count] = Field(default_factory=dict)
    integrity: dict[StrictStr, Any] = Field(default_factory=dict)
    check: _Check = Field(default_factory=_Check)
    scopes: _Scopes | None = None
    embedder: _Embedder | None = None
    encryption: _Encryption | None = None
    label: _Label | None = None
    signature: _Sha256 | None = None


def validated(document: object, expected_id: str | None) -> _Document:
    """The checked document. Pure. Raises ``_Invalid`` (one line, naming the field)."""
    if not isinstance(document, dict) or type(document.get("format")) is not int:
        raise Invalid(f"not a memsync manifest (format {FORMAT_VERSION})")
    if document["format"] not in SUPPORTED_FORMATS:
        raise Invalid(f"not a memsync manifest (format {FORMAT_VERSION})")
    snapshot_id = document.get("id")
    if not isinstance(snapshot_id, str) or not valid_id(snapshot_id):
        raise Invalid(f"invalid snapshot id {shown(snapshot_id)}")
    if expected_id is not None and snapshot_id != expected_id.split(".", 1)[0]:
        # the name is id, id.partial or id.purging
        raise Invalid(f"its id {snapshot_id!r} is not the snapshot's name {expected_id!r}")
    try:
        checked = _Document.model_validate(document)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "manifest"
        why = re.sub(r" or instance of _\w+", "", str(first["msg"]).removeprefix("Value error, "))
        if first["loc"][:1] == ("files",) and first["loc"][-1:] == ("path",):
            why = "is not part of the snapshot layout"
        raise Invalid(f"{field}: {why} (got {shown(first.get('input'))})") from None
    paths = [entry.path for entry in checked.files]
    if len(set(paths)) != len(paths):
        raise Invalid("files: a file path is not part of the snapshot layout (listed twice)")
    return checked


def shown(value: object) -> str:
    """A short one-line ``repr`` of a value from a document."""
    return reprlib.repr(value)


def id_time(snapshot_id: str) -> datetime:
    """The UTC time a snapshot id encodes. Pure. Raises ValueError for a malformed id."""
    match = ID_PATTERN.match(snapshot_id)
    if not match:
        raise ValueError(f"not a snapshot id: {snapshot_id!r}")
    return datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def valid_id(snapshot_id: str) -> bool:
    """True when ``snapshot_id`` is a snapshot id naming a real time. Pure."""
    try:
        id_time(snapshot_id)
    except ValueError:
        return False
    return True
