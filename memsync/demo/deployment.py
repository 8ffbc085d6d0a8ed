"""Build real mem0 deployments offline, and damage them the way the field does.

Used by the demo (``python -m memsync.demo``), the tests and the benchmarks. Everything goes
through mem0's own API (mem0ai 2.2.1) with the offline providers of ``memsync.demo.providers``;
the faults reproduce the drift mem0ai 2.2.1 really causes: a history write failing during
delete/add/update (SQLite "database is locked"), an older Qdrant copy put back over a newer
history.db, history rows deleted by hand, and the Qdrant directory wiped as a reboot wipes tmpfs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

USERS = ("alice", "bob", "chandra", "dmitri", "eun-ji")
AGENTS = ("travel-agent", "support-bot", "coach")
TOPICS = (
    "prefers {} tea in the morning", "is allergic to {}", "lives near the {} station",
    "is learning {} on weekends", "has a cat named {}", "works on the {} project",
    "wants reminders about {}", "travels to {} every spring", "reads books about {}",
    "uses {} as a password manager", "plays {} on Thursdays", "dislikes {} music",
)  # fmt: skip
WORDS = (
    "green", "peanuts", "central", "Portuguese", "Miso", "atlas", "dentist visits", "Lisbon",
    "astronomy", "Bitwarden", "badminton", "loud", "jasmine", "shellfish", "harbour", "Korean",
    "Pixel", "orion", "invoices", "Kyoto", "mycology", "KeePassXC", "chess", "techno",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Paths:
    """Where a built deployment lives (all under ``root``).

    ``pg_url``: a PostgreSQL conninfo (``memsync.demo.postgres``) for a deployment laid out as
    mem0's REST server runs it (pgvector tables + history.db); None for embedded Qdrant.
    """

    root: Path
    pg_url: str | None = None

    @classmethod
    def at(cls, root: Path) -> Paths:
        """The deployment built at ``root``: on pgvector when ``<root>/pg-url`` exists. Reads only."""
        secret = root / "pg-url"
        pg_url = secret.read_text(encoding="utf-8").strip() if secret.is_file() else None
        return cls(root, pg_url=pg_url)

    @property
    def qdrant(self) -> Path:
        """The embedded Qdrant directory."""
        return self.root / "qdrant"

    @property
    def history_db(self) -> Path:
        """mem0's history.db."""
        return self.root / "mem0" / "history.db"

    @property
    def mem0_dir(self) -> Path:
        """MEM0_DIR."""
        return self.root / "mem0"

    @property
    def state(self) -> Path:
        """Memsync's state directory."""
        return self.root / "memsync-state"

    @property
    def config(self) -> Path:
        """Memsync's config file."""
        return self.root / "memsync.toml"


def mem0_config(paths: Paths, embedder: str = "memsync_minilm", dims: int = 384) -> dict[str, Any]:
    """The dict an app would pass to ``mem0.Memory.from_config`` for this deployment."""
    store: dict[str, Any] = {
        "provider": "qdrant",
        "config": {
            "collection_name": "mem0",
            "path": str(paths.qdrant),
            "embedding_model_dims": dims,
            "on_disk": True,
        },
    }
    if paths.pg_url is not None:  # mem0's REST server layout (mem0ai 2.2.1 PGVectorConfig)
        store = {
            "provider": "pgvector",
            "config": {
                "collection_name": "mem0",
                "connection_string": paths.pg_url,
                "embedding_model_dims": dims,
            },
        }
    return {
        "vector_store": store,
        "embedder": {"provider": embedder},
        "llm": {"provider": "memsync_echo"},
        "history_db_path": str(paths.history_db),
    }


def vector_store_toml(root: Path, qdrant: Path, pg_url: str | None, dims: int) -> str:
    """A memsync config's ``[mem0.vector_store]`` tables: embedded Qdrant at ``qdrant``, or pgvector.

    With ``pg_url`` the connection string goes in ``root/pg-url`` (mode 0600) and the config
    names it as a secret file, as a real deployment keeps its password out of the config.
    """
    if pg_url is None:
        return f"""[mem0.vector_store]
provider = "qdrant"

[mem0.vector_store.config]
collection_name = "mem0"
path = "{qdrant}"
embedding_model_dims = {dims}
on_disk = true"""
    root.mkdir(parents=True, exist_ok=True)
    secret = root / "pg-url"
    secret.write_text(pg_url + "\n", encoding="utf-8")
    secret.chmod(0o600)
    return f"""[mem0.vector_store]
provider = "pgvector"

[mem0.vector_store.config]
collection_name = "mem0"
connection_string = {{file = "{secret}"}}
embedding_model_dims = {dims}"""


def app_table(python: str = sys.executable) -> str:
    """``[app] python`` for the configs a user reads (the demo's).

    The tests' configs keep the older top-level ``app_python``, free to append an ``[app]``.
    """
    return f'\n[app]\npython = "{python}"\n'


def write_memsync_config(
    paths: Paths,
    embedder: str = "memsync_minilm",
    dims: int = 384,
    extra: str = "",
    in_flight_margin_s: float | None = None,
    app_python: str | None = sys.executable,
) -> Path:
    """Write a memsync TOML config for the deployment at ``paths``; return its path.

    The vector store's tables come from ``vector_store_toml`` (pgvector: a secret file);
    ``in_flight_margin_s`` sets ``[check] in_flight_margin_s`` (the tests' shorter wait);
    ``app_python`` sets ``[app] python``: the demo's app runs with this interpreter, so
    memsync's writes do too (None: left out, memsync learns it or refuses writes).
    """
    interpreter = "" if app_python is None else f'app_python = "{app_python}"\n'  # = [app] python
    store = vector_store_toml(paths.root, paths.qdrant, paths.pg_url, dims)
    check = (
        ""
        if in_flight_margin_s is None
        else f"[check]\nin_flight_margin_s = {in_flight_margin_s}\n\n"
    )
    text = f"""# memsync config of a demo deployment (generated)
mem0_dir = "{paths.mem0_dir}"
state_dir = "{paths.state}"
plugins = ["memsync.demo.providers"]
{interpreter}
[mem0]
history_db_path = "{paths.history_db}"

{store}

[mem0.embedder]
provider = "{embedder}"

[mem0.llm]
provider = "memsync_echo"

{check}[snapshot]
directory = "{paths.root / "snapshots"}"
keep_last = 3
{extra}"""
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.config.write_text(text, encoding="utf-8")
    return paths.config


def open_memory(paths: Paths, embedder: str = "memsync_minilm", dims: int = 384) -> Any:
    """Build ``mem0.Memory`` for the deployment (as the app would). Holds Qdrant's lock.

    Sets ``MEM0_DIR`` (mem0 writes ``$MEM0_DIR/config.json`` on import) and turns telemetry
    off (it would open a second embedded Qdrant and try the network).
    """
    paths.mem0_dir.mkdir(parents=True, exist_ok=True)
    os.environ["MEM0_DIR"] = str(paths.mem0_dir)
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    # mem0 warns at every start that optional NLP packages (spaCy, fastembed) are absent.
    logging.getLogger("mem0").setLevel(logging.ERROR)
    from mem0 import Memory

    import memsync.demo.providers  # noqa: F401 - registers the offline providers

    return Memory.from_config(mem0_config(paths, embedder, dims))


def close_memory(memory: Any) -> None:
    """Release the Memory's SQLite connection and Qdrant's lock (as an app stopping would)."""
    memory.close()
    with contextlib.suppress(Exception):
        memory.vector_store.client.close()  # embedded Qdrant
    with contextlib.suppress(Exception):
        memory.vector_store.connection_pool.close()  # pgvector (mem0ai 2.2.1 psycopg pool)


def fact(rng: random.Random) -> str:
    """A random, plausible memory text."""
    return rng.choice(TOPICS).format(rng.choice(WORDS)) + f" (note {rng.randrange(10**6)})"


@dataclass(slots=True)
class Seeded:
    """What ``seed`` did: ids of live, deleted and updated memories, with scopes."""

    live: list[str]
    deleted: list[str]
    updated: list[str]
    expired: list[str]


def seed(
    memory: Any,
    count: int,
    *,
    rng_seed: int = 7,
    batch: int = 20,
    today: date | None = None,
    progress: Any = None,
) -> Seeded:
    """Add ``count`` memories through mem0 across users and agents, then update and delete some.

    Mixes mem0's two add paths (``infer=True`` in batches through the echo LLM, which also
    fills the ``messages`` table; ``infer=False`` one by one), metadata, expiration dates in
    the past and future, then updates ~10% and deletes ~5% through the API.
    """
    rng = random.Random(rng_seed)
    today = today or datetime.now(UTC).date()
    live: list[str] = []
    expired: list[str] = []
    added = 0
    while added < count:
        user = rng.choice(USERS)
        agent = rng.choice((None, *AGENTS))
        scope: dict[str, Any] = {"user_id": user}
        if agent:
            scope["agent_id"] = agent
        if rng.random() < 0.7:
            size = min(batch, count - added)
            messages = [{"role": "user", "content": fact(rng)} for _ in range(size)]
            result = memory.add(
                messages,
                metadata={"source": "chat", "channel": rng.choice(("web", "sms"))},
                infer=True,
                **scope,
            )
        else:
            expires = None
            roll = rng.random()
            if roll < 0.25:
                expires = (today + timedelta(days=rng.randrange(30, 400))).isoformat()
            elif roll < 0.40:
                expires = (today - timedelta(days=rng.randrange(1, 60))).isoformat()
            result = memory.add(
                fact(rng),
                metadata={"source": rng.choice(("tool", "import"))},
                infer=False,
                expiration_date=expires,
                **scope,
            )
            if expires and expires < today.isoformat():
                expired += [item["id"] for item in result["results"]]
        ids = [item["id"] for item in result["results"]]
        live += ids
        added += len(ids) if ids else 1
        if progress is not None:
            progress(min(added, count), count)
    updated = rng.sample(live, k=len(live) // 10)
    for memory_id in updated:
        memory.update(memory_id, fact(rng))
    deleted = rng.sample(
        [m for m in live if m not in updated and m not in expired], k=len(live) // 20
    )
    for memory_id in deleted:
        memory.delete(memory_id)
    live = [m for m in live if m not in set(deleted)]
    return Seeded(live=live, deleted=deleted, updated=updated, expired=expired)


# --- faults, as the field produces them ------------------------------------------------------


@contextlib.contextmanager
def history_locked(memory: Any, history_db: Path, wait_ms: int = 200) -> Iterator[None]:
    """Hold an exclusive lock on history.db, so mem0's next history write fails.

    Another connection takes ``BEGIN EXCLUSIVE`` (as a long backup or a second writer would);
    mem0's own connection gets a short busy timeout (``PRAGMA busy_timeout``) so its write
    fails with SQLite's real "database is locked" after ``wait_ms`` instead of mem0's 5 s.
    """
    memory.db.connection.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
    blocker = sqlite3.connect(history_db, timeout=1.0, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        memory.db.connection.execute("PRAGMA busy_timeout = 5000")


def point_ids(memory: Any) -> set[str]:
    """Every point id of the memory collection, through mem0's own vector store (any provider)."""
    store = memory.vector_store
    if hasattr(store, "client"):  # embedded Qdrant: scroll
        return {str(point.id) for point in store.client.scroll("mem0", limit=100000)[0]}
    return {str(item.id) for item in store.list(top_k=100000)[0]}  # pgvector (mem0ai 2.2.1)


def delete_with_failing_history(memory: Any, paths: Paths, memory_id: str) -> str:
    """``memory.delete`` while history.db is locked: the point goes, history still says live."""
    with history_locked(memory, paths.history_db), contextlib.suppress(sqlite3.OperationalError):
        memory.delete(memory_id)
    return memory_id


def add_with_failing_history(memory: Any, paths: Paths, text: str, user_id: str) -> str:
    """``memory.add(infer=False)`` while history.db is locked: a point with no ADD event."""
    before = point_ids(memory)
    with history_locked(memory, paths.history_db), contextlib.suppress(sqlite3.OperationalError):
        memory.add(text, user_id=user_id, infer=False)
    after = point_ids(memory)
    (new_id,) = after - before
    return str(new_id)


def update_with_failing_history(memory: Any, paths: Paths, memory_id: str, text: str) -> str:
    """``memory.update`` while history.db is locked: new text in the point, old in history."""
    with history_locked(memory, paths.history_db), contextlib.suppress(sqlite3.OperationalError):
        memory.update(memory_id, text)
    return memory_id


def copy_qdrant(paths: Paths, dest: Path) -> Path:
    """Copy the (closed) embedded Qdrant directory aside, as an hourly file backup would."""
    shutil.copytree(paths.qdrant, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest


def put_back_qdrant(paths: Paths, older: Path) -> None:
    """Replace the Qdrant directory with an older copy (a restore of one store only)."""
    shutil.rmtree(paths.qdrant)
    shutil.copytree(older, paths.qdrant)


def delete_history_rows(paths: Paths, memory_id: str) -> int:
    """Delete a memory's history rows by hand, as someone "deleting" a memory in SQL would."""
    with contextlib.closing(sqlite3.connect(paths.history_db)) as connection, connection:
        return connection.execute("DELETE FROM history WHERE memory_id = ?", (memory_id,)).rowcount


def wipe_qdrant(paths: Paths) -> None:
    """Remove the embedded Qdrant directory, as a reboot wipes a tmpfs /tmp."""
    shutil.rmtree(paths.qdrant)
