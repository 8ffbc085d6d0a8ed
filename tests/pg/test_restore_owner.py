"""A restored table keeps the owner and the grants of the table it replaces (the app's role).

memsync creates the restored table, so its own role would own it: an app writing as another
role would then fail on its next insert. Real roles on the real server.
"""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.pg.test_restore_pgvector import ids, snapshot


def _roles(url: str, *names: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        for role in names:
            connection.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
            connection.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))


def _owner_and_grants(url: str, table: str) -> tuple[str, set[tuple[str, str]]]:
    with psycopg.connect(url) as connection:
        (owner,) = connection.execute(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = %s::regclass", (table,)
        ).fetchone()
        grants = connection.execute(
            "SELECT grantee, privilege_type FROM information_schema.role_table_grants"
            " WHERE table_name = %s AND grantee <> %s",
            (table, owner),
        ).fetchall()
    return owner, set(grants)


def test_the_restored_table_belongs_to_the_apps_role_with_its_grants(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    suffix = conninfo_to_dict(url)["dbname"][-8:]
    app, reader = f"app_{suffix}", f"reader_{suffix}"
    _roles(url, app, reader)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("ALTER TABLE mem0 OWNER TO {}").format(sql.Identifier(app)))
        connection.execute(sql.SQL("GRANT SELECT ON mem0 TO {}").format(sql.Identifier(reader)))
    snapshot_id = snapshot(cli, pg_deployment)
    restored = cli("restore", snapshot_id, "--force", "--json", config=pg_deployment.config)
    assert restored.code == 0, restored.out + restored.err
    assert _owner_and_grants(url, "mem0") == (app, {(reader, "SELECT")})
    app_url = make_conninfo(url, user=app)
    with psycopg.connect(app_url, autocommit=True) as connection:  # the app writes as before
        connection.execute(
            "UPDATE mem0 SET payload = payload WHERE id = %s", (pg_deployment.seeded.live[0],)
        )


def test_a_role_that_may_not_give_the_table_away_is_refused_and_nothing_changes(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    suffix = conninfo_to_dict(url)["dbname"][-8:]
    app, operator = f"app_{suffix}", f"op_{suffix}"
    _roles(url, app, operator)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("ALTER TABLE mem0 OWNER TO {}").format(sql.Identifier(app)))
        connection.execute(
            sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(operator))
        )
        connection.execute(sql.SQL("GRANT ALL ON mem0 TO {}").format(sql.Identifier(operator)))
    snapshot_id = snapshot(cli, pg_deployment)
    before = ids(url, "mem0")
    (pg_deployment.paths.root / "pg-url").write_text(make_conninfo(url, user=operator) + "\n")
    restored = cli("restore", snapshot_id, "--force", "--json", config=pg_deployment.config)
    assert restored.code != 0
    line = restored.err.strip().splitlines()[-1]
    assert f"{operator} may not replace mem0, which belongs to {app}" in line
    assert f"GRANT {app} TO {operator}" in line
    assert _owner_and_grants(url, "mem0")[0] == app
    assert ids(url, "mem0") == before
    with psycopg.connect(url) as connection:  # nothing was loaded: no staged table left
        staged = connection.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'mem0_restore_%'"
        ).fetchone()
    assert staged == (0,)


def test_a_database_without_the_vector_extension_is_refused_before_anything_even_dry(
    pg_deployment, cli
):
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    with psycopg.connect(url, autocommit=True) as connection:  # a new, empty database
        connection.execute("DROP TABLE mem0")
        connection.execute("DROP EXTENSION vector CASCADE")
    for extra in ("--dry-run", "--force"):
        result = cli("restore", snapshot_id, extra, "--json", config=pg_deployment.config)
        assert result.code == 11, result.out + result.err
        line = result.err.strip().splitlines()[-1]
        assert "no vector extension" in line and "CREATE EXTENSION vector" in line


def test_a_session_holding_the_table_makes_restore_wait_10_s_then_name_it(pg_deployment, cli):
    url = pg_deployment.paths.pg_url
    snapshot_id = snapshot(cli, pg_deployment)
    before = ids(url, "mem0")
    holder = psycopg.connect(make_conninfo(url, application_name="nightly-report"))
    holder.execute("SELECT count(*) FROM mem0")  # its transaction stays open: ACCESS SHARE
    try:
        result = cli("restore", snapshot_id, "--force", "--json", config=pg_deployment.config)
        pid = holder.info.backend_pid
    finally:
        holder.rollback()
        holder.close()
    assert result.code == 75, result.out + result.err
    line = result.err.strip().splitlines()[-1]
    assert f"pid {pid} (nightly-report" in line and "pg_terminate_backend" in line
    assert ids(url, "mem0") == before
    with psycopg.connect(url) as connection:  # rolled back: no staged table left behind
        staged = connection.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'mem0_restore_%'"
        ).fetchone()
    assert staged == (0,)
