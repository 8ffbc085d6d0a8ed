"""The snapshot manifest (``manifest.json``): one typed, versioned model, parsed and serialized here only.

Fields: docs/reference/snapshot-manifest.md. Format 1 is the only one so far; a manifest of a
newer format is refused with ``ManifestTooNew`` (upgrade memsync), never half-read. Fields this
version does not know are kept (``Manifest.extra``) so that re-writing or checking a signature
never drops them. The JSON written keeps today's keys exactly (users' scripts read it).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memsync import utc
from memsync.errors import UnavailableError
from memsync.model import CaptureWindow
from memsync.stores.manifest_schema import FORMAT_VERSION, SUPPORTED_FORMATS, Invalid, validated

MANIFEST = "manifest.json"
SMALL_LIMIT = 256 * 1024 * 1024  # bytes: a manifest of a million findings stays below
_KNOWN = (
    "format",
    "id",
    "created_at",
    "mode",
    "collection",
    "versions",
    "capture",
    "files",
    "collections",
    "history",
    "integrity",
    "check",
    "scopes",
    "embedder",
    "encryption",
    "label",
    "signature",
)
SAFETY = "safety"  # the ``label.kind`` of a snapshot a command took before it changed the stores


class ManifestTooNew(UnavailableError):  # noqa: N818 - named for what the user sees
    """The manifest's format is newer than this memsync reads (exit 11; upgrade memsync)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileEntry:
    """One file of a snapshot.

    Attributes:
        path: relative to the snapshot (one of the layout's own files).
        size, sha256: of the plaintext (bytes, hex).
        stored_size, stored_sha256: of the bytes as stored (ciphertext) when encrypted, else None.
        journal_mode: the live SQLite file's journal mode at capture (``"wal"`` or
            ``"rollback"``); restore puts it back. None for other files and older manifests.
    """

    path: str
    size: int
    sha256: str
    stored_size: int | None = None
    stored_sha256: str | None = None
    journal_mode: str | None = None

    @property
    def stored(self) -> tuple[int, str]:
        """``(size, sha256)`` of the file as stored (ciphertext when encrypted)."""
        if self.stored_size is None or self.stored_sha256 is None:
            return self.size, self.sha256
        return self.stored_size, self.stored_sha256

    def to_json(self) -> dict[str, Any]:
        """The manifest's ``files[]`` object."""
        document: dict[str, Any] = {"path": self.path, "size": self.size, "sha256": self.sha256}
        if self.stored_size is not None:
            document["stored_size"], document["stored_sha256"] = (
                self.stored_size,
                self.stored_sha256,
            )
        if self.journal_mode is not None:
            document["journal_mode"] = self.journal_mode
        return document


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """A snapshot manifest (format 1). Build one with ``Manifest(...)``, read one with ``parse``/``read``.

    ``collections``, ``history``, ``integrity``, ``check`` and ``encryption`` are JSON objects
    as documented; ``scopes`` the memory counts per scope (``{"total": n, "user_id": {id: n},
    "agent_id": {...}, "run_id": {...}}``) or None in manifests older than issue 12; ``embedder``
    the embedder of the vectors (``{"provider", "dims", "model"}``) or None in older manifests;
    ``label`` why memsync took it (``{"kind": "safety", "by": "reconcile"}``: a safety snapshot,
    taken before a command changed the stores) or None (an ordinary snapshot; every manifest
    older than issue 24); ``signature`` is the HMAC-SHA256 hex or None; ``extra`` holds the fields a
    newer memsync of the same format added.
    """

    id: str
    created_at: datetime
    collection: str
    capture: CaptureWindow
    files: tuple[FileEntry, ...]
    versions: dict[str, str | None] = field(default_factory=dict)
    collections: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: dict[str, int] = field(default_factory=dict)
    integrity: dict[str, Any] = field(default_factory=dict)
    check: dict[str, Any] = field(default_factory=dict)
    encryption: dict[str, Any] | None = None
    scopes: dict[str, Any] | None = None
    embedder: dict[str, Any] | None = None
    label: dict[str, Any] | None = None
    signature: str | None = None
    mode: str = "embedded"
    quiesced: bool | None = None
    not_quiesced: str | None = None
    format: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def encrypted(self) -> bool:
        """True when the files are sealed (client-side encryption)."""
        return bool(self.encryption)

    @property
    def restores_clean(self) -> bool:
        """Whether the ``check`` field says the captured pair would restore clean.

        False when the pair had error findings, or writes its create could not settle
        (``check.unsettled``, or an ``in-flight`` finding in a manifest older than that field).
        """
        if self.check.get("errors", 0) or self.check.get("unsettled"):
            return False
        found = self.check.get("findings") or []
        return not any(isinstance(f, dict) and f.get("code") == "in-flight" for f in found)

    @property
    def safety(self) -> bool:
        """True for a labelled snapshot (``label``): taken by a command to keep what it changed.

        Such a snapshot may hold the damage its command repaired; verify reports that damage as
        expected, ``latest`` never picks it, retention keeps it ``keep_safety_days``.
        """
        return self.label is not None

    @property
    def size_bytes(self) -> int:
        """Bytes of plaintext the manifest lists."""
        return sum(entry.size for entry in self.files)

    @property
    def stored_bytes(self) -> int:
        """Bytes of the files as stored."""
        return sum(entry.stored[0] for entry in self.files)

    @property
    def points(self) -> int | None:
        """Points in the memory collection, or None when the manifest does not say."""
        value = (self.collections.get(self.collection) or {}).get("points")
        return value if isinstance(value, int) else None

    def entry(self, path: str) -> FileEntry | None:
        """The listed file at ``path``, or None."""
        return next((e for e in self.files if e.path == path), None)

    def to_json(self) -> dict[str, Any]:
        """The manifest document (what ``manifest.json`` holds). Pure."""
        window = self.capture
        document: dict[str, Any] = {
            **self.extra,
            "format": self.format,
            "id": self.id,
            "created_at": utc.iso(self.created_at),
            "mode": self.mode,
            "collection": self.collection,
            "versions": dict(self.versions),
            "capture": {
                "vectors_at": utc.iso(window.vectors_at),
                "vectors_finished_at": utc.iso(window.vectors_finished_at),
                "history_at": utc.iso(window.history_at),
                "history_finished_at": utc.iso(window.history_finished_at),
                "longest_read_s": window.longest_read_s,
                **({} if self.quiesced is None else {"quiesced": self.quiesced}),
                **({} if self.not_quiesced is None else {"not_quiesced": self.not_quiesced}),
            },
            "files": [entry.to_json() for entry in sorted(self.files, key=lambda e: e.path)],
            "collections": self.collections,
            "history": self.history,
            "integrity": self.integrity,
            "check": self.check,
            "encryption": self.encryption,
        }
        if self.scopes is not None:
            document["scopes"] = self.scopes
        if self.embedder is not None:
            document["embedder"] = self.embedder
        if self.label is not None:
            document["label"] = self.label
        if self.signature is not None:
            document["signature"] = self.signature
        return document

    def to_bytes(self) -> bytes:
        """The bytes of ``manifest.json`` (sorted keys, 2-space indent, final newline). Pure."""
        return (json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n").encode("utf-8")


def canonical(document: dict[str, Any]) -> bytes:
    """The bytes a manifest signature covers: sorted keys, no ``signature`` field. Pure."""
    unsigned = {key: value for key, value in document.items() if key != "signature"}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":")).encode("utf-8")


def sign(manifest: Manifest | dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 (hex) of the manifest's canonical bytes. Pure."""
    document = manifest.to_json() if isinstance(manifest, Manifest) else manifest
    return hmac.new(key, canonical(document), hashlib.sha256).hexdigest()


def signature_ok(manifest: Manifest | dict[str, Any], key: bytes) -> bool:
    """True when the manifest carries a valid signature for ``key``. Pure."""
    document = manifest.to_json() if isinstance(manifest, Manifest) else manifest
    stated = document.get("signature")
    return isinstance(stated, str) and hmac.compare_digest(stated, sign(document, key))


def problem(document: object, expected_id: str | None) -> str | None:
    """What makes a manifest document unusable, or None. Pure.

    Every field is checked for its type and range (``manifest_schema``): every listed path must be one
    of the snapshot layout's own files (``history.db``, ``qdrant/meta.json``,
    ``qdrant/collection/<name>/storage.sqlite``), listed once, with an integer size and a hex
    sha256; the id must be a snapshot id (and the expected one); the collection a plain name;
    timestamps UTC between 1970 and 9998. A manifest is data from disk or a bucket: nothing in it
    may name a path outside the snapshot, and nothing wrongly typed reaches the code that uses
    it. A newer format is a problem too (``parse`` raises ``ManifestTooNew`` for it instead).
    The answer is one line naming the field.
    """
    try:
        validated(document, expected_id)
    except Invalid as invalid:
        return str(invalid)
    return None


def too_new(document: object) -> int | None:
    """The format number of a manifest newer than this memsync reads, or None. Pure."""
    if isinstance(document, dict):
        stated = document.get("format")
        if type(stated) is int and stated > max(SUPPORTED_FORMATS):
            return stated
    return None


def _capture_window(capture: Any) -> CaptureWindow:
    """The validated ``capture`` section as a ``CaptureWindow`` (UTC times)."""
    return CaptureWindow(
        vectors_at=utc.parse(capture.vectors_at),
        vectors_finished_at=utc.parse(capture.vectors_finished_at),
        history_at=utc.parse(capture.history_at),
        history_finished_at=utc.parse(capture.history_finished_at),
        longest_read_s=float(capture.longest_read_s),
    )


def parse(document: object, expected_id: str | None, where: str) -> Manifest:
    """Turn a manifest document into a ``Manifest``, every field checked (see ``problem``). Pure.

    Args:
        document: the decoded JSON.
        expected_id: the snapshot's name (its directory or key prefix), or None.
        where: the manifest's location, for messages.

    Raises:
        ManifestTooNew: a newer format (exit 11, hint: upgrade memsync).
        UnavailableError: not a valid memsync manifest (exit 11; the message names the field).
    """
    newer = too_new(document)
    if newer is not None:
        raise ManifestTooNew(
            f"manifest {where} is format {newer}; this memsync reads format {max(SUPPORTED_FORMATS)} and older",
            "upgrade memsync to read this snapshot",
        )
    try:
        checked = validated(document, expected_id)
    except Invalid as invalid:
        raise UnavailableError(
            f"manifest {where} is not valid: {invalid}", "use another snapshot"
        ) from None
    assert isinstance(document, dict)  # _validated refuses anything else
    return Manifest(
        format=checked.format,
        id=checked.id,
        created_at=utc.parse(checked.created_at),
        mode=checked.mode,
        collection=checked.collection,
        versions=dict(checked.versions),
        capture=_capture_window(checked.capture),
        quiesced=checked.capture.quiesced,
        not_quiesced=checked.capture.not_quiesced,
        files=tuple(
            FileEntry(
                path=e.path,
                size=e.size,
                sha256=e.sha256,
                stored_size=e.stored_size,
                stored_sha256=e.stored_sha256,
                journal_mode=e.journal_mode,
            )
            for e in checked.files
        ),
        collections=dict(document.get("collections", {})),
        history=dict(document.get("history", {})),
        integrity=dict(document.get("integrity", {})),
        check=dict(document.get("check", {})),
        encryption=document.get("encryption"),
        scopes=document.get("scopes"),
        embedder=document.get("embedder"),
        label=document.get("label"),
        signature=checked.signature,
        extra={key: value for key, value in document.items() if key not in _KNOWN},
    )


def loads(raw: bytes, expected_id: str | None, where: str) -> Manifest:
    """Decode and parse manifest bytes. Pure.

    Raises:
        ManifestTooNew: a newer format.
        UnavailableError: not JSON, or not a valid memsync manifest.
    """
    try:
        document = decode(raw)
    except ValueError as error:
        raise UnavailableError(
            f"manifest {where} is not valid: not JSON ({error})", "use another snapshot"
        ) from None
    return parse(document, expected_id, where)


def decode(raw: bytes | str) -> Any:
    """Decode JSON from disk or a bucket. Pure.

    Raises:
        ValueError: not JSON, not UTF-8, or nested too deeply for Python (``RecursionError``).
    """
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read(directory: Path) -> Manifest:
    """Read ``manifest.json`` of a snapshot directory. Reads only.

    Raises:
        ManifestTooNew: a newer format (upgrade memsync).
        UnavailableError: it is missing, unreadable or not a memsync manifest.
    """
    path = directory / MANIFEST
    try:
        raw = read_small(path)
    except FileNotFoundError:
        raise UnavailableError(
            f"snapshot {directory} has no {MANIFEST}", "it is incomplete"
        ) from None
    except OSError as error:
        raise UnavailableError(f"manifest {path} is unreadable: {error}") from error
    return loads(raw, directory.name, str(path))


def read_small(path: Path) -> bytes:
    """The bytes of a small regular file of a snapshot (manifest, ``verified.json``). Reads only.

    A symbolic link, a FIFO or a device is not read (``/dev/zero`` would never end), nor a file
    above ``SMALL_LIMIT`` bytes.

    Raises:
        FileNotFoundError: it is absent.
        OSError: unreadable, a link, not a regular file, or too large.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > SMALL_LIMIT:
            raise OSError(errno.EINVAL, "not a regular file of a sensible size", str(path))
        return handle.read(SMALL_LIMIT + 1)
