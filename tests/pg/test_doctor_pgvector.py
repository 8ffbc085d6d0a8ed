"""doctor on a pgvector deployment: every pg-* condition produced for real on PostgreSQL."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from memsync.stores.pgvector.doctor import IDLE_IN_TRANSACTION_S, RESULT_CODES

# Results only an embedded Qdrant deployment can have (its files, its lock, its telemetry store)
EMBEDDED_ONLY = {"store-lock", "private-tmp-mismatch", "collection-params", "legacy-point-store"}
QDRANT_FILE_WORDS = (
    "Qdrant directory",
    "storage.sqlite",
    "meta.json",
    "migrations_qdrant",
    ".lock",
)


def results_of(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [r for r in report["results"] if r["code"] == code]


def only(report: dict[str, Any], code: str) -> dict[str, Any]:
    found = results_of(report, code)
    assert len(found) == 1, (code, found)
    return found[0]


def set_store_key(config: Path, line_pattern: str, replacement: str) -> None:
    """Replace one line of the memsync config's ``[mem0.vector_store.config]``."""
    text, count = re.subn(line_pattern, replacement, config.read_text(), flags=re.MULTILINE)
    assert count == 1, line_pattern
    config.write_text(text)


def set_history_path(config: Path, path: Path) -> None:
    set_store_key(config, r'^history_db_path = ".*"$', f'history_db_path = "{path}"')


def test_doctor_reports_a_healthy_pgvector_deployment_and_no_qdrant_file(pg_deployment, cli):
    result = cli("doctor", "--json", config=pg_deployment.config)
    report = result.json()
    assert result.code == 0, result.out + result.err
    codes = {r["code"] for r in report["results"]}
    assert set(RESULT_CODES) <= codes
    pg = [r for r in report["results"] if r["code"].startswith("pg-")]
    assert all(r["status"] == "ok" for r in pg), pg
    assert only(report, "pg-server")["message"].startswith("PostgreSQL 16.")
    assert re.search(r"pgvector 0\.\d+\.\d+ installed", only(report, "pg-extension")["message"])
    table = only(report, "pg-table")
    size = int(re.search(r"(\d+) bytes", table["message"]).group(1))
    assert size > 8192 and table["path"].endswith("table mem0")
    assert only(report, "pg-index")["message"] == "index mem0_hnsw_idx USING hnsw"
    assert "vector(384)" in only(report, "pg-dimension")["message"]
    assert "server is local" in only(report, "pg-ssl")["message"]
    assert not codes & EMBEDDED_ONLY
    for entry in report["results"]:
        text = f"{entry['path']} {entry['message']}"
        assert not any(word in text for word in QDRANT_FILE_WORDS), entry
    assert only(report, "sqlite-integrity")["path"] == str(pg_deployment.paths.history_db)
    assert "(history.db; the tables' export" in only(report, "capture-duration")["message"]


def test_vacuumed_table_reports_its_row_estimate(pg_deployment, cli):
    with psycopg.connect(pg_deployment.paths.pg_url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE mem0")
        rows = connection.execute("SELECT count(*) FROM mem0").fetchone()[0]
    report = cli("doctor", "--json", config=pg_deployment.config).json()
    assert f"about {rows} rows (estimate)" in only(report, "pg-table")["message"]


def test_a_dropped_hnsw_index_is_a_warning_whose_fix_rebuilds_it(pg_deployment, cli):
    with psycopg.connect(pg_deployment.paths.pg_url, autocommit=True) as connection:
        connection.execute("DROP INDEX mem0_hnsw_idx")
    result = cli("doctor", "--json", config=pg_deployment.config)
    index = only(result.json(), "pg-index")
    assert result.code == 0  # a slower search, not a broken store
    assert index["status"] == "warning" and "sequential scan" in index["message"]
    ddl = index["fix"].split("or: ", 1)[1]
    with psycopg.connect(pg_deployment.paths.pg_url, autocommit=True) as connection:
        connection.execute(ddl)  # the fix as printed is valid SQL
    assert (
        only(cli("doctor", "--json", config=pg_deployment.config).json(), "pg-index")["status"]
        == "ok"
    )


@pytest.mark.parametrize(
    ("line_pattern", "replacement", "key"),
    [
        (
            r"^embedding_model_dims = 384$",
            "embedding_model_dims = 256",
            "mem0.vector_store.config.embedding_model_dims = 256",
        ),
        (
            r'^provider = "memsync_hash"$',
            'provider = "memsync_hash"\n\n[mem0.embedder.config]\nembedding_dims = 128',
            "mem0.embedder.config.embedding_dims = 128",
        ),
    ],
)
def test_a_column_of_another_dimension_is_an_error(
    pg_deployment, cli, line_pattern, replacement, key
):
    pg_deployment.close()
    set_store_key(pg_deployment.config, line_pattern, replacement)
    result = cli("doctor", "--json", config=pg_deployment.config)
    dimension = only(result.json(), "pg-dimension")
    assert result.code == 3
    assert dimension["status"] == "error"
    assert "vector(384)" in dimension["message"] and key in dimension["message"]


# A second session in each isolation level, left idle in its transaction: only a snapshot
# (REPEATABLE READ, SERIALIZABLE, an open cursor) or a transaction id (a write) holds VACUUM back.
IDLE_SESSIONS = {
    "rc-reader": ["BEGIN", "SELECT count(*) FROM mem0"],
    "rc-writer": [
        "BEGIN",
        "UPDATE mem0 SET payload = payload WHERE false",
        "SELECT txid_current()",
    ],
    "rr-reader": ["BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM mem0"],
    "serializable-reader": ["BEGIN ISOLATION LEVEL SERIALIZABLE", "SELECT count(*) FROM mem0"],
    "rc-cursor": ["BEGIN", "DECLARE c CURSOR FOR SELECT id FROM mem0", "FETCH 1 FROM c"],
}


@pytest.mark.slow(
    reason="waits out doctor's 10 s idle-in-transaction threshold twice (its production value)"
)
def test_idle_transactions_are_warnings_only_when_they_hold_back_vacuum(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    sessions = {}
    try:
        for name, statements in IDLE_SESSIONS.items():
            sessions[name] = psycopg.connect(url, autocommit=True, application_name=name)
            for statement in statements:
                sessions[name].execute(statement)
        with psycopg.connect(url, autocommit=True) as connection:  # its statistics: at close
            updated = connection.execute("UPDATE mem0 SET payload = payload").rowcount
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("VACUUM mem0")  # keeps them: the snapshots still see them
        time.sleep(IDLE_IN_TRANSACTION_S + 0.5)
        result = cli("doctor", "--json", config=pg_deployment.config)
        pids = {name: s.info.backend_pid for name, s in sessions.items()}
    finally:
        for session in sessions.values():
            session.close()
    assert result.code == 0, result.out
    warnings = results_of(result.json(), "pg-transaction")
    named = {
        name: w for name in pids for w in warnings if f"pid {pids[name]} ({name}" in w["message"]
    }
    assert set(named) == {"rc-writer", "rr-reader", "serializable-reader", "rc-cursor"}, warnings
    assert all(w["status"] == "warning" for w in named.values())
    assert "with its transaction id" in named["rc-writer"]["message"]
    for name in ("rr-reader", "serializable-reader", "rc-cursor"):
        assert "with its snapshot" in named[name]["message"], named[name]
    for warning in named.values():
        message = warning["message"]
        assert "idle in transaction for" in message
        dead = int(re.search(r"mem0 has (\d+) dead rows", message).group(1))
        assert dead >= updated > 0, message  # n_dead_tup: the updated rows' old versions kept
        assert "VACUUM cannot remove those deleted since" in message
        age = int(re.search(r"open for (\d+) s", message).group(1))
        assert IDLE_IN_TRANSACTION_S <= age < IDLE_IN_TRANSACTION_S + 60
    assert f"pg_terminate_backend({pids['rc-writer']})" in named["rc-writer"]["fix"]
    # once they end, VACUUM removes the rows; the READ COMMITTED reader alone is no warning
    reader = psycopg.connect(url, autocommit=True, application_name="rc-reader")
    try:
        for statement in IDLE_SESSIONS["rc-reader"]:
            reader.execute(statement)
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("VACUUM mem0")
        time.sleep(IDLE_IN_TRANSACTION_S + 0.5)
        after = only(cli("doctor", "--json", config=pg_deployment.config).json(), "pg-transaction")
        pid = reader.info.backend_pid
    finally:
        reader.close()
    assert after["status"] == "ok", after
    assert "mem0 has no dead rows" in after["message"]
    assert f"pid {pid} (rc-reader, role" in after["message"]
    assert "VACUUM is not held back" in after["message"]


def test_a_password_inline_in_the_connection_string_is_a_warning(pg_deployment, cli):
    parts = conninfo_to_dict(pg_deployment.paths.pg_url)
    inline = f"postgresql://postgres:hunter2-inline@/{parts['dbname']}?host={parts['host']}"
    set_store_key(
        pg_deployment.config, r"^connection_string = .*$", f'connection_string = "{inline}"'
    )
    result = cli("doctor", "--json", config=pg_deployment.config)
    report = result.json()
    warning = only(report, "pg-password-inline")
    assert warning["status"] == "warning" and warning["path"].endswith("connection_string")
    assert only(report, "pg-server")["status"] == "ok"  # trust auth: it still connects
    assert "hunter2-inline" not in result.out + result.err


def test_an_inline_password_key_is_a_warning(pg_deployment, cli):
    parts = conninfo_to_dict(pg_deployment.paths.pg_url)
    separate = (
        f'dbname = "{parts["dbname"]}"\nuser = "postgres"\nhost = "{parts["host"]}"\n'
        'password = "hunter2-key"'
    )
    set_store_key(pg_deployment.config, r"^connection_string = .*$", separate)
    result = cli("doctor", "--json", config=pg_deployment.config)
    report = result.json()
    warning = only(report, "pg-password-inline")
    assert warning["status"] == "warning" and warning["path"].endswith("] password")
    assert only(report, "pg-table")["status"] == "ok"
    assert "hunter2-key" not in result.out + result.err


@pytest.mark.parametrize("socket_dir", ["missing", "stopped"])
def test_an_unreachable_server_is_one_line_naming_it_without_the_password(
    pg_deployment, cli, tmp_path, socket_dir
):
    directory = tmp_path / socket_dir
    if socket_dir == "stopped":
        directory.mkdir()  # the directory of a server that is not running: no socket in it
    inline = f"postgresql://postgres:hunter2-gone@/memories?host={directory}"
    set_store_key(
        pg_deployment.config, r"^connection_string = .*$", f'connection_string = "{inline}"'
    )
    result = cli("doctor", "--json", config=pg_deployment.config)
    report = result.json()
    server = only(report, "pg-server")
    assert result.code == 3
    assert server["status"] == "error" and "\n" not in server["message"]
    assert f"postgresql://postgres@{directory}/memories" in server["message"]
    assert not results_of(report, "pg-table")  # nothing judged on a server not read
    route = only(report, "write-route")  # no write reaches a server that is not there
    assert route["status"] == "error" and route["message"].startswith("no write route: "), route
    assert "hunter2-gone" not in result.out + result.err


def test_history_db_on_tmpfs_is_an_error(pg_deployment, cli):
    from memsync.stores.locks import mount_of

    shm = Path("/dev/shm")
    assert shm.is_dir() and mount_of(shm)[1] == "tmpfs", "this test needs a tmpfs at /dev/shm"
    pg_deployment.close()
    volatile = shm / f"memsync-test-{os.getpid()}-history"
    volatile.mkdir()
    try:
        shutil.copy2(pg_deployment.paths.history_db, volatile / "history.db")
        set_history_path(pg_deployment.config, volatile / "history.db")
        result = cli("doctor", "--json", config=pg_deployment.config)
    finally:
        shutil.rmtree(volatile)
    volatile_results = results_of(result.json(), "path-volatile")
    assert result.code == 3
    assert [r["path"] for r in volatile_results] == [str(volatile / "history.db")]
    assert volatile_results[0]["status"] == "error" and "tmpfs" in volatile_results[0]["message"]


def test_history_db_in_a_container_layer_is_an_error(pg_deployment, tmp_path):
    """An overlay mounted in a private mount namespace, as a container's root is (#3717)."""
    assert shutil.which("unshare"), "util-linux unshare is needed"
    pg_deployment.close()
    layers = {name: tmp_path / name for name in ("lower", "upper", "work", "merged")}
    for directory in layers.values():
        directory.mkdir()
    shutil.copy2(pg_deployment.paths.history_db, layers["lower"] / "history.db")
    set_history_path(pg_deployment.config, layers["merged"] / "history.db")
    options = f"lowerdir={layers['lower']},upperdir={layers['upper']},workdir={layers['work']}"
    script = (
        f"mount -t overlay overlay -o {options} {layers['merged']} && exec {sys.executable} "
        f"-m memsync doctor --json --config {pg_deployment.config}"
    )
    completed = subprocess.run(  # noqa: S603 - fixed command line
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],  # noqa: S607
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        check=False,
    )
    import json

    report = json.loads(completed.stdout)
    volatile = results_of(report, "path-volatile")
    assert completed.returncode == 3, completed.stderr
    assert [r["path"] for r in volatile] == [str(layers["merged"] / "history.db")]
    assert (
        volatile[0]["status"] == "error" and "container's writable layer" in volatile[0]["message"]
    )
    assert only(report, "sqlite-integrity")["status"] == "ok"  # it read the overlay's file


@pytest.fixture(scope="module")
def remote_server() -> Any:
    """A second PostgreSQL listening on this machine's first non-loopback IPv4 address (TCP,
    no SSL): from doctor's side, a server on another host. Yields ``(address, port)``."""
    import ipaddress
    import socket
    import tempfile

    import pgserver
    import psutil

    address = next(
        (
            entry.address
            for entries in psutil.net_if_addrs().values()
            for entry in entries
            if entry.family == socket.AF_INET
            and not ipaddress.ip_address(entry.address).is_loopback
        ),
        None,
    )
    if address is None:
        pytest.skip("no non-loopback IPv4 address to listen on")
    with socket.socket() as probe:
        probe.bind((address, 0))
        port = probe.getsockname()[1]
    pgdata = Path(tempfile.mkdtemp(prefix="msync-pgtcp-")) / "data"
    server = pgserver.get_server(pgdata, cleanup_mode=None)  # initdb, started on a socket
    user = server.system_user
    pgserver.pg_ctl(["-w", "stop"], pgdata=pgdata, user=user)
    with (pgdata / "pg_hba.conf").open("a") as hba:
        hba.write(f"host all all {address}/32 trust\n")
    start = ["-w", "-o", f"-h {address} -p {port} -k {pgdata}", "-l", str(pgdata / "tcp.log")]
    pgserver.pg_ctl([*start, "start"], pgdata=pgdata, user=user)
    try:
        yield address, port
    finally:
        pgserver.pg_ctl(["-w", "stop"], pgdata=pgdata, user=user)
        shutil.rmtree(pgdata.parent, ignore_errors=True)


def test_a_server_on_another_host_without_ssl_is_a_warning(pg_deployment, cli, remote_server):
    address, port = remote_server
    keys = f'dbname = "postgres"\nuser = "postgres"\nhost = "{address}"\nport = {port}'
    set_store_key(pg_deployment.config, r"^connection_string = .*$", keys)
    report = cli("doctor", "--json", config=pg_deployment.config).json()
    assert only(report, "pg-server")["status"] == "ok", only(report, "pg-server")
    ssl = only(report, "pg-ssl")
    assert (
        ssl["status"] == "warning" and f"connection to {address} is not encrypted" in ssl["message"]
    )
    assert "sslmode" in ssl["fix"]


# --- the judgements on values a live server cannot produce quickly (pure) ---------------------


def test_a_transaction_open_five_minutes_is_a_warning_even_when_active():
    from memsync.stores.pgvector.doctor import LONG_TRANSACTION_S, judge_sessions
    from memsync.stores.pgvector.health import Session

    sessions = (
        Session(41, "report-job", "app", "active", LONG_TRANSACTION_S + 12, 3.0, xmin_age=7),
        Session(42, "api", "app", "idle in transaction", 4.0, 4.0),  # a short pause: normal
        Session(43, "api", "app", "active", 2.0, 2.0),
    )
    results = judge_sessions("postgresql://app@db/memories", sessions)
    assert [(r.status, r.message.split(" has had")[0]) for r in results] == [
        ("warning", "pid 41 (report-job, role app)")
    ]
    assert f"open for {LONG_TRANSACTION_S + 12:.0f} s (active)" in results[0].message


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("/var/run/postgresql", True),
        ("localhost", True),
        ("127.0.0.1", True),
        ("::1", True),
        ("db.internal", False),
        ("10.0.0.5", False),
    ],
)
def test_which_hosts_are_local(host, local):
    from memsync.stores.pgvector.health import is_local_host

    assert is_local_host(host) is local


@pytest.mark.parametrize(
    ("keys", "inline"),
    [
        ({"connection_string": "host=db user=app password=s3cret dbname=m"}, "connection_string"),
        ({"connection_string": "postgresql://app@db/m"}, None),
        ({"user": "app", "host": "db", "password": "s3cret"}, "password"),
        ({"user": "app", "host": "db", "password": {"env": "PGPASS"}}, None),
        ({"connection_string": {"file": "/etc/memsync/pg-url"}}, None),
    ],
)
def test_which_passwords_are_inline(keys, inline):
    from memsync.config import PGVectorSettings
    from memsync.config.mem0_dict import Secret
    from memsync.stores.pgvector.health import inline_password

    values = {k: Secret(**v) if isinstance(v, dict) else v for k, v in keys.items()}
    assert inline_password(PGVectorSettings(**values)) is inline
