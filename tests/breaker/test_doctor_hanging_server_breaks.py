"""doctor on a pgvector server that accepts TCP and never answers: one connect timeout, not one per probe.

A server that hangs (overloaded, a half-dead host, a firewall that swallows the startup packet)
makes every connection wait ``CONNECT_TIMEOUT_S`` (10 s). doctor connects again for each probe
that needs the server (pg-server, check, the pre-restore tables, and now write-route's
``store.present()``), each waiting the full timeout for the answer the first already got:
measured 47 s for one run, while a check is told the same after 10. Now a run that has seen the
server time out says so for the rest (``connect.TIMED_OUT_MEMORY_S``): one timeout.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from tests.pg.test_doctor_pgvector import only, set_store_key


@pytest.mark.slow(reason="one 10 s connect timeout, the probes after it told at once")
def test_doctor_waits_for_a_hanging_server_once(pg_deployment: Any, cli: Any) -> None:
    listener = socket.socket()  # accepts connections (the kernel's backlog), never answers
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    try:
        set_store_key(
            pg_deployment.config,
            r"^connection_string = .*$",
            f'connection_string = "postgresql://postgres@127.0.0.1:{port}/memories"',
        )
        started = time.monotonic()
        result = cli("doctor", "--json", config=pg_deployment.config)
        took = time.monotonic() - started
    finally:
        listener.close()
    assert result.code == 3, result.err[-400:]
    assert only(result.json(), "write-route")["status"] == "error"
    assert took < 25, f"doctor took {took:.0f} s on a server that timed out after 10"
