"""doctor on a pgvector deployment whose password secret cannot be read: no report at all (exit 10).

The write-route probe now asks the store whether it can be reached (``store.present()``) and
turns an UnavailableError into its error result; a password whose environment variable is
unset (doctor run from a shell without the app's environment, the very case it should
diagnose) raises ConfigError from the same call, which nothing in doctor catches there: doctor
stops with the config error and none of the results it had made (pg-server and check already
report the secret as an error). Before the write-route change doctor printed its report.
"""

from __future__ import annotations

import os
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from tests.pg.test_doctor_pgvector import only, set_store_key

UNSET = "MEMSYNC_BREAKER3_PASSWORD_NEVER_SET"


def test_doctor_reports_a_password_variable_that_is_unset(pg_deployment: Any, cli: Any) -> None:
    assert UNSET not in os.environ
    parts = conninfo_to_dict(pg_deployment.paths.pg_url)
    separate = (
        f'dbname = "{parts["dbname"]}"\nuser = "postgres"\nhost = "{parts["host"]}"\n'
        f'password = {{env = "{UNSET}"}}'
    )
    set_store_key(pg_deployment.config, r"^connection_string = .*$", separate)
    result = cli("doctor", "--json", config=pg_deployment.config)
    assert result.code == 3, (result.code, result.out[-400:], result.err[-600:])
    route = only(result.json(), "write-route")
    assert route["status"] == "error", route
