"""An S3-compatible provider that lacks some calls: a reverse proxy in front of moto's server.

Some S3-compatible services answer calls they do not implement with the S3 XML error
``NotImplemented`` (HTTP 501). ``provider_lacking(endpoint, *calls)`` serves on 127.0.0.1 and
answers the named calls that way; every other request is forwarded to ``endpoint`` and its
answer returned byte for byte (standard library only: ``http.server`` threads, ``http.client``).

Calls: ``"list-versions"`` (``GET /bucket?versions``), ``"delete-version"`` (``DELETE
/bucket/key?versionId=…``, and ``POST /bucket?delete`` whose body names a ``VersionId``),
``"object-lock"`` (``GET /bucket?object-lock``).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CALLS = ("list-versions", "delete-version", "object-lock")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


def call_of(method: str, target: str, body: bytes) -> str | None:
    """Which of ``CALLS`` a request is, or None. Pure."""
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    key = parts.path.strip("/").partition("/")[2]
    if method == "GET" and not key and "versions" in query:
        return "list-versions"
    if method == "GET" and not key and "object-lock" in query:
        return "object-lock"
    if method == "DELETE" and key and "versionId" in query:
        return "delete-version"
    if method == "POST" and not key and "delete" in query and b"<VersionId>" in body:
        return "delete-version"
    return None


def not_implemented(target: str) -> bytes:
    """The S3 XML error body a service answers for a call it lacks."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NotImplemented</Code>'
        "<Message>A header or query you provided requested a function that is not "
        f"implemented.</Message><Resource>{urlsplit(target).path}</Resource>"
        "<RequestId>memsync-test</RequestId></Error>"
    ).encode()


class Provider:
    """The proxy's state: where it forwards, what it refuses, what it refused (by call)."""

    def __init__(self, upstream: str, refused: frozenset[str]) -> None:
        self.upstream = urlsplit(upstream)
        self.refused = refused
        self.answered: dict[str, int] = {}
        self.lock = threading.Lock()
        self.endpoint = ""


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                raw = bytearray()  # forwarded as sent: the chunk framing included
                while True:
                    line = self.rfile.readline()
                    raw += line
                    size = int(line.split(b";")[0].strip(), 16)
                    if size == 0:
                        while True:  # trailers, then the empty line
                            trailer = self.rfile.readline()
                            raw += trailer
                            if trailer in (b"\r\n", b"\n", b""):
                                return bytes(raw)
                    raw += self.rfile.read(size + 2)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _forward(self) -> None:
            body = self._body()
            call = call_of(self.command, self.path, body)
            if call is not None and call in provider.refused:
                with provider.lock:
                    provider.answered[call] = provider.answered.get(call, 0) + 1
                error = not_implemented(self.path)
                self.send_response(501)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)
                return
            upstream = http.client.HTTPConnection(
                provider.upstream.hostname or "127.0.0.1", provider.upstream.port, timeout=60
            )
            try:
                upstream.putrequest(
                    self.command, self.path, skip_host=True, skip_accept_encoding=True
                )
                for name, value in self.headers.items():
                    if name.lower() != "connection":
                        upstream.putheader(name, value)
                upstream.endheaders(body or None)
                response = upstream.getresponse()
                data = response.read()
                self.send_response(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in HOP_BY_HOP:
                        self.send_header(name, value)
                length = response.getheader("Content-Length")
                if self.command == "HEAD" and length is not None:
                    self.send_header("Content-Length", length)  # HEAD: the object's, no body
                elif response.status not in (204, 304):
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                upstream.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    return Handler


@contextmanager
def provider_lacking(upstream: str, *calls: str) -> Iterator[Provider]:
    """A provider on 127.0.0.1 in front of ``upstream`` answering ``calls`` with NotImplemented.

    ``Provider.endpoint`` is its URL (for ``[s3] endpoint_url``); ``Provider.answered`` counts
    the refusals by call. The server's threads stop when the block ends.
    """
    unknown = set(calls) - set(CALLS)
    assert not unknown, f"no such call {unknown}: {CALLS}"
    provider = Provider(upstream, frozenset(calls))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(provider))
    server.daemon_threads = True
    provider.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="s3-provider", daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
