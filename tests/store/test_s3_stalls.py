"""An S3 endpoint that stops answering: exit 11 (unreachable), never a bug, never a verdict.

A real TCP relay in front of moto's server forwards every request and stalls (holds the
connection without answering) those whose request line matches a pattern, so botocore's read
timeout (``[s3] timeout_s``) fires on exactly the reads under test.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.conftest import s3_section

PREFIX = "memsync/stall"


class StallingRelay:
    """Relay 127.0.0.1:<port> to ``upstream``; hold connections whose request matches ``stall``."""

    def __init__(self, upstream: str, stall: bytes) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.stall = re.compile(stall)
        self.stalled = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.held += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, requests: bool) -> None:
        try:
            while data := source.recv(65536):
                if requests and self.stall.search(data):
                    self.stalled += 1
                    return  # hold: the request never reaches the server, no answer comes
                target.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        self.listener.close()
        for held in self.held:
            held.close()


@pytest.fixture
def stalled(make_deployment: Any, s3_endpoint: str, bucket: str, cli: Any) -> Iterator[Any]:
    """A deployment with one uploaded snapshot, and ``relay(pattern)`` to reach it stalled."""
    deployment = make_deployment(count=10, extra_config=s3_section(s3_endpoint, bucket, PREFIX))
    deployment.close()
    made = cli("snapshot", "create", "--upload", "--json", config=deployment.config)
    assert made.code == 0, made.err
    deployment.snapshot_id = made.json()["id"]
    relays: list[StallingRelay] = []

    def relay(pattern: bytes) -> StallingRelay:
        relay = StallingRelay(s3_endpoint, pattern)
        relays.append(relay)
        text = deployment.config.read_text().replace(s3_endpoint, relay.endpoint)
        deployment.config.write_text(text + "timeout_s = 0.3\n")
        return relay

    deployment.relay = relay
    deployment.keys = lambda: {
        item["Key"]
        for item in boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
        .list_objects_v2(Bucket=bucket)
        .get("Contents", [])
    }
    yield deployment
    for each in relays:
        each.close()


def test_download_whose_object_reads_time_out_exits_11(stalled, cli, tmp_path):
    """s3transfer retries the stalled read, then gives up: that is exit 11, not 1 (a bug)."""
    relay = stalled.relay(rb"^GET /[^ ]*/history\.db ")
    result = cli(
        "snapshot", "download", stalled.snapshot_id, str(tmp_path / "dl"), config=stalled.config
    )
    assert relay.stalled >= 2  # the read was retried
    assert result.code == 11, result.err
    assert "history.db" in result.err and "no answer in time" in result.err
    assert not (tmp_path / "dl" / stalled.snapshot_id).exists()
    assert not any(p.name.endswith(".partial") for p in (tmp_path / "dl").glob("*"))


def test_remote_verify_whose_manifest_read_times_out_exits_11_and_records_nothing(stalled, cli):
    """Could not read is not 'read and found different': no finding, no verified.json."""
    relay = stalled.relay(rb"^GET /[^ ]*/manifest\.json ")
    target = f"s3://{stalled.snapshot_id}"
    result = cli("snapshot", "verify", "--json", target, config=stalled.config)
    assert relay.stalled >= 1
    assert result.code == 11, (result.out, result.err)
    assert "manifest.json" in result.err and "no answer in time" in result.err
    assert not any(key.endswith("/verified.json") for key in stalled.keys())


def test_remote_verify_whose_file_read_times_out_exits_11_and_records_nothing(stalled, cli):
    relay = stalled.relay(rb"^GET /[^ ]*/history\.db ")
    result = cli(
        "snapshot", "verify", "--json", f"s3://{stalled.snapshot_id}", config=stalled.config
    )
    assert relay.stalled >= 1
    assert result.code == 11, (result.out, result.err)
    assert "S3 verify" in result.err and "history.db (reading it back)" in result.err
    assert not any(key.endswith("/verified.json") for key in stalled.keys())
