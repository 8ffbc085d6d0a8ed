"""A PostgreSQL 16 with pgvector 0.6 for the demo and the tests (the ``pgserver`` wheel).

``pgserver.get_server(directory)`` runs initdb on first use and starts the server on a Unix
socket in ``directory`` (as root too); ``CREATE EXTENSION vector`` then gives pgvector 0.6.2.
With ``MEMSYNC_TEST_PG_URL`` set, that server is used instead and nothing is started. Each
deployment gets a database of its own (``fresh_database``), so deployments never share tables.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

URL_VARIABLE = "MEMSYNC_TEST_PG_URL"


def start(directory: Path) -> tuple[str, Any]:
    """Start (or reuse) a server; return its conninfo and a handle to stop it (None: external).

    ``directory`` holds the data directory and the socket; a path short enough for a Unix
    socket (under 100 bytes) is the caller's to choose.
    """
    external = os.environ.get(URL_VARIABLE)
    if external:
        return external, None
    with warnings.catch_warnings():  # platformdirs: root's session has no XDG_RUNTIME_DIR
        warnings.simplefilter("ignore", UserWarning)
        import pgserver

        server = pgserver.get_server(directory, cleanup_mode="stop")
    return str(server.get_uri()), server


def fresh_database(url: str, name: str) -> str:
    """Create database ``name`` (dropped first if a former run left it) with pgvector; its conninfo."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"not a simple database name: {name!r}")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = conninfo_to_dict(url)
    parts["dbname"] = name
    database = make_conninfo("", **parts)
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return database


def stop(server: Any) -> None:
    """Stop a server ``start`` started (None: an external one, left running)."""
    if server is not None:
        server.cleanup()
