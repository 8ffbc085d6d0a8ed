"""An embedded Qdrant store's ``meta.json`` as the app's own qdrant-client loads it.

Run in the app's interpreter by the one-shot writer (``mode`` ``meta``): qdrant-client's local
mode builds each collection of ``meta.json`` with ``rest_models.CreateCollection(**config)``
when it opens the store, and a key it does not know fails the whole open ("Extra inputs are not
permitted"). A newer qdrant-client writes keys an older one does not know (1.20:
``id_tracker``, ``payload``, ``vectors.<name>.memory``, ``metadata``; all null unless set).

``inspect`` says, per collection, which keys the app's qdrant-client refuses; ``repair``
rewrites the file without them when every such key is null (a null key means "unset", so the
meaning stays), keeping the old file beside it. Anything else is refused, never guessed.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import os
import pickle
import time
from importlib import metadata
from typing import Any

META_FILE = "meta.json"


def _client_version() -> str | None:
    try:
        return metadata.version("qdrant-client")
    except metadata.PackageNotFoundError:
        return None


def _refused(config: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """``(extra key paths, other problems)`` of one collection's config for this qdrant-client."""
    from qdrant_client.http import models as rest_models

    try:
        from qdrant_client.local import qdrant_local

        deprecated = getattr(qdrant_local, "deprecated_config_fields", ())
    except ImportError:  # pragma: no cover - every qdrant-client with local mode has it
        deprecated = ()
    config = {k: v for k, v in config.items() if k not in deprecated}
    try:
        rest_models.CreateCollection(**config)
    except Exception as error:  # noqa: BLE001 - pydantic's ValidationError, any version
        errors = error.errors() if hasattr(error, "errors") else []
        extra = [tuple(e.get("loc", ())) for e in errors if e.get("type") == "extra_forbidden"]
        other = [
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
            for e in errors
            if e.get("type") != "extra_forbidden"
        ] or ([] if extra else [f"{type(error).__name__}: {error}"])
        return extra, other
    return [], []


def _remove_null(config: dict[str, Any], loc: tuple[Any, ...]) -> str | None:
    """Remove the null key ``loc`` names (union tags in ``loc`` are skipped); its path, or None.

    None: the key is not there, or not null (a value the app's qdrant-client cannot take).
    """
    node: Any = config
    path = []
    for part in loc[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
            path.append(str(part))
    key = loc[-1] if loc else None
    if not isinstance(node, dict) or key not in node or node[key] is not None:
        return None
    del node[key]
    return ".".join([*path, str(key)])


def _cleaned(config: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """The config without the null keys this qdrant-client refuses; removed and left problems."""
    config = copy.deepcopy(config)
    removed: list[str] = []
    for _ in range(64):  # one pass per nesting level at most; bounded for safety
        extra, other = _refused(config)
        if not extra:  # valid, or refused for another reason than an unknown key
            return config, removed, other
        # Unknown keys first: a union's other members also fail meanwhile (pydantic lists
        # every member), which says nothing once the unknown keys are gone.
        progress = False
        for loc in extra:
            gone = _remove_null(config, loc)
            if gone is not None:
                removed.append(gone)
                progress = True
        if not progress:
            return config, removed, [f"{'.'.join(map(str, loc))}: not null" for loc in extra]
    return config, removed, ["meta.json: too deeply nested"]


def inspect(path: str) -> dict[str, Any]:
    """What the app's qdrant-client says of ``<path>/meta.json``. Reads only.

    Returns ``{"qdrant_client", "path", "loads", "collections": {name: {"refused": [...],
    "problems": [...], "repairable": bool}}}``.
    """
    meta_path = os.path.join(path, META_FILE)
    with open(meta_path, encoding="utf-8") as handle:
        meta = json.load(handle)
    collections: dict[str, Any] = {}
    for name, config in (meta.get("collections") or {}).items():
        _, removed, problems = _cleaned(dict(config))
        if removed or problems:
            collections[name] = {
                "refused": removed, "problems": problems, "repairable": not problems,
            }  # fmt: skip
    return {
        "qdrant_client": _client_version(),
        "path": meta_path,
        "loads": not collections,
        "collections": collections,
    }


def repair(path: str) -> dict[str, Any]:
    """Rewrite ``<path>/meta.json`` without the null keys the app's qdrant-client refuses.

    The old file is kept as ``meta.json.memsync-<unix time>``; the new one replaces it
    atomically. Returns ``inspect``'s document plus ``repaired`` and ``kept``. Does nothing
    (``repaired`` False) when the file loads, or when a refused key is not null.
    """
    found = inspect(path)
    if found["loads"] or not all(c["repairable"] for c in found["collections"].values()):
        return {**found, "repaired": False, "kept": None}
    meta_path = found["path"]
    with open(meta_path, encoding="utf-8") as handle:
        meta = json.load(handle)
    for name in found["collections"]:
        meta["collections"][name], _, _ = _cleaned(dict(meta["collections"][name]))
    kept = f"{meta_path}.memsync-{int(time.time())}"
    partial = f"{meta_path}.memsync-partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(meta, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.link(meta_path, kept)  # the old file stays, under another name
    os.replace(partial, meta_path)
    after = inspect(path)
    return {**after, "repaired": after["loads"], "kept": kept, "removed": found["collections"]}


ROWS_NAMED = 20  # rows named per collection; the count is always whole
BATCH_ROWS = 500  # rows per read of the live file


def undecodable(path: str) -> dict[str, Any]:
    """The rows of each collection's ``storage.sqlite`` the app's qdrant-client cannot load.

    qdrant-client's local mode unpickles every row when it opens the store
    (``local/persistence.py: load``), and one row it cannot load (pickled by another
    qdrant-client or pydantic) stops the whole open. This loads each row the same way, in the
    app's interpreter, and reads its ``id``, ``vector`` and ``payload``. Reads only (a read-only
    connection per file).

    Returns:
        ``{collection: {"rows": checked, "undecodable": count, "named": [{"rowid", "id",
        "error"}, ...] (the first ROWS_NAMED)}}``; a file that cannot be read has ``"error"``.
    """
    import sqlite3

    found: dict[str, Any] = {}
    root = os.path.join(path, "collection")
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        storage = os.path.join(root, name, "storage.sqlite")
        if not os.path.isfile(storage) or os.path.getsize(storage) == 0:
            continue
        rows = failed = 0
        named: list[dict[str, Any]] = []
        try:
            connection = sqlite3.connect(f"file:{storage}?mode=ro", uri=True, timeout=5.0)
            try:
                for rowid, key, value in _rows(connection):
                    rows += 1
                    try:
                        point = pickle.loads(value)  # noqa: S301 - what qdrant-client does
                        point.id, point.vector, point.payload  # noqa: B018 - what load reads
                    except Exception as error:  # noqa: BLE001 - any failure stops the app's open
                        failed += 1
                        if len(named) < ROWS_NAMED:
                            named.append(
                                {"rowid": rowid, "id": _key_id(key),
                                 "error": f"{type(error).__name__}: {error}"[:300]}
                            )  # fmt: skip
            finally:
                connection.close()
        except sqlite3.Error as error:
            found[name] = {"error": f"{type(error).__name__}: {error}"}
            if os.path.exists(f"{storage}-journal"):  # a writer killed mid-write: not a format
                found[name]["error"] += (
                    " (a hot journal a crashed writer left; a writer rolls it back)"
                )
            continue
        found[name] = {"rows": rows, "undecodable": failed, "named": named}
    return found


def _rows(connection: Any) -> Any:
    """Every row of ``points`` in rowid order, ``BATCH_ROWS`` at a time.

    Each batch is its own short read (autocommit), so a writer of the live file never waits on
    the whole scan.
    """
    last = -(2**63)
    while True:
        batch = connection.execute(
            "SELECT rowid, id, point FROM points WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, BATCH_ROWS),
        ).fetchall()
        if not batch:
            return
        yield from batch
        last = batch[-1][0]


class _KeyUnpickler(pickle.Unpickler):
    """A row key holds a pickled str or int: no class is loaded."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        raise pickle.UnpicklingError(f"a class in a row key: {module}.{name}")


def _key_id(key: Any) -> str:
    """A row key's point id (base64 of a pickled str or int), or the key itself."""
    try:
        point_id = _KeyUnpickler(io.BytesIO(base64.b64decode(key))).load()
    except Exception:  # noqa: BLE001 - an unreadable key is named as stored
        return str(key)
    return str(point_id) if isinstance(point_id, (str, int)) else str(key)
