"""An embedding service's HTTP answers during migrate: a 401 is not retried, a Retry-After is
honoured. The service is a real HTTP server on 127.0.0.1 speaking OpenAI's embeddings API; the
app's own mem0 calls it with its own ``openai`` client (mem0's ``openai`` embedder).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.migrate import target_config

DIMS = 256


class Service:
    """Answers each POST /v1/embeddings with the next of ``answers`` (then 200 for ever)."""

    def __init__(self, answers: list[tuple[int, dict[str, str]]]) -> None:
        self.answers = list(answers)
        self.seen: list[float] = []  # when each request came (monotonic)
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                service.seen.append(time.monotonic())
                status, headers = service.answers.pop(0) if service.answers else (200, {})
                if status == 200:  # one embedding per input, as the API answers a batch
                    texts = request.get("input")
                    count = len(texts) if isinstance(texts, list) else 1
                    vector = [1.0 / DIMS**0.5] * DIMS
                    data = [{"object": "embedding", "index": n, "embedding": vector}
                            for n in range(count)]  # fmt: skip
                    body = {"object": "list", "model": "m", "usage": {"prompt_tokens": count,
                            "total_tokens": count}, "data": data}  # fmt: skip
                else:
                    body = {"error": {"message": f"status {status}", "type": "x", "code": None}}
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {"content-type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def service() -> Iterator[Any]:
    made: list[Service] = []

    def start(answers: list[tuple[int, dict[str, str]]]) -> Service:
        made.append(Service(answers))
        return made[-1]

    yield start
    for each in made:
        each.server.shutdown()


def _new_config(deployment: Any, root: Path, url: str) -> Path:
    new = target_config(deployment.paths, root, embedder="openai", dims=DIMS)
    new.write_text(
        new.read_text().replace(
            '[mem0.embedder]\nprovider = "openai"\n',
            '[mem0.embedder]\nprovider = "openai"\n\n[mem0.embedder.config]\n'
            f'api_key = "sk-test"\nopenai_base_url = "{url}"\nmodel = "m"\n'
            f"embedding_dims = {DIMS}\n",
        )
    )
    return new


def test_a_401_is_not_retried(make_deployment: Any, tmp_path: Path, cli: Any, service: Any):
    deployment = make_deployment(count=5)
    deployment.close()
    down = service([(401, {})] * 20)
    result = cli("migrate", "--to", str(_new_config(deployment, tmp_path / "new", down.url)),
                 config=deployment.config)  # fmt: skip
    assert result.code == 11, result.err
    assert "401" in result.err
    assert len(down.seen) == 1, f"{len(down.seen)} requests: a bad key was retried"


def test_a_retry_after_is_honoured(make_deployment: Any, tmp_path: Path, cli: Any, service: Any):
    deployment = make_deployment(count=2)
    deployment.close()
    # openai's own client tries 3 times (it honours Retry-After too); then memsync waits
    limited = service([(429, {"retry-after": "2"})] * 3)
    result = cli("migrate", "--to", str(_new_config(deployment, tmp_path / "new", limited.url)),
                 "--json", config=deployment.config)  # fmt: skip
    assert result.code == 0, result.err
    assert len(limited.seen) >= 4
    waited = limited.seen[3] - limited.seen[2]  # memsync's own wait, after the client gave up
    assert waited >= 2.0, f"memsync waited {waited:.2f} s, the service asked for 2 s"
