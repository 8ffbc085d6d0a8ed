"""The vector-store backends the conformance suite runs against: one entry per registered backend.

Each entry builds a real mem0 deployment on that backend and says how to damage, remove and
spoil its store. ``tests/store/test_vector_store_conformance.py`` runs the suite
(``tests/helpers/vector_store_suite.py``) against the entries that need no server,
``tests/pg/test_vector_store_port.py`` against every entry. ``tests/unit/test_backend_registry.py``
checks that every provider of ``memsync.stores.backends`` has an entry here.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsync import config as config_module
from memsync.config import Config
from memsync.stores.backends import vector_store_for
from memsync.stores.vector_store import VectorCapture, VectorStore
from tests.conftest import Deployment
from tests.helpers.pg import database_files


@dataclass
class Backend:
    """A live store of one backend, with the mem0 deployment that wrote it."""

    store: VectorStore
    config: Config
    deployment: Deployment
    damage: Callable[[], None]  # damage the memory collection (the store is closed first)
    remove: Callable[[], None]  # make the store absent (closed first)
    spoil: Callable[[VectorCapture], None]  # one captured point undecodable, its file sound
    live_files: Callable[[], list[Path]]  # every file holding the live store's data, flushed


def embedded_qdrant(make_deployment: Any) -> Backend:
    deployment = make_deployment(count=40)
    config = config_module.load(deployment.config, os.environ)
    store = vector_store_for(config)

    def damage() -> None:  # a truncated storage.sqlite, as a full disk or a bad copy leaves it
        path = store.collection_file(store.collection)
        with path.open("r+b") as handle:
            handle.truncate(path.stat().st_size // 2)

    def remove() -> None:
        shutil.move(store.location, store.location.with_name("moved-away"))

    def spoil(captured: VectorCapture) -> None:  # a pickle of a class qdrant-client never writes
        with sqlite3.connect(captured.copies[store.collection].dest) as connection:
            connection.execute(
                "UPDATE points SET point = ? WHERE rowid = (SELECT min(rowid) FROM points)",
                (pickle.dumps(Backend),),
            )
        connection.close()

    def live_files() -> list[Path]:
        return [store.location / relative for relative in store.files(store.location)]

    return Backend(
        store=store,
        config=config,
        deployment=deployment,
        damage=damage,
        remove=remove,
        spoil=spoil,
        live_files=live_files,
    )


def pgvector(make_deployment: Any) -> Backend:
    import psycopg

    deployment = make_deployment(count=40, pg=True)
    config = config_module.load(deployment.config, os.environ)
    store = vector_store_for(config)
    url = str(deployment.paths.pg_url)

    def damage() -> None:  # a payload that is no longer an object (a hand-written UPDATE)
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(
                "UPDATE mem0 SET payload = '\"lost\"'::jsonb WHERE id = (SELECT id FROM mem0 ORDER BY id LIMIT 1)"
            )

    def remove() -> None:  # the tables dropped (a cleanup script, a wrong database)
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("DROP TABLE IF EXISTS mem0, mem0_entities")

    def spoil(captured: VectorCapture) -> None:  # a row's payload cut, the row count intact
        path = captured.copies[store.collection].dest
        data = path.read_bytes()
        if data.startswith(b"PGCOPY\n"):  # binary: the first jsonb payload opens as an array
            at = data.index(b'\x01{"')
            path.write_bytes(data[: at + 1] + b"[" + data[at + 2 :])
            return
        lines = data.decode("utf-8").splitlines(keepends=True)
        lines[1] = lines[1].replace('"{', '"{broken', 1)
        path.write_text("".join(lines), encoding="utf-8")

    def live_files() -> list[Path]:  # the database's own files, after a CHECKPOINT
        return database_files(url)

    return Backend(
        store=store,
        config=config,
        deployment=deployment,
        damage=damage,
        remove=remove,
        spoil=spoil,
        live_files=live_files,
    )


@dataclass(frozen=True)
class Entry:
    """One backend of the table: its builder, and whether its store is a server (the pg tier)."""

    build: Callable[[Any], Backend]
    server: bool


# provider (``[mem0.vector_store] provider``, a key of ``memsync.stores.backends``): its entry
BACKENDS: dict[str, Entry] = {
    "qdrant": Entry(build=embedded_qdrant, server=False),
    "pgvector": Entry(build=pgvector, server=True),
}
