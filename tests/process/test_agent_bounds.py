"""No peer of the agent can hurt the app: its connections, bytes, time and pauses are bounded.

Each attack runs against a real app as its own uid (65534) with systemd's usual 1,024 open
files, writing through its own mem0 every 50 ms (tests/helpers/own_uid_app.py); the attacker
is root, a peer the agent allows. The app's own count of failed writes must stay 0.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from memsync import config as memsync_config
from memsync.agent.protocol import MAX_BUFFERED_BYTES, MAX_CONNECTIONS_PER_UID
from memsync.stores.agent_client import AgentClient, AgentError, find_agent
from memsync.stores.backends import vector_store_for
from tests.helpers.own_uid_app import OwnUidApp


@pytest.fixture(autouse=True)
def _descriptors() -> Iterator[None]:
    """The attacker needs more descriptors than the app has (1,024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@contextmanager
def _connections(path: Any, count: int) -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            opened.append(client)
            client.connect(str(path))  # blocking: waits while the agent's backlog is full
            client.settimeout(5.0)
        yield opened
    finally:
        for client in opened:
            client.close()


def _agent_sockets(app: OwnUidApp) -> int:
    return sum(1 for target in app.fds() if target.startswith("socket:"))


def test_a_flood_of_connections_fails_no_app_write_and_memsync_still_gets_in() -> None:
    with OwnUidApp() as app:
        with AgentClient.connect(app.socket) as client:
            limits = client.hello["limits"]
        before = len(app.fds())
        with _connections(app.socket, 1100) as flood:
            time.sleep(1.0)  # the clock: 20 app writes while the flood is held open
            assert _agent_sockets(app) <= limits["max_connections"] + 2
            assert len(app.fds()) <= before + limits["max_connections"] + 2
            replies = [c.recv(4096) for c in flood[-5:]]
            assert all(b'"busy"' in reply for reply in replies), replies
            # memsync is root too: every slot of its uid is taken. It asks again while the
            # agent answers busy, and gets in once the flood goes (1 s from now).
            threading.Timer(1.0, lambda: [c.close() for c in flood]).start()
            loaded = memsync_config.load(app.app.config, os.environ)
            client = find_agent(vector_store_for(loaded), loaded)
            assert client is not None
            with client:
                assert client.hello["pid"] == app.pid
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert stats["writes"] >= 10


def test_megabytes_without_a_newline_leave_the_app_within_its_memory_bound() -> None:
    with OwnUidApp() as app:
        with AgentClient.connect(app.socket) as client:  # the agent's thread and buffers warm
            client.call("hello")
        before = app.rss_bytes()
        peak = before
        chunk = b"x" * (1024 * 1024)

        def send_four_mib() -> None:
            for _ in range(150 // 6):
                with _connections(app.socket, 1) as (client,):
                    try:
                        for _ in range(4):
                            client.sendall(chunk)
                    except OSError:
                        pass  # closed by the agent (busy, or over a request's size)

        senders = [threading.Thread(target=send_four_mib) for _ in range(6)]
        for sender in senders:
            sender.start()
        while any(sender.is_alive() for sender in senders):
            peak = max(peak, app.rss_bytes())
            time.sleep(0.01)
        deadline = time.monotonic() + 3  # the last connections are being dropped: their
        while (after := app.rss_bytes()) - before >= 16 * 1024 * 1024:  # buffers go then
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    # 150 x 4 MiB sent: the agent holds at most MAX_BUFFERED_BYTES (8 MiB) unread, plus one
    # recv and the copies of a line; the app gave back what it took.
    assert peak - before < MAX_BUFFERED_BYTES + 24 * 1024 * 1024, (before, peak)
    assert after - before < 16 * 1024 * 1024, (before, after)


def test_a_slow_sender_is_cut_off_however_it_trickles() -> None:
    with OwnUidApp({"request_deadline_s": 2.0}) as app:
        with _connections(app.socket, 100) as trickling:
            held = trickling[:MAX_CONNECTIONS_PER_UID]
            for client in trickling[MAX_CONNECTIONS_PER_UID:]:
                assert b'"busy"' in client.recv(4096)  # over the cap: answered and closed
            started = time.monotonic()
            cut = 0
            for _ in range(40):  # a byte every 0.1 s: never idle, never a whole request
                for client in held:
                    try:
                        client.sendall(b"{")
                    except OSError:
                        pass
                time.sleep(0.1)
            for client in held:
                client.settimeout(1.0)
                reply = client.recv(4096)
                cut += b"not finished within 2 s" in reply
            elapsed = time.monotonic() - started
        assert cut == len(held), f"{cut} of {len(held)} cut off after {elapsed:.1f} s"
        with AgentClient.connect(app.socket) as client:  # memsync still gets in
            assert client.hello["pid"] == app.pid
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]


def test_renewing_a_pause_never_holds_app_writes_past_the_lease() -> None:
    with OwnUidApp({"lease_max_s": 2.0}) as app:
        with AgentClient.connect(app.socket) as client:
            granted = client.call("pause", lease_s=1.5)["lease_s"]
            assert granted == 1.5
            refused = None
            started = time.monotonic()
            while time.monotonic() - started < 5.0:  # renew every 0.5 s, as a hostile peer
                time.sleep(0.5)
                try:
                    client.call("pause", lease_s=1.5)
                except AgentError as error:
                    refused = error
                    break
            assert refused is not None and refused.kind == "busy", "renewals went on for ever"
            assert "lease_max_s" in str(refused)
            time.sleep(0.5)  # the clock: past the 2 s bound, app writes go on
            try:
                client.call("pause", lease_s=1.5)  # a new pause at once: the bound holds too
            except AgentError as error:
                assert error.kind == "busy"
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    # the app's slowest write waited for the pause: never longer than lease_max_s (2 s)
    assert stats["slowest_write_s"] < 2.0 + 0.5, stats


def test_a_bad_request_reply_carries_the_request_id() -> None:
    with OwnUidApp() as app:
        with _connections(app.socket, 1) as (client,):
            client.sendall(
                b'{"v": 1, "id": "a1", "op": "rm_rf"}\n{"v": 9, "id": 7, "op": "hello"}\n'
                b'{"v": 1, "id": "a3", "op": "delete", "args": {"nope": 1}}\n'
            )
            reader = client.makefile("rb")
            replies = [json.loads(reader.readline()) for _ in range(3)]
        assert [r["id"] for r in replies] == ["a1", 7, "a3"]
        assert {r["error"]["type"] for r in replies} == {"bad-request"}
        app.stop()


def test_a_peer_that_never_reads_its_replies_stalls_no_one_and_is_cut_off() -> None:
    with OwnUidApp({"request_deadline_s": 2.0}) as app:
        alone = _agent_sockets(app)  # the listening socket
        with _connections(app.socket, 1) as (silent,):
            hello = b'{"v": 1, "id": 1, "op": "hello"}\n'
            silent.sendall(hello * 3000)  # ~100 KB of requests; it never reads a reply
            started = time.monotonic()
            with AgentClient.connect(app.socket, timeout_s=5.0) as client:  # not stuck behind it
                assert client.hello["pid"] == app.pid
            assert time.monotonic() - started < 1.0
            deadline = time.monotonic() + 8
            while _agent_sockets(app) > alone:  # the silent peer's connection goes
                assert time.monotonic() < deadline, "the peer that never read was never cut off"
                time.sleep(0.1)
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert stats["slowest_write_s"] < 0.5, stats


def test_an_expensive_request_is_refused_before_it_costs_the_app() -> None:
    with OwnUidApp() as app:
        with AgentClient.connect(app.socket) as client, pytest.raises(AgentError) as refused:
            conditions = [{"user_id": str(n)} for n in range(15_000)]  # a filter, not a scope
            client.call("search", text="x", filters={"user_id": "carol", "OR": conditions})
        assert refused.value.kind == "bad-request" and "scope" in str(refused.value)
        with AgentClient.connect(app.socket) as client, pytest.raises(AgentError) as bomb:
            client.call("hello", pad=[[] for _ in range(1_000_000)])  # under 4 MiB
        # only the count taken before parsing answers with this message (agent/protocol.py);
        # what the app paid is its writers' slowest call, below, not this test's wall clock
        assert "JSON arrays and objects" in str(bomb.value)
        stats = app.stop()
    assert stats["failures"] == 0, stats["errors"]
    assert stats["slowest_write_s"] < 0.5, stats
